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
from roofline.serving.deployment import Deployment, Sustained, Workload, largest_batch, serving_pair

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
