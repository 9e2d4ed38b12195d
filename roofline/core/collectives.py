"""Collectives on the roofline: what each GPU sends, how many latency steps it waits, and how long that takes
on a tier of the node (chapter 7; chapters 8 to 11 call the same functions).

Five operations, each over a group of ``n`` GPUs and a buffer of ``size`` bytes, where ``size`` means what
NCCL's own benchmark (nccl-tests, ``doc/PERFORMANCE.md``) means by it:

- ``all_reduce``: every GPU holds ``size`` bytes and ends with the sum of all of them.
- ``reduce_scatter``: every GPU holds the whole ``size``-byte input and ends with its 1/n share of the sum.
- ``all_gather``: every GPU holds a 1/n share and ends with the whole ``size``-byte output.
- ``all_to_all``: every GPU holds ``size`` bytes cut into n pieces and sends piece j to GPU j.
- ``send_recv``: point to point: every GPU sends ``size`` bytes to one peer (a ring's neighbour).

Bytes sent per GPU (the bandwidth-optimal schedules NCCL runs): a ring all-reduce is a reduce-scatter
followed by an all-gather, ``2 (n-1)/n * size``; reduce-scatter, all-gather and all-to-all send
``(n-1)/n * size``; point to point sends ``size``. A tree all-reduce (NCCL's double binary tree) moves the
same ``2 (n-1)`` transfers of every element in all, spread over the GPUs, so it sends the same bytes per
GPU as the ring; what it changes is the number of latency steps, ``2 ceil(log2 n)`` against ``2 (n-1)``.

The alpha-beta model: ``time = overhead + steps * alpha + bytes / bandwidth``, with ``bandwidth`` the
tier's one-way rate per GPU from the hardware catalog (scale_up = NVLink, host = PCIe, network = the
GPU's share of InfiniBand) and ``alpha`` the per-step latency of :data:`LATENCY`.

A group that spans nodes (:func:`collective_cost` with ``gpus_per_node``) is priced hierarchically, as
NCCL's rings and trees cross each node boundary: the reduction inside each node rides NVLink over the full
buffer, and across the nodes each GPU carries only its 1/g share (g GPUs per node, each with its own
network port), ``2 (m-1)/m * size/g`` for an all-reduce over m nodes. The two tiers work on different
chunks at once, so the slower one sets the pace (the transfer time is the larger of the two) while their
latency steps add. ``tier=...`` instead prices a flat schedule with every byte on one tier (chapter 1's
pessimistic count: each GPU's whole ``2 (n-1)/n * size`` over its own network port).

Bus bandwidth (nccl-tests): ``busbw = algbw * factor`` with ``algbw = size / time`` and the factor
``2 (n-1)/n`` for all-reduce, ``(n-1)/n`` for reduce-scatter, all-gather and all-to-all, 1 for point to
point, so that a perfect implementation's bus bandwidth equals the link's, whatever n.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

import numpy as np
from numpy.typing import ArrayLike

from roofline.core.checks import broadcast, number, unknown_name
from roofline.core.hardware import Hardware, get_hardware, require_links

__all__ = ["COLLECTIVES", "ALGORITHMS", "TIERS", "LATENCY", "BASE_LATENCY", "LATENCY_SOURCE",
           "bytes_sent", "latency_steps", "bus_factor", "algorithm_bandwidth", "bus_bandwidth",
           "tier_link", "CollectiveCost", "collective_cost", "collective_time", "break_even_size", "Collective"]


@dataclass(frozen=True)
class Collective:
    """One collective operation: bytes each GPU sends in units of ``(n-1)/n * size`` (``None``: point to
    point, ``size`` itself) and the nccl-tests bus-bandwidth factor in the same units."""

    name: str
    traffic: float | None
    algorithms: tuple
    size: str


COLLECTIVES: Mapping[str, Collective] = MappingProxyType({
    "all_reduce": Collective("all_reduce", 2.0, ("ring", "tree"), "each GPU's buffer (input and output)"),
    "reduce_scatter": Collective("reduce_scatter", 1.0, ("ring",), "the whole input on each GPU"),
    "all_gather": Collective("all_gather", 1.0, ("ring",), "the whole output on each GPU"),
    "all_to_all": Collective("all_to_all", 1.0, ("ring",), "each GPU's send buffer, n pieces"),
    "send_recv": Collective("send_recv", None, ("ring",), "the message each GPU sends its peer"),
})

ALGORITHMS = ("ring", "tree")
TIERS = ("scale_up", "host", "network")

# Per-step latency alpha of each tier, in seconds. From NCCL's own cost model (NVIDIA/nccl,
# src/graph/tuning.cc, commit 01afd20, table hwLat, Ring algorithm, LL protocol: the low-latency protocol
# NCCL picks for small messages): NVLink 0.47 us, PCI 1.0 us, network 2.7 us per step, plus a base
# latency of 3.6 us per call (table baseLat, Ring/LL). These are NCCL's tuning constants, not
# measurements of any one machine: an assumption of this model, named here.
LATENCY: Mapping[str, float] = MappingProxyType({"scale_up": 0.47e-6, "host": 1.0e-6, "network": 2.7e-6})
BASE_LATENCY = 3.6e-6
LATENCY_SOURCE = ("NVIDIA/nccl src/graph/tuning.cc (commit 01afd20): hwLat Ring/LL per step "
                  "(NVLink 0.47 us, PCI 1.0 us, network 2.7 us) and baseLat Ring/LL 3.6 us per call")


def _collective(collective) -> Collective:
    if isinstance(collective, Collective):
        return collective
    if not isinstance(collective, str):
        raise TypeError(f"collective must be a name such as 'all_reduce', got {collective!r}")
    key = collective.strip().lower().replace("-", "_")
    if key not in COLLECTIVES:
        raise unknown_name("collective", collective, COLLECTIVES)
    return COLLECTIVES[key]


def _algorithm(c: Collective, algorithm) -> str:
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be 'ring' or 'tree', got {algorithm!r}")
    if algorithm not in c.algorithms:
        raise ValueError(f"algorithm 'tree' is modelled for all_reduce only, not {c.name}")
    return algorithm


def _group(n):
    return number("n", n, integer=True, minimum=1, strict=False)


def bytes_sent(collective, n: ArrayLike, size: ArrayLike, *, algorithm: str = "ring"):
    """Bytes each of ``n`` GPUs sends for one ``collective`` on a ``size``-byte buffer (nccl-tests' size).

    ``2 (n-1)/n * size`` for an all-reduce (ring or tree), ``(n-1)/n * size`` for reduce-scatter,
    all-gather and all-to-all, ``size`` for point to point; nothing for a group of one. Broadcasts over
    arrays of ``n`` and ``size``.
    """
    c = _collective(collective)
    _algorithm(c, algorithm)
    n, size = _group(n), number("size", size, strict=False)
    broadcast(n=n, size=size)
    if c.traffic is None:
        if np.ndim(n) or np.ndim(size):
            return np.where(np.asarray(n) > 1, size, 0.0)
        return size if n > 1 else 0.0
    return c.traffic * (n - 1) / n * size


def latency_steps(collective, n: ArrayLike, *, algorithm: str = "ring"):
    """Latency steps (alpha terms) of one ``collective`` over ``n`` GPUs: ``2 (n-1)`` for a ring all-reduce,
    ``2 ceil(log2 n)`` for a tree one (up the tree and down again), ``n-1`` for reduce-scatter, all-gather
    and all-to-all (pairwise exchanges), 1 for point to point; 0 for a group of one."""
    c = _collective(collective)
    algorithm = _algorithm(c, algorithm)
    n = _group(n)
    if c.traffic is None:
        return np.where(np.asarray(n) > 1, 1.0, 0.0) if np.ndim(n) else (1.0 if n > 1 else 0.0)
    if algorithm == "tree":
        return 2.0 * np.ceil(np.log2(n)) if np.ndim(n) else 2.0 * math.ceil(math.log2(n))
    return c.traffic * (n - 1)


def bus_factor(collective, n):
    """nccl-tests' factor from algorithm bandwidth to bus bandwidth: ``2 (n-1)/n`` for all-reduce,
    ``(n-1)/n`` for reduce-scatter, all-gather and all-to-all, 1 for point to point."""
    c = _collective(collective)
    n = _group(n)
    if c.traffic is None:
        return np.ones_like(n) if np.ndim(n) else 1.0
    return c.traffic * (n - 1) / n


def algorithm_bandwidth(size, seconds):
    """nccl-tests' algorithm bandwidth: ``size / seconds`` (bytes per second)."""
    return number("size", size, strict=False) / number("seconds", seconds)


def bus_bandwidth(collective, n, size, seconds):
    """nccl-tests' bus bandwidth: the algorithm bandwidth times :func:`bus_factor`, comparable with a link's
    one-way rate whatever ``n``."""
    return algorithm_bandwidth(size, seconds) * bus_factor(collective, n)


def tier_link(hardware: Hardware | str, tier: str) -> tuple[float, float]:
    """``(bytes per second one way per GPU, alpha in seconds)`` of ``tier`` on ``hardware``."""
    hw = get_hardware(hardware)
    if tier not in TIERS:
        raise unknown_name("tier", tier, TIERS)
    return hw.link(tier).each_way, LATENCY[tier]


@dataclass(frozen=True)
class CollectiveCost:
    """One collective priced on a node's tiers: bytes each GPU sends over NVLink (``scale_up_bytes``, or
    the one tier named, see ``tiers``) and over the network, the latency and transfer times. Fields are
    numbers or numpy arrays broadcast over ``n`` and ``size``."""

    collective: str
    algorithm: str
    n: object
    size: object
    tiers: tuple  # (inside a node, across nodes)
    scale_up_bytes: object
    network_bytes: object
    latency: object  # overhead plus every step's alpha
    transfer: object  # the slower tier's bytes over its bandwidth

    @property
    def time(self):
        """Seconds for the collective: latency plus transfer."""
        return self.latency + self.transfer

    @property
    def bytes(self):
        """Bytes each GPU sends over all tiers."""
        return self.scale_up_bytes + self.network_bytes

    @property
    def algbw(self):
        """nccl-tests' algorithm bandwidth this model predicts: size / time."""
        return np.divide(self.size, self.time, out=np.zeros(np.broadcast(self.size, self.time).shape),
                         where=np.asarray(self.time) > 0) if np.ndim(self.time) else (
            self.size / self.time if self.time > 0 else 0.0)

    @property
    def busbw(self):
        """nccl-tests' bus bandwidth this model predicts."""
        return self.algbw * bus_factor(self.collective, self.n)


def collective_cost(collective, n: ArrayLike, size: ArrayLike, hardware: Hardware | str, *, gpus_per_node=8, tier: str | None = None,
                    algorithm: str = "ring", overhead=BASE_LATENCY) -> CollectiveCost:
    """Price one ``collective`` over ``n`` GPUs on a ``size``-byte buffer on ``hardware``'s tiers.

    Without ``tier``: a group of at most ``gpus_per_node`` rides NVLink (the host link where the catalog
    gives no NVLink); a larger group (a whole number of nodes) is hierarchical: NVLink over the full
    buffer inside each node, the network over each GPU's 1/g share across the nodes (all-to-all: the
    pieces bound for other nodes, ``(n-g)/n * size``, leave through each GPU's own port), the slower tier
    setting the transfer time. With ``tier`` ('scale_up', 'host' or 'network'): every byte over that one
    tier, a flat schedule. ``overhead`` is the per-call base latency (:data:`BASE_LATENCY`; 0 for the pure
    alpha-beta model). Broadcasts over arrays of ``n`` and ``size``.
    """
    c = _collective(collective)
    algorithm = _algorithm(c, algorithm)
    hw = get_hardware(hardware)
    n, size = _group(n), number("size", size, strict=False)
    g = number("gpus_per_node", gpus_per_node, integer=True)
    overhead = number("overhead", overhead, strict=False)
    if np.ndim(g) or np.ndim(overhead):
        raise TypeError("gpus_per_node and overhead must be single numbers")
    shape = broadcast(n=n, size=size)
    nn = np.asarray(n, dtype=float)
    called = np.where(nn > 1, overhead, 0.0)
    if tier is not None:
        bandwidth, alpha = tier_link(hw, tier)
        sent = bytes_sent(c, n, size, algorithm=algorithm)
        latency = called + latency_steps(c, n, algorithm=algorithm) * alpha
        cost = CollectiveCost(c.name, algorithm, n, size, (tier, tier), sent, np.zeros(shape) if shape else 0.0,
                              latency, sent / bandwidth)
        return _scalars(cost, shape)
    spans = nn > g
    require_links(hw, [("scale_up", "host")] + (["network"] if spans.any() else []),
                  f"{c.name.replace('_', '-')} over {float(nn.max()):g} GPUs in nodes of {g:g}")
    inside = "scale_up" if "scale_up" in hw.interconnect else "host"
    b_in, a_in = tier_link(hw, inside)
    if spans.any():
        bad = spans & (nn % g != 0)
        if bad.any():
            raise ValueError(f"n must be at most gpus_per_node ({g:g}) or a whole number of nodes (a multiple of it), "
                             f"got {float(nn[bad].flat[0]):g}")
        b_out, a_out = tier_link(hw, "network")
    else:
        b_out, a_out = 1.0, 0.0
    local = np.minimum(nn, g)
    nodes = np.ceil(nn / local)
    if c.traffic is None:  # point to point: the peer is across the network when the group spans nodes
        inner = np.where(spans, 0.0, bytes_sent(c, local, size))
        outer = np.where(spans, bytes_sent(c, nn, size), 0.0)
        steps = np.where(nn > 1, np.where(spans, a_out, a_in), 0.0)
    elif c.name == "all_to_all":
        inner = (local - 1) / nn * size
        outer = (nn - local) / nn * size
        steps = (local - 1) * a_in + (nn - local) * a_out
    else:  # all-reduce, reduce-scatter, all-gather: hierarchical
        inner = bytes_sent(c, local, size, algorithm=algorithm)
        outer = bytes_sent(c, nodes, size / local, algorithm=algorithm)
        steps = (latency_steps(c, local, algorithm=algorithm) * a_in
                 + latency_steps(c, nodes, algorithm=algorithm) * a_out)
    transfer = np.maximum(inner / b_in, outer / b_out)
    cost = CollectiveCost(c.name, algorithm, n, size, (inside, "network"), inner, outer, called + steps, transfer)
    return _scalars(cost, shape)


def _scalars(cost: CollectiveCost, shape) -> CollectiveCost:
    """Plain floats when every input was a single number."""
    if shape:
        return cost
    return CollectiveCost(cost.collective, cost.algorithm, cost.n, cost.size, cost.tiers,
                          *(float(np.asarray(getattr(cost, f))) for f in
                            ("scale_up_bytes", "network_bytes", "latency", "transfer")))


def collective_time(collective, n, size, hardware: Hardware | str, **kwargs):
    """Seconds for one ``collective`` (:func:`collective_cost`'s ``time``); same arguments."""
    return collective_cost(collective, n, size, hardware, **kwargs).time


def break_even_size(collective, n, hardware: Hardware | str, *, times: float = 1.0, **kwargs):
    """The buffer size (bytes) at which a ``collective``'s latency equals its transfer time: below it the
    alpha terms dominate (chapter 8's small activations), well above it the link's bandwidth does (a
    gradient bucket ten times this size spends about a tenth of its time on latency). ``times`` scales it
    (``times=9``: a bucket nine times the break-even size, chapter 7's exercise 3). Other arguments as
    :func:`collective_cost`; ``inf`` for a group of one (no transfer at all)."""
    scale = number("times", times, strict=True)
    one = collective_cost(collective, n, 1.0, hardware, **kwargs)
    per_byte, latency = np.asarray(one.transfer, dtype=float), np.asarray(one.latency, dtype=float)
    out = scale * np.divide(latency, per_byte, out=np.full(per_byte.shape, np.inf), where=per_byte > 0)
    return float(out) if out.ndim == 0 else out


def latency_bound_size(collective, n, hardware: Hardware | str, share, **kwargs):
    """Chapter 7: the buffer size (bytes) at which latency is ``share`` of a ``collective``'s time (a gradient
    bucket that keeps latency to a tenth: ``share=0.1``): ``break_even_size x (1 - share) / share``, since
    at the break-even size latency is half the time. Arguments as :func:`collective_cost`."""
    share = number("share", share, strict=False)
    if np.ndim(share) or not 0 < share < 1:
        raise ValueError(f"share must be a single number strictly between 0 and 1, got {share!r}")
    return break_even_size(collective, n, hardware, **kwargs) * (1 - share) / share


def latency_share(cost: CollectiveCost):
    """Chapter 7: the share of a collective's time that is latency (the per-call overhead and every step's
    alpha) rather than bytes on the wire: ``latency / time`` (0 for a collective that takes no time)."""
    if not isinstance(cost, CollectiveCost):
        raise TypeError(f"cost must be a CollectiveCost (from collective_cost), got {type(cost).__name__}")
    if np.ndim(cost.time):
        return np.divide(cost.latency, cost.time, out=np.zeros(np.shape(cost.time)), where=np.asarray(cost.time) > 0)
    return cost.latency / cost.time if cost.time > 0 else 0.0


__all__ += ["latency_share"]
__all__ += ["latency_bound_size"]
