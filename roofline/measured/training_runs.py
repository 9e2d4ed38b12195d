"""The training development set: published training runs, and the cluster model checked against them
(appendix C, chapter 9).

:func:`development_runs` reads the published training runs of ``roofline/data/published`` (Korthikanti et
al. 2022, Table 5; Narayanan et al. 2021, Table 1), for checking the cluster model, never for fitting it:
:func:`check_run` prices each at the layout its source gives (the fastest that fits where the source leaves a
setting open) under the calibrated A100 roof and the datasheet's. :func:`megatron_searches` sets each
Megatron-LM run beside the best layout the planner finds for the same cluster under the software of 2021.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from types import MappingProxyType

from roofline.core.calibration import get_roof
from roofline.core.checks import unknown_name
from roofline.core.cluster_roof import ClusterRoof
from roofline.core.model import model_from_config
from roofline.parallel.cluster import (StepPrice, TrainLayout, estimate_step, fastest_fitting, open_layouts,
                                       price_step, search)
from roofline.parallel.planner import PUBLISHED, gpt_model

__all__ = ["DevelopmentRun", "development_runs", "development_layout", "development_layouts", "DevelopmentCheck", "check_run", "train_argv",
           "development_checks", "development_ratios", "modern_runs", "modern_checks", "MODERN_SOFTWARE", "MEGATRON_2021", "MegatronSearch", "megatron_searches"]


@dataclass(frozen=True)
class DevelopmentRun:
    """One published training run, as its source gives it (``raw``), with the time it took per step."""

    id: str
    raw: dict

    @property
    def published_s(self) -> float:
        rep = self.raw["reported"].get("iteration_time_s")
        return float(rep if rep is not None else self.raw["derived"]["implied_iteration_time_s"])

    @property
    def source(self) -> str:
        return self.raw["source"]["title"]

    @property
    def label(self) -> str:
        """A short name for tables and controls: the model and the recomputation ('GPT 175B, selective'); for a
        modern run the model and its GPUs ('GPT-3 175B, 512 GPUs')."""
        name = self.raw["model"]["name"].split(" (")[0]
        if self.modern:
            return f"{name}, {self.raw['gpu_count']:,} GPUs"
        return f"{name}, {_recompute(self.raw['activation_recomputation'])}"

    @property
    def gpu(self) -> str:
        """The catalog key of the run's GPU ('a100-sxm-80gb', 'h100-sxm')."""
        name = self.raw["gpu"]
        for key, words in (("a100-sxm-80gb", ("A100", "80GB")), ("h100-sxm", ("H100", "SXM"))):
            if all(w in name for w in words):
                return key
        raise ValueError(f"run {self.id!r}: no catalog key for the GPU {name!r}")

    @property
    def modern(self) -> bool:
        """Whether the run is of the modern set (NeMo 24.07 on H100s, fp8), not of the 2021-22 one."""
        return self.id.startswith("nemo")

    def config(self) -> dict:
        """The run's model as the dict of a Hugging Face config.json (what ``roofline train`` reads): GPT-2's
        layer for the GPT runs, Llama's for Llama (SwiGLU, RMSNorm, rotary), GPT-NeoX's plain MLP with rotary
        positions for Nemotron (its squared ReLU moves the bytes of any plain activation; its LayerNorm keeps no
        biases, which GPT-NeoX's layer counts: a few parameters a layer)."""
        md, r = self.raw["model"], self.raw
        ffn = md.get("ffn_type", "GeLU")
        if ffn.startswith("GeLU"):
            return {"model_type": "gpt2", "n_embd": md["hidden"], "n_head": md["heads"], "n_layer": md["layers"],
                    "n_positions": r["seq_len"], "vocab_size": md["vocab"]}
        return {"model_type": "llama" if ffn.startswith("SwiGLU") else "gpt_neox", "hidden_size": md["hidden"],
                "num_attention_heads": md["heads"], "num_key_value_heads": md["kv_heads"],
                "num_hidden_layers": md["layers"], "intermediate_size": md["ffn_hidden"], "vocab_size": md["vocab"],
                "tie_word_embeddings": md["tied_embeddings"], "max_position_embeddings": r["seq_len"]}

    @property
    def settings_unstated(self) -> bool:
        """True where the source leaves the micro-batch or the interleaving depth open, so that the model
        takes the fastest that fits."""
        if self.modern:
            return self.raw["micro_batch"] is None
        sched = self.raw["pipeline_schedule"].lower()
        unstated_depth = self.raw["pp"] > 1 and sched.startswith("interleaved") and "virtual stages not stated" in sched
        return self.raw["micro_batch"] is None or unstated_depth


@lru_cache(maxsize=1)
def development_runs() -> tuple[DevelopmentRun, ...]:
    """The published training runs of the development set (18 on A100 80GB clusters)."""
    text = resources.files("roofline.data.published").joinpath("training-dev-set.json").read_text()
    return tuple(DevelopmentRun(r["id"], r) for r in json.loads(text)["runs"])


@lru_cache(maxsize=1)
def modern_runs() -> tuple[DevelopmentRun, ...]:
    """The modern development set: 12 runs of NVIDIA NeMo 24.07's published fp8 performance summary on 8 to 512
    H100 SXMs (GPT-3 5B to 175B, Llama 2 and 3, Nemotron), for checking, never fitting."""
    text = resources.files("roofline.data.published").joinpath("training-dev-set-modern.json").read_text()
    return tuple(DevelopmentRun(r["id"], r) for r in json.loads(text))


MODERN_SOFTWARE = MappingProxyType({"dtype": "fp8", "fp8_recipe": "te-delayed", "zero_stage": 1, "attention": "flash",
                                    "attention_kernel": "cudnn", "overlap_grad_reduce": True})
"""How NeMo 24.07 ran the modern set, as the layout's settings: Transformer Engine's fp8 with delayed scaling (the
table's "FP8"; the records' precision), the distributed optimizer (ZeRO-1), cuDNN's fused attention (the kernel
Transformer Engine prefers on Hopper), and the gradient reduction overlapped with the backward pass."""


def _recompute(text: str) -> str:
    return "selective" if text.startswith("selective") else "full" if text.startswith("full") else "none"


def development_layout(run: DevelopmentRun):
    """A development run as its source gives it: the model, the :class:`~roofline.parallel.cluster.TrainLayout`
    of its published settings, and the settings the source leaves open (of
    :data:`~roofline.parallel.cluster.OPEN_SETTINGS`: the micro-batch where unstated, the interleaving depth where
    the schedule is interleaved without one). The software of 2021-22: Megatron-LM's explicit attention kernel,
    fp16 with fp16 gradients, no ZeRO, the gradient reduction after the backward pass."""
    r = run.raw
    md = r["model"]
    if run.modern:
        m = model_from_config(run.config(), name=run.label.split(",")[0].lower().replace(" ", "-"))
        vp = r["virtual_pipeline_stages"] or 1
        lay = TrainLayout(seq=r["seq_len"], tp=r["tp"], cp=r["cp"], pp=r["pp"], dp=r["dp"],
                          micro_batch=r["micro_batch"] or 1, global_batch=r["global_batch_sequences"],
                          recompute=_recompute(r["activation_recomputation"]),
                          sequence_parallel=bool(r["sequence_parallel"]), schedule="interleaved" if vp > 1 else "1f1b",
                          chunks=vp, grad_dtype="bf16", **MODERN_SOFTWARE)
        return m, lay, (("micro_batch",) if r["micro_batch"] is None else ())
    m = gpt_model(md["hidden"], md["heads"], md["layers"], vocab=md["vocab"], seq=r["seq_len"])
    sched = r["pipeline_schedule"].lower()
    open_ = []
    if r["pp"] > 1 and "3 virtual" in sched:
        schedule, chunks = "interleaved", 3
    elif r["pp"] > 1 and sched.startswith("interleaved"):
        schedule, chunks = "interleaved", 1
        open_.append("chunks")
    else:
        schedule, chunks = "1f1b", 1
    if r["micro_batch"] is None:
        open_.insert(0, "micro_batch")
    lay = TrainLayout(seq=r["seq_len"], tp=r["tp"], cp=r["cp"], pp=r["pp"], dp=r["dp"],
                      micro_batch=r["micro_batch"] or 1, global_batch=r["global_batch_sequences"],
                      recompute=_recompute(r["activation_recomputation"]), sequence_parallel=bool(r["sequence_parallel"]),
                      schedule=schedule, chunks=chunks, zero_stage=0, attention="standard", overlap_grad_reduce=False,
                      dtype="fp16", grad_dtype="fp16")
    return m, lay, tuple(open_)


def train_argv(run: DevelopmentRun, model: str = "config.json") -> tuple[str, ...]:
    """The ``roofline train`` arguments that ask for ``run`` as its source gives it, ``model`` the path of its
    config.json (:meth:`DevelopmentRun.config`): the published settings, ``auto`` for those left open, and the
    software's kernels named (appendix C prints the same numbers as the command)."""
    _, lay, open_ = development_layout(run)
    r = run.raw
    argv = ["train", model, "--gpu", run.gpu, "--nodes", str(r["gpu_count"] // lay.gpus_per_node),
            "--tp", str(lay.tp), "--pp", str(lay.pp), "--seq", str(lay.seq), "--global-batch", str(lay.batch),
            "--micro-batch", "auto" if "micro_batch" in open_ else str(lay.micro_batch), "--recompute", lay.recompute,
            "--sequence-parallel", "on" if lay.sp else "off",
            "--attention", "explicit" if lay.attention == "standard" else "flash", "--dtype", lay.dtype,
            "--zero", str(lay.zero_stage)]
    if lay.recipe is not None:
        argv += ["--fp8-recipe", lay.recipe.name]
    if lay.attention_kernel is not None:
        argv += ["--attention-kernel", lay.attention_kernel]
    if lay.cp > 1:
        argv += ["--cp", str(lay.cp)]
    if not lay.overlap_grad_reduce:
        argv.append("--no-overlap")
    if lay.schedule == "interleaved" or "chunks" in open_:
        argv += ["--schedule", lay.schedule, "--chunks", "auto" if "chunks" in open_ else str(lay.chunks)]
    return tuple(argv)


def development_layouts(run: DevelopmentRun, roof: ClusterRoof | None = None):
    """The layouts a development run may have used: its published settings (:func:`development_layout`), and every
    micro-batch (1, 2, 4, 8) and interleaving depth its source leaves unstated
    (:func:`~roofline.parallel.cluster.open_layouts`). The model, then the layouts."""
    m, lay, open_ = development_layout(run)
    return m, list(open_layouts(m, lay, open_))


@dataclass(frozen=True)
class DevelopmentCheck:
    """One development run priced: the layout chosen (the fastest that fits under the estimate, where the
    source leaves settings open), its floor and estimate, and the published time."""

    run: DevelopmentRun
    floor: StepPrice
    estimate: StepPrice

    @property
    def published_s(self) -> float:
        return self.run.published_s

    @property
    def ratio(self) -> float:
        """Estimate over published: below 1 the model is too fast."""
        return self.estimate.time / self.published_s

    @property
    def floor_ratio(self) -> float:
        """Floor over published: never above 1 if the floor is one."""
        return self.floor.time / self.published_s


def check_run(run: DevelopmentRun, roof: ClusterRoof | None = None) -> DevelopmentCheck:
    """Price one development run at its published settings, the open ones taken at the fastest that fits: through
    :func:`~roofline.parallel.cluster.estimate_step` under the calibrated A100 roof and the datasheet's (what
    ``roofline train`` answers for the same flags), or under ``roof`` when given."""
    m, lay, open_ = development_layout(run)
    if roof is None:
        floor, best = estimate_step(m, run.gpu, lay, roof="calibrated", open=open_)
        return DevelopmentCheck(run, floor, best)
    best = fastest_fitting(m, open_layouts(m, lay, open_), roof)
    floor = price_step(m, best.layout, get_roof(roof.hardware, "datasheet", roof.dtype))
    return DevelopmentCheck(run, floor, best)


def development_checks(roof: ClusterRoof | None = None) -> tuple[DevelopmentCheck, ...]:
    """Every development run priced (appendix C's table)."""
    return tuple(check_run(r, roof) for r in development_runs())


def modern_checks() -> tuple[DevelopmentCheck, ...]:
    """Every run of the modern development set priced under the calibrated H100 roof in fp8 and the datasheet's
    (appendix C's modern table)."""
    return tuple(check_run(r) for r in modern_runs())


def development_ratios(checks, kind: str = "estimate") -> tuple[float, ...]:
    """Predicted over published time for each check: the calibrated ``'estimate'`` or the datasheet ``'floor'``."""
    if kind not in ("estimate", "floor"):
        raise unknown_name("kind", kind, ("estimate", "floor"))
    return tuple(getattr(c, kind).time / c.published_s for c in checks)


# ------------------------------------------------------------------------------ for chapter 9's published runs

# What Megatron-LM's 2021 software could run, as the search's arguments: no context or expert parallelism, no ZeRO, the explicit attention kernel,
# fp16 with fp16 gradients, no overlap of the gradient reduction, no sequence parallelism, recomputation none or
# full (selective came in 2022), and every interleaving depth up to 16 that divides a stage's layers.
MEGATRON_2021 = MappingProxyType({"cps": (1,), "eps": (1,), "zero_stages": (0,), "attention": "standard", "dtype": "fp16",
                                  "overlap_grad_reduce": False, "sequence_parallel": False,
                                  "recomputes": ("none", "full"), "chunks": tuple(range(1, 17))})


@dataclass(frozen=True)
class MegatronSearch:
    """Chapter 9: one of Megatron-LM's GPT runs (:data:`roofline.parallel.planner.PUBLISHED` ``'megatron_gpt'``)
    as the development set prices it (``check``: published time, floor and estimate of the published layout),
    and the calibrated search of the same cluster and batch under :data:`MEGATRON_2021`: ``best`` over both
    recomputation policies, ``best_full`` with the published full recomputation held."""

    label: str
    published: dict
    check: DevelopmentCheck
    best: object
    best_full: object

    @property
    def lead(self) -> float:
        """The published layout's estimate over the search's best: above 1, the search finds a faster layout."""
        return self.check.estimate.time / self.best.time

    @property
    def lead_full(self) -> float:
        """The same, against the best with full recomputation held."""
        return self.check.estimate.time / self.best_full.time


def megatron_searches(roof: ClusterRoof | None = None) -> tuple[MegatronSearch, ...]:
    """Chapter 9: each Megatron-LM GPT run of :data:`~roofline.parallel.planner.PUBLISHED` beside its development
    check and the best layouts a calibrated search (A100 80GB, fp16 unless ``roof`` says otherwise) finds for the
    same GPUs (nodes of eight), sequence and batch under :data:`MEGATRON_2021`."""
    roof = roof or get_roof("a100-sxm-80gb", "calibrated", "fp16")
    checks = {c.run.raw["gpu_count"]: c for c in development_checks(roof) if c.run.id.startswith("megatron-ptdp-")}
    out = []
    for run in PUBLISHED["megatron_gpt"][0]:
        check = checks[run["gpus"]]
        m = gpt_model(run["hidden"], run["heads"], run["layers"], seq=check.run.raw["seq_len"])
        kwargs = dict(MEGATRON_2021)
        args = dict(gpus=run["gpus"], seq=check.run.raw["seq_len"], global_batch=run["batch"], gpus_per_node=8)
        best = search(m, roof, **args, **kwargs).best
        kwargs["recomputes"] = ("full",)
        best_full = search(m, roof, **args, **kwargs).best
        out.append(MegatronSearch(f"GPT {run['params'] / 1e9:.0f}B", run, check, best, best_full))
    return tuple(out)
