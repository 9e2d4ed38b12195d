"""Speculative decoding: a small draft guesses, the target checks several tokens in one pass (chapter 12).

A draft model proposes ``gamma`` tokens one decode step at a time; the target scores all of them, plus
one more position, in a single verify step (:func:`roofline.workloads.inference.verify_step`, ``gamma + 1`` query
tokens against the cache). Each draft token is kept with probability ``alpha`` (the acceptance rate),
independently (the assumption of Leviathan et al. 2023), up to the first rejection; the verify step always
yields one token of its own (the correction at the first rejection, or a bonus token when all are kept).
The expected number of tokens per verify step is then

    E = 1 + alpha + ... + alpha**gamma = (1 - alpha**(gamma + 1)) / (1 - alpha)    (:func:`expected_tokens`)

and one iteration costs ``gamma`` draft steps plus one verify step. Speculation buys latency while the
verify step costs about what one decode step does (memory-bound: the weights are read once whatever the
number of queries) and spends FLOPs on tokens that are thrown away; at a large batch decode approaches
the compute roof, the verify step's extra queries cost their full FLOPs, and the trade stops paying.

Named choices: the draft decodes at the same batch and context as the target; the draft's own catch-up on
the tokens it did not propose is not counted; the acceptance rate is one number per (draft, target, task),
which the roofline cannot predict and the papers measure (:data:`PUBLISHED`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType

import numpy as np

from roofline.core.checks import number, unknown_name
from roofline.core.hardware import get_hardware
from roofline.workloads.inference import decode_step, verify_step
from roofline.core.model import Model, load_model, model_from_config
from roofline.core.roof import CalibratedRoof, as_roof, predict
from roofline.parallel.tensor_parallel import predict_tp, tp_decode_step, tp_verify_step

__all__ = [
    "PUBLISHED",
    "MAX_GAMMA",
    "DRAFTS",
    "SpeculativePlan",
    "load_draft",
    "expected_tokens",
    "simulate_tokens",
    "speculate",
    "breakeven_alpha",
    "best_gamma",
    "stops_paying_batch",
]

PUBLISHED = MappingProxyType({
    # (low, high, unit, bib key, what the source reports)
    "leviathan_speedup": (2.0, 3.0, "×", "leviathan2023speculative",
                          "speed-up of T5-XXL decoding over the standard T5X implementation, outputs identical"),
    "chen_speedup": (2.0, 2.5, "×", "chen2023speculative",
                     "decoding speed-up of Chinchilla 70B in a distributed setup, sample quality unchanged"),
    "medusa1_speedup": (2.2, 2.2, "×", "cai2024medusa",
                        "Medusa-1 (extra heads on a frozen model): over this speed-up, generation quality unchanged"),
    "medusa2_speedup": (2.3, 3.6, "×", "cai2024medusa",
                        "Medusa-2 (heads trained with the model): speed-up range"),
    "eagle_speedup": (2.7, 3.5, "×", "li2024eagle",
                      "EAGLE's latency speed-up on LLaMA2-Chat 70B, output distribution preserved"),
    "orca_throughput": (36.9, 36.9, "×", "yu2022orca",
                        "Orca's throughput against FasterTransformer on GPT-3 175B at the same latency"),
    "sarathi_capacity": (2.6, 2.6, "×", "agrawal2024sarathi",
                         "Sarathi-Serve's serving capacity for Mistral-7B on one A100, at most"),
    "sarathi_capacity_180b": (5.6, 5.6, "×", "agrawal2024sarathi",
                              "Sarathi-Serve's serving capacity for Falcon-180B on 8 A100s, at most"),
})
"""Figures the chapter quotes from its sources: measured speed-ups, which depend on acceptance rates the
roofline cannot compute."""

_DRAFTS_DIR = "data/drafts"


def _draft_names() -> list[str]:
    return sorted(p.name.removesuffix(".json") for p in resources.files("roofline").joinpath(_DRAFTS_DIR).iterdir()
                  if p.name.endswith(".json"))


DRAFTS = tuple(_draft_names())
"""Small models shipped as drafts only (``config.json`` as published): 'llama-3.2-1b' shares Llama 3's
vocabulary, which a draft must."""


def load_draft(model: Model | str) -> Model:
    """A draft model: one of :data:`DRAFTS` by name, or anything :func:`roofline.core.model.load_model` takes."""
    if isinstance(model, str) and model.strip().lower() in DRAFTS:
        key = model.strip().lower()
        text = resources.files("roofline").joinpath(f"{_DRAFTS_DIR}/{key}.json").read_text(encoding="utf-8")
        return model_from_config(json.loads(text), key)
    try:
        return load_model(model)
    except KeyError as exc:  # an unknown name: list drafts and shipped models together
        from roofline.core.model import model_names
        raise unknown_name("draft model", str(model), (*DRAFTS, *model_names())) from exc


def _alpha(alpha):
    a = number("alpha", alpha, strict=False)
    if np.any(np.asarray(a) >= 1.0):
        raise ValueError(f"alpha (the acceptance rate) must be in [0, 1), got {alpha!r}: at 1 every draft token "
                         "would be kept and the expectation has no limit but gamma + 1")
    return a


MAX_GAMMA = 1024
"""The longest draft a verify step may check (1,024 tokens): published drafts propose a few to a few tens of tokens
a step, and the verify step grows with it."""


def _gamma(gamma):
    g = number("gamma", gamma, integer=True)
    if np.any(np.asarray(g) > MAX_GAMMA):
        raise ValueError(f"gamma must be at most {MAX_GAMMA:,} draft tokens per verify step (drafts propose a few "
                         f"to a few tens), got {gamma!r}")
    return g


def verify_tokens(gamma):
    """Tokens the target scores per sequence in one verify step: the ``gamma`` drafted tokens and the one
    after them that it computes anyway, ``gamma + 1`` (chapter 12)."""
    g = number("gamma", gamma, strict=True, integer=True)
    return g + 1


__all__ += ["verify_tokens"]


def expected_tokens(alpha, gamma):
    """Tokens one verify step yields on average: ``(1 - alpha**(gamma+1)) / (1 - alpha)``.

    ``alpha`` in [0, 1), ``gamma`` (draft tokens per step) a whole number >= 1; broadcasts. At
    ``alpha = 0`` it is 1 (the target's own token); it tends to ``gamma + 1`` as ``alpha`` nears 1.
    """
    a, g = _alpha(alpha), _gamma(gamma)
    out = (1.0 - np.power(a, g + 1.0)) / (1.0 - np.asarray(a, dtype=float))
    return float(out) if np.ndim(out) == 0 else out


def simulate_tokens(alpha: float, gamma: int, steps: int = 100_000, seed: int = 0) -> float:
    """The mean tokens per verify step over ``steps`` simulated steps (seeded, vectorized): each draft
    token kept with probability ``alpha`` until the first rejection, plus the target's own token."""
    a, g = float(_alpha(alpha)), int(_gamma(gamma))
    n = int(number("steps", steps, integer=True))
    rng = np.random.default_rng(int(number("seed", seed, integer=True, strict=False)))
    kept = rng.random((n, g)) < a
    run = np.cumprod(kept, axis=1).sum(axis=1)  # accepted before the first rejection
    return float(np.mean(run + 1))


@dataclass(frozen=True)
class SpeculativePlan:
    """Speculative decoding of ``target`` with ``draft`` on one roof, at ``batch`` and ``context``.

    Times in seconds: ``decode_time`` (one plain decode step of the target), ``draft_time`` (one draft
    step), ``verify_time`` (the target scoring ``gamma + 1`` tokens per sequence), ``step_time``
    (``gamma`` draft steps and one verify). ``tokens_per_step`` is :func:`expected_tokens`;
    ``time_per_token`` is ``step_time / tokens_per_step``, against ``decode_time`` without speculation;
    ``speedup`` their ratio. FLOPs per generated token, with and without speculation, give ``wasted``:
    the share of speculation's FLOPs that plain decoding would not spend. With ``tp`` > 1 the target and
    the draft are both split ``tp`` ways over the same GPUs, and every step's time includes its
    tensor-parallel all-reduces; ``decode_exchange`` is the part of a plain step spent in them. Fields are
    arrays where an input was."""

    target: str
    draft: str
    roof: str
    alpha: object
    gamma: int
    batch: object
    context: int
    decode_time: object
    draft_time: object
    verify_time: object
    decode_bound: object
    verify_bound: object
    plain_flops_per_token: object
    spec_flops_per_token: object
    tp: int = 1
    decode_exchange: object = 0.0

    @property
    def tokens_per_step(self):
        return expected_tokens(self.alpha, self.gamma)

    @property
    def step_time(self):
        return self.gamma * self.draft_time + self.verify_time

    @property
    def time_per_token(self):
        return self.step_time / self.tokens_per_step

    @property
    def speedup(self):
        return self.decode_time / self.time_per_token

    @property
    def verify_over_decode(self):
        """What scoring ``gamma + 1`` tokens costs against one: the key ratio while memory-bound."""
        return self.verify_time / self.decode_time

    @property
    def wasted(self):
        return 1.0 - self.plain_flops_per_token / self.spec_flops_per_token

    def verdict(self) -> str:
        s = float(np.min(self.speedup))
        how = "pays" if s > 1 else "does not pay"
        return (f"speculation {how}: {float(np.min(self.tokens_per_step)):.2f} tokens per verify step at alpha "
                f"{float(np.min(self.alpha)):g}, gamma {self.gamma}; {1e3 * float(np.min(self.time_per_token)):.3g} ms "
                f"per token against {1e3 * float(np.min(self.decode_time)):.3g} ms, {s:.2f}×")

    def as_dict(self) -> dict:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        for k in ("tokens_per_step", "step_time", "time_per_token", "speedup", "verify_over_decode", "wasted"):
            out[k] = getattr(self, k)
        return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in out.items()}


def _roof(hardware, roof):
    if roof is None:
        return as_roof(get_hardware(hardware))
    if isinstance(roof, CalibratedRoof):
        return roof
    return as_roof(roof)


def _scalar(x):
    return float(x) if np.ndim(x) == 0 else np.asarray(x)


def speculate(target: Model | str, draft: Model | str, hardware="h200-sxm", alpha=0.8, gamma: int = 4, *,
              batch=1, context: int = 2048, roof=None, accounting: str = "text", timing: str = "step",
              tp: int = 1, **options) -> SpeculativePlan:
    """Price speculative decoding of ``target`` with ``draft`` on ``hardware`` (or under ``roof``).

    Three workloads, each from the per-operation core and timed by :func:`roofline.core.roof.predict`: a
    decode step of the target, a decode step of the draft, and a verify step of the target with
    ``gamma + 1`` queries (:func:`roofline.workloads.inference.verify_step`), all at ``batch`` sequences of
    ``context`` tokens. ``alpha`` (the acceptance rate, in [0, 1)) and ``batch`` broadcast. A draft
    with as many parameters as the target or more is refused.

    With ``tp`` > 1 the target and the draft are each split ``tp`` ways by tensor parallelism over the
    same GPUs of ``hardware`` (vLLM's default for a draft model), and each step is one GPU's kernels under
    the roof plus its all-reduces priced as chapter 8 prices them
    (:func:`~roofline.parallel.tensor_parallel.predict_tp`: NCCL's ring, NVLink inside a node of eight).
    """
    t, d = load_model(target), load_draft(draft)
    if d.params >= t.params:
        raise ValueError(f"draft must be smaller than the target: {d.name} has {d.params:,} parameters, "
                         f"{t.name} {t.params:,}")
    a, g = _alpha(alpha), _gamma(gamma)
    if np.ndim(g):
        raise TypeError("gamma must be one whole number (call speculate once per gamma)")
    g = int(g)
    b = number("batch", batch, integer=True)
    c = number("context", context, integer=True, strict=False)
    if np.ndim(c):
        raise TypeError("context must be one whole number")
    r = _roof(hardware, roof)
    kw = dict(accounting=accounting, **options)
    plain = decode_step(t, b, c, **kw)
    small = decode_step(d, b, c, **kw)
    check = verify_step(t, g + 1, c, b, **kw)
    if d.vocab_size != t.vocab_size:  # the target verifies the draft's tokens (checked after the steps: not modelled first)
        raise ValueError(f"draft must share the target's vocabulary: {d.name} has {d.vocab_size:,} tokens, "
                         f"{t.name} {t.vocab_size:,}; its proposals are not the target's tokens")
    n = int(number("tp", tp, integer=True))
    if n == 1:
        p_plain, p_small, p_check = (predict(w, r, timing=timing) for w in (plain, small, check))
        times = [p.time for p in (p_plain, p_small, p_check)]
        exchange = 0.0
    else:
        hw = get_hardware(hardware)  # its links price the all-reduces; ``roof`` (if given) the kernels
        split = (tp_decode_step(t, n, b, c, **kw), tp_decode_step(d, n, b, c, **kw), tp_verify_step(t, n, g + 1, c, b, **kw))
        priced = [predict_tp(x, hw, roof=r, timing=timing) for x in split]
        p_plain, p_check = priced[0].compute, priced[2].compute
        times = [x.time for x in priced]
        exchange = _scalar(priced[0].comm_time)
    e = expected_tokens(a, g)
    spec_flops = (g * np.asarray(small.flops) + np.asarray(check.flops)) / e
    return SpeculativePlan(
        target=t.name, draft=d.name, roof=r.label, alpha=_scalar(a), gamma=g, batch=int(b) if np.ndim(b) == 0 else np.asarray(b), context=int(c),
        decode_time=_scalar(times[0]), draft_time=_scalar(times[1]), verify_time=_scalar(times[2]),
        decode_bound=p_plain.bound, verify_bound=p_check.bound,
        plain_flops_per_token=_scalar(plain.flops), spec_flops_per_token=_scalar(spec_flops), tp=n,
        decode_exchange=exchange)


def breakeven_alpha(target, draft, hardware="h200-sxm", gamma: int = 4, **kwargs):
    """The acceptance rate at which speculation's time per token equals plain decoding's (speed-up 1):
    0.0 if it pays even when every draft token is rejected, None if it cannot pay at any ``alpha < 1``.
    Solved by bisection on :func:`expected_tokens`, which rises with ``alpha``; ``kwargs`` go to
    :func:`speculate` (a scalar ``batch``)."""
    plan = speculate(target, draft, hardware, 0.0, gamma, **kwargs)
    need = float(plan.step_time / plan.decode_time)  # tokens per verify step that break even
    g = int(plan.gamma)
    if need <= 1.0:
        return 0.0
    if need >= g + 1:
        return None
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if expected_tokens(mid, g) < need else (lo, mid)
    return 0.5 * (lo + hi)


def best_gamma(target, draft, hardware="h200-sxm", alpha=0.8, *, gammas=range(1, 17), **kwargs) -> tuple[int, float]:
    """The draft length among ``gammas`` with the largest speed-up, and that speed-up (one plan per gamma)."""
    gammas = [int(_gamma(g)) for g in gammas]
    if not gammas:
        raise ValueError("gammas must name at least one draft length")
    speed = [float(speculate(target, draft, hardware, alpha, g, **kwargs).speedup) for g in gammas]
    i = int(np.argmax(speed))
    return gammas[i], speed[i]


def stops_paying_batch(target, draft, hardware="h200-sxm", alpha=0.8, gamma: int = 4, *, max_batch: int = 4096,
                       **kwargs):
    """The smallest batch (1 to ``max_batch``, one vectorized plan) at which speculation no longer speeds
    decoding up, or None if it still pays at ``max_batch``."""
    top = int(number("max_batch", max_batch, integer=True))
    batches = np.arange(1, top + 1, dtype=float)
    plan = speculate(target, draft, hardware, alpha, gamma, batch=batches, **kwargs)
    hits = np.flatnonzero(np.asarray(plan.speedup) <= 1.0)
    return int(batches[hits[0]]) if hits.size else None


# Chapter 12's quantities that the prose quotes, each one call for the notebook.

def cost_ratio(plan: SpeculativePlan):
    """Chapter 12: ``c``, one draft step's time over one plain decode step of the target (Leviathan et al.'s
    cost coefficient)."""
    if not isinstance(plan, SpeculativePlan):
        raise TypeError(f"plan must be a SpeculativePlan (from speculate), got {type(plan).__name__}")
    return plan.draft_time / plan.decode_time


__all__ += ["cost_ratio"]


def breakeven_tokens(plan: SpeculativePlan):
    """Chapter 12, exercise 1: the tokens a speculative step must yield to pay for itself, ``(gamma t_draft +
    t_verify) / t_decode`` (its step time in plain decode steps)."""
    if not isinstance(plan, SpeculativePlan):
        raise TypeError(f"plan must be a SpeculativePlan (from speculate), got {type(plan).__name__}")
    return plan.step_time / plan.decode_time


__all__ += ["breakeven_tokens"]
