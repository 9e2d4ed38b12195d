"""Routing arithmetic of a mixture of experts (chapter 10): how many distinct experts, and nodes, the
tokens of one step reach. The shape of a model (:mod:`roofline.core.model`) says ``E`` and ``k``; the
workloads (:func:`roofline.workloads.inference.decode_step`) need these counts to know which expert
weights a step reads, so they live in the core, below both.

A MoE layer sends each token to ``k`` of its ``E`` routed experts. The bytes a step reads follow the
*distinct* experts its ``T`` tokens touch, which depends on the routing. Three named choices
(:data:`ROUTINGS`):

``'uniform'``
    Each token picks its ``E_tok`` experts (``top_k``) independently and uniformly at random (without repeats).
    An expert is missed by one token with probability ``1 - E_tok/E``, by all ``T`` with ``(1 - E_tok/E)^T``, so
    the expected number touched is ``E (1 - (1 - E_tok/E)^T)``. Real routers are not uniform (a load-balancing
    loss pushes them towards it); this is the assumption, named.
``'best'``
    Every token sent to the same ``E_tok`` experts: the fewest bytes a step can read (a lower bound).
``'worst'``
    As many distinct experts as the tokens can reach, ``min(E, k T)``: an upper bound.
"""

from __future__ import annotations

import math

import numpy as np

from roofline.core.checks import broadcast, number, unknown_name
from roofline.core.model import Model, load_model

__all__ = ["ROUTINGS", "check_routing", "expected_experts", "expert_bounds", "experts_touched",
           "simulate_experts_touched", "nodes_touched", "exchange_units"]

ROUTINGS = ("uniform", "best", "worst")


def check_routing(routing) -> str:
    """``routing`` if it is one of :data:`ROUTINGS`; otherwise an error naming the argument."""
    if not isinstance(routing, str):
        raise TypeError(f"routing must be one of {', '.join(map(repr, ROUTINGS))}, got {routing!r}")
    if routing not in ROUTINGS:
        raise unknown_name("routing", routing, ROUTINGS)
    return routing


def _experts(num_experts, top_k):
    E = number("num_experts", num_experts, integer=True)
    k = number("top_k", top_k, integer=True)
    broadcast(num_experts=E, top_k=k)
    if np.any(np.asarray(k) > np.asarray(E)):
        raise ValueError(f"top_k must not exceed num_experts, got top_k {top_k!r} and num_experts {num_experts!r}")
    return E, k


def expected_experts(num_experts, top_k, tokens):
    """Expected distinct experts ``T`` tokens touch in one layer under uniform independent routing:
    ``E (1 - (1 - E_tok/E)^T)``, ``E_tok = top_k``. Broadcasts; ``E_tok`` at one token, tending to ``E`` as ``T`` grows.
    ``T`` may be a mean (the tokens of a step whose batch is itself an average, chapter 13): the formula holds
    for any positive ``T``."""
    E, k = _experts(num_experts, top_k)
    T = number("tokens", tokens)
    shape = broadcast(num_experts=E, top_k=k, tokens=T)
    out = np.where(np.asarray(T) == 1, k, E * (1.0 - (1.0 - k / E) ** T))  # exactly k for one token
    return out if shape else float(out)


def expert_bounds(num_experts, top_k, tokens):
    """``(fewest, most)`` distinct experts ``T`` tokens can touch: ``k`` (all to the same experts) and
    ``min(E, k T)`` (no two tokens share an expert until every expert is busy)."""
    E, k = _experts(num_experts, top_k)
    T = number("tokens", tokens, integer=True)
    shape = broadcast(num_experts=E, top_k=k, tokens=T)
    low = np.broadcast_to(np.asarray(k, dtype=float), shape) if shape else k
    return low, np.minimum(E, k * T) if shape else min(E, k * T)


def experts_touched(model: Model | str, tokens, routing: str = "uniform"):
    """Distinct routed experts read per MoE layer by a step of ``tokens`` tokens through ``model``
    under ``routing`` (:data:`ROUTINGS`). Broadcasts over ``tokens``."""
    m = load_model(model)
    if m.moe is None:
        raise ValueError(f"model {m.name!r} has no experts (a dense model reads all of its MLP every step)")
    routing = check_routing(routing)
    E, k = m.moe.num_experts, m.moe.experts_per_token
    if routing == "uniform":
        return expected_experts(E, k, tokens)
    low, high = expert_bounds(E, k, tokens)
    return low if routing == "best" else high


def simulate_experts_touched(num_experts, top_k, tokens, *, trials: int = 2000, seed: int = 0):
    """Route ``tokens`` tokens at random, each to ``top_k`` distinct experts of ``num_experts`` drawn
    uniformly, ``trials`` times with a seeded generator; returns ``(mean, standard deviation)`` of the
    distinct experts touched. The check on :func:`expected_experts` (one number each, not arrays)."""
    E, k = _experts(num_experts, top_k)
    T = number("tokens", tokens, integer=True)
    trials = number("trials", trials, integer=True)
    if any(np.ndim(x) for x in (E, k, T, trials)):
        raise TypeError("simulate_experts_touched takes single numbers, not arrays")
    E, k, T, trials = int(E), int(k), int(T), int(trials)
    rng = np.random.default_rng(seed)
    touched = np.zeros((trials, E), dtype=bool)
    rows = np.arange(trials)[:, None]
    for _ in range(T):  # each token: k distinct experts, uniformly (the first k of a random order)
        picks = np.argpartition(rng.random((trials, E)), k - 1, axis=1)[:, :k]
        touched[rows, picks] = True
    counts = touched.sum(axis=1)
    return float(counts.mean()), float(counts.std(ddof=1)) if trials > 1 else 0.0


def nodes_touched(num_experts, top_k, nodes, *, remote: bool = False):
    """Expected distinct nodes one token's ``top_k`` experts sit on, the ``num_experts`` spread evenly over
    ``nodes`` nodes, under uniform routing without a node limit: ``n (1 - C(E - E/n, k) / C(E, k))``
    (a node is missed when all ``k`` choices fall among the other nodes' experts). With ``remote=True``,
    only the nodes other than the one the token sits on: ``(n - 1) (1 - C(E - E/n, k) / C(E, k))``. Each
    remote node reached is one copy of the token's hidden vector across the network (its own node's experts
    cost NVLink only); DeepSeek-V3 caps the nodes (:data:`PUBLISHED`)."""
    E, k = _experts(num_experts, top_k)
    n = number("nodes", nodes, integer=True)
    if any(np.ndim(x) for x in (E, k, n)):
        raise TypeError("nodes_touched takes single numbers, not arrays")
    E, k, n = int(E), int(k), int(n)
    if E % n:
        raise ValueError(f"nodes must divide num_experts ({E}) evenly, got {n}")
    if not isinstance(remote, bool):
        raise TypeError(f"remote must be True or False, got {remote!r}")
    return (n - 1 if remote else n) * (1.0 - math.comb(E - E // n, k) / math.comb(E, k))


def exchange_units(num_experts, top_k, parts, groups: int = 1, groups_per_token: int | None = None) -> float:
    """Expected distinct parts (GPUs of a node, or nodes) one token's ``top_k`` experts sit on, the ``num_experts``
    spread evenly over ``parts``: :func:`nodes_touched`'s uniform count, capped where the router limits a token to
    ``groups_per_token`` of ``groups`` expert groups (DeepSeek-V3: 4 of 8). Where each group spans whole parts
    (``parts`` a multiple of ``groups``) a token reaches at most ``groups_per_token x parts / groups`` of them; where
    each part holds whole groups, at most ``groups_per_token``. An expert all-to-all that sends a token once to each
    part holding one of its experts (DeepEP's kernels) moves this many copies of it.

    Worked by hand: DeepSeek-V3 (256 experts, top 8, 4 of 8 groups) over 8 nodes, a group a node: uniformly
    ``8 (1 - C(224, 8) / C(256, 8)) = 5.29`` nodes, capped at 4; Qwen3-30B-A3B (128 experts, top 8, no groups)
    over 8 GPUs: ``8 (1 - C(112, 8) / C(128, 8)) = 5.34``."""
    units = nodes_touched(num_experts, top_k, parts)
    g = int(number("groups", groups, integer=True))
    if groups_per_token is None:
        return units
    per = int(number("groups_per_token", groups_per_token, integer=True))
    if per > g:
        raise ValueError(f"groups_per_token ({per}) exceeds groups ({g})")
    n = int(parts)
    if n % g == 0:
        return min(units, per * n // g)
    if g % n == 0:
        return min(units, float(per))
    return units
