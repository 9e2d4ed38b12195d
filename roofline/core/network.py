"""The third budget beyond HBM: a node's bandwidth tiers and what parallelism sends over them
(chapter 1; chapters 7 to 11 build on it).

Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", SC 2020:
plain data parallelism all-reduces the gradients (2 Psi per GPU with a ring); ZeRO stages 1 and 2 move
the same; stage 3 adds an all-gather of the parameters for the backward pass, 3 Psi in all, 1.5x.
"""

from __future__ import annotations

from dataclasses import dataclass

from types import MappingProxyType
from typing import Mapping

from roofline.core.checks import count, number
from roofline.core.collectives import bytes_sent
from roofline.core.hardware import Spec, Hardware, get_hardware
from roofline.core.policies import ZERO_STAGES, zero_stage as zero_stage_of

__all__ = ["Tier", "bandwidth_tiers", "data_parallel_bytes", "ZERO_STAGES", "ZERO_COLLECTIVES", "transfer_time",
           "MAX_GPUS", "MAX_GPUS_PER_NODE", "gpu_count", "cluster"]

# The fabric's bounds on a GPU count. One NVLink domain (a "node" here) holds at most 576 GPUs (NVIDIA's largest
# announced NVLink switch domain, NVL576; an HGX node has 8, a GB200 NVL72 rack 72); a cluster, at most 2**20
# GPUs (about ten times the largest built so far). Counts past them describe no machine and only grow the sums.
MAX_GPUS_PER_NODE = 576
MAX_GPUS = 2**20


def gpu_count(name: str, value, *, per_node: bool = False) -> int:
    """``value`` as an ``int`` after checking it is a GPU count the fabric can hold: at most :data:`MAX_GPUS` in a
    cluster, or :data:`MAX_GPUS_PER_NODE` in one NVLink domain (``per_node``); a ``ValueError`` naming ``name``."""
    if per_node:
        return count(name, value, maximum=MAX_GPUS_PER_NODE, what=" (the largest NVLink domain, "
                                                                  "roofline.core.network.MAX_GPUS_PER_NODE)")
    return count(name, value, maximum=MAX_GPUS, what=" (a cluster of 2**20 GPUs, roofline.core.network.MAX_GPUS)")


def cluster(nodes, gpus_per_node) -> tuple[int, int]:
    """``(nodes, gpus_per_node)`` as ints after checking each with :func:`gpu_count` and their product
    against :data:`MAX_GPUS`; a ``ValueError`` naming the argument at fault."""
    g = gpu_count("gpus_per_node", gpus_per_node, per_node=True)
    n = gpu_count("nodes", nodes)
    if n * g > MAX_GPUS:
        raise ValueError(f"nodes x gpus_per_node must be at most {MAX_GPUS:,} GPUs (roofline.core.network.MAX_GPUS), "
                         f"got {n:,} x {g:,}")
    return n, g

# The collectives each ZeRO stage runs per step on the gradients' or weights' size (chapter 7): plain data
# parallelism all-reduces the gradients; stages 1 and 2 reduce-scatter them (each GPU keeps the share it
# updates) and all-gather the updated weights; stage 3 all-gathers the weights before the forward pass and
# again before the backward pass, and reduce-scatters the gradients.
ZERO_COLLECTIVES: Mapping[int, tuple] = MappingProxyType({
    0: ("all_reduce",),
    1: ("reduce_scatter", "all_gather"),
    2: ("reduce_scatter", "all_gather"),
    3: ("all_gather", "all_gather", "reduce_scatter"),
})


@dataclass(frozen=True)
class Tier:
    """One step of the bandwidth hierarchy, in bytes per second in one direction per GPU."""

    level: str  # 'HBM', 'scale_up', 'host', 'network'
    name: str  # 'HBM3', 'NVLink 4', ...
    each_way: float  # bytes/s one direction (HBM: read or write, as the datasheet states it)
    figure: Spec
    note: str = ""

    def time(self, nbytes) -> float:
        """Seconds to move ``nbytes`` across this tier at its full one-way rate."""
        return transfer_time(nbytes, self.each_way)


def transfer_time(nbytes, bytes_per_s):
    """Seconds to move ``nbytes`` at ``bytes_per_s``."""
    return number("nbytes", nbytes, strict=False) / number("bytes_per_s", bytes_per_s)


def bandwidth_tiers(hardware: Hardware | str) -> list[Tier]:
    """HBM, then the GPU's scale-up link, its host link and its network, fastest first."""
    hw = get_hardware(hardware)
    tiers = [Tier("HBM", hw.memory_type, hw.hbm_bandwidth, hw.source("hbm_bandwidth"), "on the package")]
    notes = {"scale_up": "GPU to GPU inside a node", "host": "GPU to CPU", "network": "between nodes, per GPU"}
    for level in ("scale_up", "host", "network"):
        if level in hw.interconnect:
            link = hw.interconnect[level]
            tiers.append(Tier(level, link.name, link.each_way, link.figure, notes[level]))
    return tiers




def data_parallel_bytes(params, gpus, *, zero_stage: int = 0, bytes_per_param: float = 2):
    """Bytes each GPU sends per training step under data parallelism with ZeRO stage ``zero_stage``.

    A ring all-reduce of Psi bytes sends ``2 (G-1)/G * Psi`` per GPU; ZeRO-3 sends ``3 (G-1)/G * Psi``.
    The sum of :data:`ZERO_COLLECTIVES` priced by :func:`roofline.core.collectives.bytes_sent`.
    """
    try:
        stage = zero_stage_of(zero_stage)
    except ValueError:
        raise ValueError(f"zero_stage must be 0, 1, 2 or 3, got {zero_stage!r}") from None
    params = number("params", params)
    gpus = number("gpus", gpus, integer=True, minimum=1, strict=False)
    psi = params * number("bytes_per_param", bytes_per_param)
    sent = [bytes_sent(name, gpus, psi) for name in ZERO_COLLECTIVES[stage.stage]]
    return sent[0] if len(sent) == 1 else sum(sent)


def link_ridge(hardware: Hardware | str, link: str, *, achieved: float = 1.0, dtype: str = "bf16") -> float:
    """A link's ridge (chapters 1 and 3): FLOPs the GPU does, at ``achieved`` of its dense peak, in the
    time one byte crosses ``link`` each way, ``achieved x peak / each_way``. Work that sends fewer bytes
    per FLOP than this hides its traffic."""
    hw = get_hardware(hardware)
    return number("achieved", achieved) * hw.peak_flops(dtype) / hw.link(link, name="link").each_way


__all__ += ["link_ridge"]
