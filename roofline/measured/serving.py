"""The serving development set: published serving benchmarks, and the serving model checked against them
(chapter 13).

Each run is priced by :func:`roofline.serving.deployment.serving_pair` under both roofs: the **ceiling** (the
datasheet roof, everything overlapped, the cache growing with the answer into all the HBM the weights leave)
and the **estimate** (the calibrated roof, nothing overlapped, the runtime's own memory policy).

The development set is NVIDIA TensorRT-LLM's published throughput tables
(``roofline/data/published/serving-dev-set.json``): offline benchmarks of fixed prompt and answer lengths,
every request issued at once, FP8 weights, activations and cache, one tensor-parallel group. It is for
checking, never for fitting: nothing here is chosen to match it. The runtime's settings the estimate
takes are the documented defaults of the tool that ran it (:data:`TRTLLM_RUNTIME`), each with its source:
the capacity scheduler reserves a request's prompt and whole answer when it starts (``GUARANTEED_NO_EVICT``),
90% of the HBM left after the weights goes to the cache, and ``trtllm-bench`` caps the batch and the tokens
of a step by its own rule (:func:`trtllm_bench_limits`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from types import MappingProxyType
from typing import NamedTuple

from roofline.core.checks import count
from roofline.core.hardware import Hardware, get_hardware
from roofline.core.model import load_model
from roofline.core.calibration import get_roof
from roofline.serving.deployment import (Deployment, StepTime, Sustained, Workload, largest_batch, serving_pair,
                                         step_time)

__all__ = ["TRTLLM_RUNTIME", "trtllm_bench_limits", "trtllm_bench_deployment", "ServingRun", "serving_runs", "ServingCheck", "check_serving_run",
           "serving_dev_checks", "CEILING_RULE", "ESTIMATE_BAND"]

ESTIMATE_BAND = 1.3
"""The calibrated estimate's target: within this factor of every published figure of the development set."""

CEILING_RULE = "at or above every published figure"

TRTLLM_RUNTIME = MappingProxyType({
    # setting: (value, bibliography key, what the source says)
    "kv_policy": ("reserve", "trtllm-runtime-options",
                  "the capacity scheduler's default, GUARANTEED_NO_EVICT, never pauses a request it started: it "
                  "admits one only when its prompt and longest answer fit"),
    "kv_fraction": (0.9, "trtllm-kv-cache", "free_gpu_memory_fraction defaults to 0.9 of the memory left after "
                                            "the weights"),
    "max_batch": (4096, "trtllm-bench-tuning", "trtllm-bench caps the batch at 4,096 requests (divided by the "
                                               "pipeline stages), rounded up to a multiple of 32, 128 or 256"),
    "max_tokens": (32768, "trtllm-bench-tuning", "and the tokens of a step at the batch times (1 + I / O), "
                                                 "at most 32,768 and at least 2,048, rounded up"),
    "build_fraction": (0.95, "trtllm-bench-tuning", "the build's estimate of the requests that fit takes 95% of "
                                                    "the memory left after the weights"),
    "head_dtype": ("bf16", "modelopt-quant-config", "the FP8 build quantizes with ModelOpt's FP8_DEFAULT_CFG, which "
                                                   "leaves the output head ('*lm_head*') unquantized; the "
                                                   "embedding table is not a linear layer and stays bf16 too"),
})
"""TensorRT-LLM's documented defaults, which the development set's runs used (none of them set otherwise)."""


def _round_up(x: float, step: int) -> int:
    return int(step * math.ceil(x / step))


def trtllm_bench_limits(requests_that_fit: float, input_tokens: int, output_tokens: int, pp: int = 1) -> tuple[int, int]:
    """``trtllm-bench``'s batch and step-token caps (its ``finetune_setting``, :data:`TRTLLM_RUNTIME`): from
    the requests its build estimates fit, the batch ``min(fit, 4096) / pp`` rounded up (to 32 below 256, at
    least 64; to 128 below 1,024; else to 256), the step's tokens that batch times ``1 + I / O``, at most
    32,768, rounded up (to 256 below 4,096, at least 2,048; to 512 below 8,192; else to 1,024)."""
    raw_bs = min(float(requests_that_fit), TRTLLM_RUNTIME["max_batch"][0]) / count("pp", pp)
    raw_tok = min(raw_bs * (1 + input_tokens / output_tokens), TRTLLM_RUNTIME["max_tokens"][0])
    bs = max(64, _round_up(raw_bs, 32)) if raw_bs < 256 else _round_up(raw_bs, 128) if raw_bs < 1024 else _round_up(raw_bs, 256)
    tok = max(2048, _round_up(raw_tok, 256)) if raw_tok < 4096 else _round_up(raw_tok, 512) if raw_tok < 8192 \
        else _round_up(raw_tok, 1024)
    return bs, tok


# ------------------------------------------------------------------------------------------ development set

_MODELS = {"Llama 3.1 8B": "llama-3.1-8b", "Llama 3.1 70B": "llama-3.1-70b", "Llama 3.3 70B Instruct": "llama-3.3-70b",
           "Llama 3.1 405B Instruct": "llama-3.1-405b", "Mixtral 8x7B": "mixtral-8x7b"}


@dataclass(frozen=True)
class ServingRun:
    """One published serving measurement, as its source gives it (``raw``)."""

    id: str
    raw: dict

    @property
    def model(self) -> str:
        return _MODELS[self.raw["model"]]

    @property
    def hardware(self) -> Hardware:
        return get_hardware("h200-sxm" if "H200" in self.raw["gpu"] else "h100-sxm")

    @property
    def tp(self) -> int:
        return int(self.raw["parallelism"]["TP"])

    @property
    def published(self) -> float:
        """Output tokens per second of the whole tensor-parallel group."""
        return float(self.raw["measured"]["output_tokens_per_s"])

    @property
    def workload(self) -> Workload:
        r = self.raw
        return Workload(r["input_tokens"], r["output_tokens"], requests=r["num_requests"])

    @property
    def version(self) -> str:
        return "v0.14" if self.id.startswith("trt014") else "v1.0"

    @property
    def label(self) -> str:
        """'Llama 3.1 70B, H100, TP 2, 128/128'."""
        return (f"{load_model(self.model).title}, {self.hardware.short.split(' ')[0]}, TP {self.tp}, "
                f"{self.raw['input_tokens']}/{self.raw['output_tokens']}")

    def deployment(self) -> Deployment:
        """The run's layout in FP8 with the runtime's documented defaults (:func:`trtllm_bench_deployment`)."""
        return trtllm_bench_deployment(self.model, self.hardware, self.workload,
                                       Deployment(tp=self.tp, weights_dtype="fp8", kv_dtype="fp8", math_dtype="fp8"))


def trtllm_bench_deployment(model, hardware: Hardware | str, workload: Workload, deployment: Deployment, *,
                            max_batch: int | None = None, max_tokens: int | None = None) -> Deployment:
    """``deployment`` as ``trtllm-bench`` runs it (:data:`TRTLLM_RUNTIME`, chapter 13's table and ``roofline serve
    --runtime trtllm-bench``): the output head and embedding in bf16, the cache reserved for the whole answer,
    90% of the free HBM, and the caps on the batch and the step's tokens by its own rule
    (:func:`trtllm_bench_limits`) from its build's estimate of what fits (95% of the free HBM), unless
    ``max_batch`` or ``max_tokens`` are given (the benchmark's ``--max_batch_size`` and ``--max_num_tokens``)."""
    hw = get_hardware(hardware)
    base = replace(deployment, kv_policy=TRTLLM_RUNTIME["kv_policy"][0], kv_fraction=TRTLLM_RUNTIME["build_fraction"][0],
                   head_dtype=TRTLLM_RUNTIME["head_dtype"][0], max_batch=None, max_tokens=None)
    w = workload
    fit = largest_batch(model, hw, w, base)
    bs, tok = trtllm_bench_limits(max(fit, 1), w.input_tokens, w.output_tokens, base.pp)
    return replace(base, kv_fraction=TRTLLM_RUNTIME["kv_fraction"][0], max_batch=bs if max_batch is None else max_batch,
                   max_tokens=tok if max_tokens is None else max_tokens)


@lru_cache(maxsize=1)
def serving_runs() -> tuple[ServingRun, ...]:
    """The development set's runs, in the file's order."""
    text = resources.files("roofline.data.published").joinpath("serving-dev-set.json").read_text()
    return tuple(ServingRun(r["id"], r) for r in json.loads(text)["runs"])


class ServingCheck(NamedTuple):
    """One run against the model: the published figure, the ceiling and the estimate (output tokens/s)."""

    run: ServingRun
    ceiling: Sustained
    estimate: Sustained

    @property
    def ceiling_over_published(self) -> float:
        """At least 1 where the ceiling holds."""
        return self.ceiling.output_tokens_per_s / self.run.published

    @property
    def estimate_over_published(self) -> float:
        """Above 1: the estimate is faster than the run."""
        return self.estimate.output_tokens_per_s / self.run.published

    @property
    def within_band(self) -> bool:
        r = self.estimate_over_published
        return 1 / ESTIMATE_BAND <= r <= ESTIMATE_BAND


def check_serving_run(run: ServingRun) -> ServingCheck:
    """Price one run under both roofs (:func:`serving_pair`)."""
    pair = serving_pair(run.model, run.hardware, run.workload, run.deployment())
    return ServingCheck(run, pair.ceiling, pair.estimate)


@lru_cache(maxsize=1)
def serving_dev_checks() -> tuple[ServingCheck, ...]:
    """Every run of the development set, checked."""
    return tuple(check_serving_run(r) for r in serving_runs())


# ------------------------------------------------------------------ expert-parallel decode at DeepSeek's scale

_SGLANG_EP = ("The SGLang Team 2025, Deploying DeepSeek with PD Disaggregation and Large-scale Expert Parallelism on 96 "
              "H100 GPUs (LMSYS blog; lm-sys/lm-sys.github.io blog/2025-05-05-large-scale-ep.md), section 'Profile "
              "Results', decode table")
_DEEPSEEK_EP = ("DeepSeek 2025, Day 6: One More Thing, DeepSeek-V3/R1 Inference System Overview (deepseek-ai/"
                "open-infra-index, 202502OpenSourceWeek/day_6_one_more_thing_deepseekV3R1_inference_system_overview.md)")


@dataclass(frozen=True)
class EPDecodeRun:
    """One published decode throughput of DeepSeek-V3/R1 served with expert parallelism over many nodes, with
    the settings its source states (chapter 13): the chip, the GPUs of one decode unit (attention data parallel
    over all of them, the routed experts and ``redundant`` copies spread over all of them), sequences per GPU,
    the cache length, output tokens/s per node, whether multi-token prediction was on, and each figure's
    source and words."""

    label: str
    gpu: str
    gpus: int
    batch_per_gpu: int
    kv_length: int
    per_node: float
    mtp: bool
    redundant: int
    sources: tuple

    @property
    def hardware(self) -> Hardware:
        return get_hardware(self.gpu)

    @property
    def published_per_gpu(self) -> float:
        return self.per_node / 8

    def deployment(self, overlap: str = "two-batch") -> Deployment:
        """The decode unit: attention data parallel over every GPU (one sequence's latent cache on one GPU),
        experts and their copies spread over all of them, fp8 weights and matmuls, a bf16 cache, the two-batch
        overlap both sources run (``overlap='none'`` to add the all-to-alls instead)."""
        return Deployment(tp=1, dp_attention=self.gpus, ep=self.gpus, redundant_experts=self.redundant, overlap=overlap,
                          weights_dtype="fp8", math_dtype="fp8", kv_dtype="bf16")


EP_DECODE_RUNS = (
    EPDecodeRun("SGLang, 72 H100s (EP 72)", "h100-sxm", 72, 256, 2000, 22282.0, False, 32, (
        _SGLANG_EP + ": '| Batch Size            | 128           | 128              | 256              | 128 ...', "
                     "the third column (SGLang, default)",
        _SGLANG_EP + ": '| KV Cache Length       | 4,989         | 4,096            | 2,000            | 4,000 ...'",
        _SGLANG_EP + ": '| Number of Nodes       | 18            | 16               | 9                | 9 ...'",
        _SGLANG_EP + ": '| Throughput (per node) | 14,800        | 18,598           | 22,282           | 17,373 ...'",
        _SGLANG_EP.replace("section 'Profile Results', decode table", "section 'Evaluation'")
        + ": 'Evaluated on 9 nodes (9×8×H100, EP72; half the scale of DeepSeek)'",
        _SGLANG_EP.replace("section 'Profile Results', decode table", "section 'Expert Parallelism Load Balancer'")
        + ": 'Users can allocate redundant experts (e.g., 32 additional experts), which, when combined with the "
          "original 256, create a pool of 288 experts'",
    )),
    EPDecodeRun("DeepSeek, 144 H800s (EP 144)", "h800-sxm", 144, 128, 4989, 14800.0, True, 32, (
        _DEEPSEEK_EP + ": 'Decoding Phase [Routed Expert EP144, MLA/Shared Expert DP144]: Each deployment unit spans "
                       "18 nodes with 32 redundant routed experts, where each GPU manages 2 routed experts and 1 shared "
                       "expert.'",
        _DEEPSEEK_EP + ": 'the average kvcache length per output token was 4,989 tokens'",
        _DEEPSEEK_EP + ": 'Each H800 node delivers an average throughput of ~73.7k tokens/s input (including cache "
                       "hits) during prefilling or ~14.8k tokens/s output during decoding.'",
        _SGLANG_EP + ": the first column (DeepSeek Blog), batch size 128",
        "DeepSeek-AI 2024, DeepSeek-V3 Technical Report, section 5.4.3: 'the acceptance rate of the second token "
        "prediction ranges between 85% and 90%' ... 'delivering 1.8 times TPS (Tokens Per Second)'",
    )),
)
"""The published decode figures of DeepSeek-V3/R1 at scale chapter 13 holds the model against; for checking,
never fitting. DeepSeek's is a day's average of its production service with multi-token prediction on."""


class EPDecodeCheck(NamedTuple):
    """One run against the model: its decode step under the datasheet roof (the ceiling), under the chip's
    calibrated roof with the two-batch overlap (the estimate) and without it (``added``)."""

    run: EPDecodeRun
    ceiling: StepTime
    estimate: StepTime
    added: StepTime

    def per_gpu(self, step) -> float:
        """Output tokens/s per GPU at that step: the run's sequences per GPU, one token each a step."""
        return self.run.batch_per_gpu / step.seconds

    @property
    def estimate_over_published(self) -> float:
        return self.per_gpu(self.estimate) / self.run.published_per_gpu

    @property
    def tokens_per_expert(self) -> float:
        """Rows each routed expert's copy gets a step: sequences x experts per token over experts and copies."""
        m = load_model("deepseek-v3")
        slots = m.moe.num_experts + self.run.redundant
        return self.run.batch_per_gpu * self.run.gpus * m.moe.experts_per_token / slots


def check_ep_decode(run: EPDecodeRun) -> EPDecodeCheck:
    """Price one run's decode step (:func:`roofline.serving.deployment.step_time`) at its sequences and cache
    length, under both roofs."""
    hw = run.hardware
    steps = [step_time("deepseek-v3", run.deployment(ov), get_roof(hw, kind, "fp8"), decode=run.batch_per_gpu * run.gpus,
                       context=run.kv_length)
             for kind, ov in (("datasheet", "two-batch"), ("calibrated", "two-batch"), ("calibrated", "none"))]
    return EPDecodeCheck(run, *steps)


def ep_decode_checks() -> tuple[EPDecodeCheck, ...]:
    """Every run of :data:`EP_DECODE_RUNS`, checked."""
    return tuple(check_ep_decode(r) for r in EP_DECODE_RUNS)


__all__ += ["EPDecodeRun", "EP_DECODE_RUNS", "EPDecodeCheck", "check_ep_decode", "ep_decode_checks"]

DEEPSEEK_MTP_TPS = (1.8, "DeepSeek-AI 2024, DeepSeek-V3 Technical Report, section 5.4.3: 'This high acceptance rate "
                         "enables DeepSeek-V3 to achieve a significantly improved decoding speed, delivering 1.8 times "
                         "TPS (Tokens Per Second).'")
"""Multi-token prediction's published gain in tokens per second, which DeepSeek's service figure includes and
the model does not price: (value, source)."""

__all__ += ["DEEPSEEK_MTP_TPS"]
