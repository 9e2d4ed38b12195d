"""The roof of a training cluster: what one chip's kernels and its fabric's collectives reach (appendix C).

A :class:`ClusterRoof` answers five questions, each as seconds:

- :meth:`~ClusterRoof.gemm_time`: a matmul of so many FLOPs and bytes;
- :meth:`~ClusterRoof.memory_time`: a memory-bound kernel (a norm, an activation, the optimizer) moving so
  many bytes;
- :meth:`~ClusterRoof.flash_time`: a flash-attention forward and backward of so many FLOPs at a sequence
  length and head size;
- :meth:`~ClusterRoof.collective_time`: an all-reduce, all-gather, reduce-scatter or all-to-all over a group,
  some of whose members share a node;
- :meth:`~ClusterRoof.send_time`: one point-to-point message, inside a node or across.

Two kinds answer them. The **datasheet** roof (:func:`datasheet_cluster_roof`) runs every matmul at the
peak, every memory-bound kernel at the HBM bandwidth, every collective at the link rate and every message
without latency: no kernel and no collective beats it, so what it prices is a floor. The **calibrated** roof
holds what microbenchmarks of the chip and its fabric reached (built from published records by
:func:`roofline.core.calibration.get_roof`): an estimate, never above the datasheet's rates (each calibrated
rate is capped at the datasheet's, so the estimate of a step can only be slower than its floor).

Collectives follow nccl-tests' conventions (``roofline.core.collectives``): ``size`` is the buffer, the time
is ``size * factor / busbw`` with the factor ``2 (n-1)/n`` for all-reduce and ``(n-1)/n`` for the others.
Inside a node the bus bandwidth is the measured all-reduce sweep at that size. A group that spans nodes
with ``k`` of its members in each node leaves through ``k`` network ports, so its bus bandwidth is ``k`` times
one port's (capped at the node's NVLink rate), times the same size-dependence as inside the node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

import numpy as np
from numpy.typing import ArrayLike

from roofline.core.checks import number, unknown_name
from roofline.core.collectives import bus_factor
from roofline.core.curve import Curve
from roofline.core.hardware import Hardware, get_hardware

__all__ = ["ROOF_KINDS", "ClusterRoof", "datasheet_cluster_roof", "CLUSTER_COLLECTIVES", "joined_time",
           "ALLREDUCE_KINDS", "ENGINE_ALLREDUCE", "CUSTOM_ALL_REDUCE_MAX_BYTES", "EP_LOW_LATENCY_LOAD", "EP_EXCHANGES",
           "FP8_DISPATCH_BYTES"]

ROOF_KINDS = ("datasheet", "calibrated")
"""The kinds of roof a question is asked under: the datasheet's (a floor) and a calibrated one (an estimate)."""

CLUSTER_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")

ALLREDUCE_KINDS = ("nccl", "custom")
"""How an inference engine all-reduces a tensor-parallel group's activations inside a node (chapter 13):
``'nccl'``, NCCL's ring or tree (the nccl-tests sweep), or ``'custom'``, the one-shot and two-shot kernels
that read every peer's buffer over NVLink directly (vLLM's and SGLang's custom all-reduce, TensorRT-LLM's
ONESHOT and TWOSHOT), chosen by message size as the engines choose them, with NCCL past their buffer."""
ENGINE_ALLREDUCE = "custom"
"""The engines' default: vLLM (``disable_custom_all_reduce`` off), SGLang (likewise) and TensorRT-LLM (the
AUTO strategy, which picks one-shot or two-shot for small messages) all decode with custom kernels."""
EP_LOW_LATENCY_LOAD = (128, 7168, 8)
"""The load DeepEP's low-latency kernels were measured at: tokens a GPU, hidden size, experts a token."""
EP_EXCHANGES = ("dispatch", "combine")
"""The two all-to-alls of an expert-parallel layer: the dispatch sends each token to the GPUs of its experts, the
combine brings the experts' outputs back and sums them (DeepEP's normal kernels name them so)."""
FP8_DISPATCH_BYTES = 1.0 + 4.0 / 128
"""Bytes an element of a token takes when dispatched in fp8 as DeepSeek-V3 does: one fp8 byte and a 4-byte scale for
every 128 elements (DeepEP's tests count it so: ``fp8_factor = (1 + 4 / 128) / 2`` of the bf16 bytes)."""
CUSTOM_ALL_REDUCE_MAX_BYTES = 8 * 1024 * 1024
"""The largest buffer the custom kernels take: vLLM's and SGLang's registered buffer, 8 MiB; larger
all-reduces go to NCCL."""


def joined_time(compute: ArrayLike, memory: ArrayLike, nu: float):
    """Two times of one kernel joined as ``(compute^nu + memory^nu)^(1/nu)``: the larger of the two when
    they are far apart, up to ``2^(1/nu)`` times it where they are equal (at the ridge); ``nu`` infinite is
    the roofline's ``max``. Computed from the larger time, so it neither overflows nor underflows."""
    compute, memory = np.asarray(compute, dtype=float), np.asarray(memory, dtype=float)
    top = np.maximum(compute, memory)
    ratio = np.divide(np.minimum(compute, memory), top, out=np.zeros_like(top), where=top > 0)
    out = top * (1.0 + ratio ** nu) ** (1.0 / nu)
    return out.item() if out.ndim == 0 else out


def _collective(collective: str) -> str:
    if collective not in CLUSTER_COLLECTIVES:
        raise unknown_name("collective", collective, CLUSTER_COLLECTIVES)
    return collective


@dataclass(frozen=True)
class ClusterRoof:
    """One chip and its fabric, as a datasheet promises them or as microbenchmarks saw them.

    ``peak_flops``: the datasheet's dense peak of ``dtype`` (what MFU divides by). ``gemm``: FLOP/s a matmul
    reaches against its FLOPs (small matmuls fill the chip badly). ``attention``: flash attention's forward
    and backward FLOP/s against sequence length, keyed by ``(head_dim, causal)``. ``bandwidth``: bytes/s a
    memory-bound kernel reaches. ``launch_s``: seconds a kernel takes at least. ``nvlink``: all-reduce bus
    bandwidth inside a node against message size; ``all_to_all_nvlink``: all-to-all's, as a share of
    all-reduce's. ``port``: one GPU's network port, bytes/s of a ring's bus bandwidth per member of the group
    in a node; ``all_to_all_port``: the bus bandwidth of an all-to-all across nodes. ``send_nvlink``: one message between two GPUs of a node, bytes/s.
    ``latency_s``: the fixed cost of one message. ``attention_forward``: flash attention's forward pass alone
    (a prefill), keyed as ``attention``; empty where no forward sweep was published. ``sources``: for each quantity, the records it came from;
    ``assumptions``: what was carried over from elsewhere, said in words. ``gemm_nu``: the exponent
    :math:`\\nu` that joins a matmul's two times, its FLOPs at the size's rate and its bytes at the bandwidth, as
    :math:`(T_\\text{compute}^\\nu + T_\\text{memory}^\\nu)^{1/\\nu}`: near the ridge a kernel cannot
    stream its weights and keep its tensor cores full at once (fitted to decode-shaped matmuls,
    :func:`roofline.core.calibration.fit_gemm_nu`); None: the larger of the two, the roofline's own rule.
    ``custom_all_reduce``: the engines' one-shot/two-shot all-reduce inside a node, seconds against the buffer's
    bytes, keyed by the group's size (:meth:`all_reduce_time`); empty where no such kernel was measured.
    ``ep_low_latency``: the low-latency all-to-all kernels a decode step sends tokens to their experts with
    (DeepEP's, pure RDMA), ``'dispatch'`` and ``'combine'`` each a curve of seconds against the expert-parallel
    group's size at :data:`EP_LOW_LATENCY_LOAD` (:meth:`moe_all_to_all_time`); empty where none was measured.

    The training expert all-to-all with DeepEP's normal (high-throughput) kernels (:meth:`ep_exchange_time`):
    ``ep_rdma``, for ``'dispatch'`` and ``'combine'``, a curve of the bytes/s their internode kernels reached
    against the expert-parallel group's size (DeepEP's "RDMA bandwidth": a token counted once for each node of its
    experts, its own node included); ``ep_nvlink``, the bytes/s their intranode kernels reached (a token counted
    once for each GPU of its experts, its own included); empty where none was measured.

    For fp8 training (a roof of ``dtype`` 'fp8', :func:`roofline.core.calibration.fp8_training_roof`):
    ``fp8_gemm``, the FLOP/s of fp8 matmuls scaled otherwise than per tensor, keyed by scaling ('rowwise',
    'blockwise'; ``gemm`` is the per-tensor one); ``cast_bandwidth``, the bytes/s a quantization kernel reaches
    (None: ``bandwidth``); ``bf16``, the same chip's roof in bf16, for the parts a recipe keeps in bf16
    (attention, the output head); ``grouped_gemm``, the FLOP/s of block-scaled grouped matmuls (one kernel over
    several experts' rows, DeepGEMM's) against the rows of each group, keyed by ``(n, k)``, the shape the groups
    share (:meth:`grouped_gemm_time`); empty where none was measured.

    Kernels by name, where microbenchmarks of them were published (:func:`roofline.core.calibration.get_roof`
    fills them in for Hopper): ``attention_kernels``, flash-attention forward-and-backward curves of kernels
    other than the roof's own (``attention``), keyed by kernel ('fa3', 'cudnn') and then as ``attention``;
    ``kernel_rates``, the bytes/s a kind of memory-bound kernel reaches on the bytes a step's model counts for it
    ('activation forward', 'activation backward', 'cross-entropy'; a kind not named runs at ``bandwidth``).
    """

    label: str
    hardware: Hardware
    kind: str
    dtype: str
    peak_flops: float
    gemm: Curve
    attention: Mapping
    bandwidth: float
    launch_s: float
    nvlink: Curve
    all_to_all_nvlink: float
    port: float
    all_to_all_port: float
    send_nvlink: float
    latency_s: float
    sources: Mapping = field(default_factory=dict)
    assumptions: tuple = ()
    attention_forward: Mapping = field(default_factory=dict)
    gemm_nu: float | None = None
    custom_all_reduce: Mapping = field(default_factory=dict)
    ep_low_latency: Mapping = field(default_factory=dict)
    fp8_gemm: Mapping = field(default_factory=dict)
    cast_bandwidth: float | None = None
    bf16: "ClusterRoof | None" = None
    attention_kernels: Mapping = field(default_factory=dict)
    kernel_rates: Mapping = field(default_factory=dict)
    ep_rdma: Mapping = field(default_factory=dict)
    ep_nvlink: Mapping = field(default_factory=dict)
    grouped_gemm: Mapping = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in ROOF_KINDS:
            raise unknown_name("kind", self.kind, ROOF_KINDS)
        for name in ("peak_flops", "bandwidth", "port", "all_to_all_port", "send_nvlink", "all_to_all_nvlink"):
            number(name, getattr(self, name))
        number("launch_s", self.launch_s, strict=False)
        number("latency_s", self.latency_s, strict=False)
        if self.gemm_nu is not None:
            number("gemm_nu", self.gemm_nu, minimum=1)
        object.__setattr__(self, "attention", MappingProxyType(dict(self.attention)))
        object.__setattr__(self, "attention_forward", MappingProxyType(dict(self.attention_forward)))
        for n, c in dict(self.custom_all_reduce).items():
            if not isinstance(c, Curve) or int(n) != n or n < 2:
                raise ValueError(f"custom_all_reduce maps a group size of at least 2 to a Curve, got {n!r}: {c!r}")
        object.__setattr__(self, "custom_all_reduce", MappingProxyType(dict(self.custom_all_reduce)))
        if set(self.ep_low_latency) - {"dispatch", "combine"} or any(not isinstance(c, Curve) for c in
                                                                     self.ep_low_latency.values()):
            raise ValueError("ep_low_latency maps 'dispatch' and 'combine' to Curves of seconds against the group size")
        object.__setattr__(self, "ep_low_latency", MappingProxyType(dict(self.ep_low_latency)))
        if set(self.ep_rdma) - set(EP_EXCHANGES) or any(not isinstance(c, Curve) for c in self.ep_rdma.values()):
            raise ValueError("ep_rdma maps 'dispatch' and 'combine' to Curves of bytes/s against the group size")
        object.__setattr__(self, "ep_rdma", MappingProxyType(dict(self.ep_rdma)))
        if set(self.ep_nvlink) - set(EP_EXCHANGES):
            raise ValueError("ep_nvlink maps 'dispatch' and 'combine' to bytes/s")
        for kind, rate in self.ep_nvlink.items():
            number(f"ep_nvlink[{kind!r}]", rate)
        object.__setattr__(self, "ep_nvlink", MappingProxyType(dict(self.ep_nvlink)))
        for key, c in dict(self.grouped_gemm).items():
            if not isinstance(c, Curve) or not (isinstance(key, tuple) and len(key) == 2):
                raise ValueError(f"grouped_gemm maps an (n, k) shape to a Curve of FLOP/s against rows a group, "
                                 f"got {key!r}: {c!r}")
        object.__setattr__(self, "grouped_gemm", MappingProxyType(dict(self.grouped_gemm)))
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))
        object.__setattr__(self, "fp8_gemm", MappingProxyType(dict(self.fp8_gemm)))
        object.__setattr__(self, "attention_kernels", MappingProxyType({k: MappingProxyType(dict(v)) for k, v in
                                                                       self.attention_kernels.items()}))
        object.__setattr__(self, "kernel_rates", MappingProxyType(dict(self.kernel_rates)))
        for kind, rate in self.kernel_rates.items():
            number(f"kernel_rates[{kind!r}]", rate)
        if self.cast_bandwidth is not None:
            number("cast_bandwidth", self.cast_bandwidth)
        if self.bf16 is not None and not isinstance(self.bf16, ClusterRoof):
            raise TypeError(f"bf16 must be a ClusterRoof or None, got {type(self.bf16).__name__}")

    @property
    def calibrated(self) -> bool:
        return self.kind == "calibrated"

    # ----------------------------------------------------------------------------------------------- kernels

    def gemm_rate(self, flops: ArrayLike):
        """FLOP/s of one matmul of ``flops`` FLOPs."""
        return self.gemm(flops)

    def gemm_time(self, flops: ArrayLike, nbytes: ArrayLike = 0.0):
        """Seconds for one matmul: its FLOPs at the rate a matmul of that size reaches, or its bytes at the
        memory-bound kernels' bandwidth if that is longer (the two joined by ``gemm_nu`` where the roof has
        one), and at least one launch."""
        flops = np.asarray(flops, dtype=float)
        compute = flops / self.gemm(np.maximum(flops, 1.0))
        memory = np.asarray(nbytes, dtype=float) / self.bandwidth
        t = np.maximum(compute, memory) if self.gemm_nu is None else joined_time(compute, memory, self.gemm_nu)
        t = np.where(flops > 0, np.maximum(t, self.launch_s), 0.0)
        return t.item() if t.ndim == 0 else t

    def scaled_gemm_time(self, flops: ArrayLike, nbytes: ArrayLike = 0.0, scaling: str = "tensorwise"):
        """Seconds for one fp8 matmul whose operands are scaled per ``scaling`` ('tensorwise', 'rowwise',
        'blockwise'): :meth:`gemm_time` on the curve :attr:`fp8_gemm` holds for that scaling, the roof's own
        where it holds none."""
        curve = self.fp8_gemm.get(scaling, self.gemm)
        if curve is self.gemm:
            return self.gemm_time(flops, nbytes)
        flops = np.asarray(flops, dtype=float)
        compute = flops / curve(np.maximum(flops, 1.0))
        memory = np.asarray(nbytes, dtype=float) / self.bandwidth
        t = np.maximum(compute, memory) if self.gemm_nu is None else joined_time(compute, memory, self.gemm_nu)
        t = np.where(flops > 0, np.maximum(t, self.launch_s), 0.0)
        return t.item() if t.ndim == 0 else t

    def cast_time(self, nbytes: ArrayLike, kernels: ArrayLike = 1):
        """Seconds for ``kernels`` quantization kernels (casts to fp8, amax passes) moving ``nbytes`` in all, at
        :attr:`cast_bandwidth` (the memory-bound kernels' bandwidth where there is none), at least a launch each."""
        bw = self.bandwidth if self.cast_bandwidth is None else self.cast_bandwidth
        t = np.maximum(np.asarray(nbytes, dtype=float) / bw, np.asarray(kernels, dtype=float) * self.launch_s)
        return t.item() if t.ndim == 0 else t

    def kernel_time(self, kind: str, nbytes: ArrayLike, kernels: ArrayLike = 1):
        """Seconds for ``kernels`` memory-bound kernels of ``kind`` moving ``nbytes`` (as the step's model counts
        them) in all: at :attr:`kernel_rates`'s rate for that kind, the memory-bound kernels' bandwidth where it
        holds none; at least a launch each."""
        bw = self.kernel_rates.get(kind, self.bandwidth)
        t = np.maximum(np.asarray(nbytes, dtype=float) / bw, np.asarray(kernels, dtype=float) * self.launch_s)
        return t.item() if t.ndim == 0 else t

    def grouped_gemm_time(self, groups: float, rows: float, n: int, k: int) -> float | None:
        """Seconds for one grouped matmul of ``groups`` groups of ``rows x n x k`` each (one kernel over the
        experts' rows, the weights differing by group): their FLOPs, ``2 groups rows n k``, at the rate
        :attr:`grouped_gemm` holds for the shape ``(n, k)`` at that many rows a group (read between the measured
        rows in log-log), at least one launch. ``None`` where no record covers it: no curve of that shape, or rows
        outside the measured ones (the model then prices each group as a matmul of its own).

        Worked by hand, DeepGEMM's first contiguous row on the H800 (mbx300): 4 groups of 8,192 x 4,096 x 7,168
        are ``2 x 4 x 8,192 x 4,096 x 7,168 = 1.924e12`` FLOPs; at 1,346 TFLOP/s, 1.43 ms."""
        curve = self.grouped_gemm.get((int(n), int(k)))
        if curve is None or groups <= 0 or rows <= 0 or not curve.xs[0] <= rows <= curve.xs[-1]:
            return None
        flops = 2.0 * groups * rows * n * k
        return float(max(flops / curve(float(rows)), self.launch_s))

    def ep_exchange_time(self, kind: str, ep: float, nbytes: float, *, per_node: float) -> float:
        """Seconds for one expert all-to-all of training (``kind`` 'dispatch' or 'combine', :data:`EP_EXCHANGES`)
        over ``ep`` GPUs, ``per_node`` of them in each node, each GPU sending ``nbytes`` counted as DeepEP's tests
        count them: every token once for each GPU (inside a node) or node (across nodes) that holds one of its
        experts, its own included.

        - inside a node (``per_node >= ep``): the bytes at :attr:`ep_nvlink`'s rate for ``kind`` where the roof
          holds one, else at the roof's all-to-all over NVLink (:meth:`collective_time`, whose factor
          ``(ep-1)/ep`` leaves out the GPU's own share);
        - across nodes: the bytes at :attr:`ep_rdma`'s rate for ``kind`` at that group size (held past the measured
          sizes), else the share that leaves the node, ``(nodes-1)/nodes``, at :attr:`all_to_all_port`;
        - never faster than the bytes that leave the GPU (``(ep-1)/ep`` of them, over its NVLink) or the node
          (``(nodes-1)/nodes``, through its network port) at the datasheet's link: the floor the datasheet roof
          prices (uniform routing sends a token's copies to its own GPU, or node, as often as to any other).

        Worked by hand, DeepEP's internode dispatch of its README (mb0100): 4,096 tokens of 7,168 elements in fp8
        (:data:`FP8_DISPATCH_BYTES` each), to 4 of 8 nodes each, are ``4,096 x 4 x 7,168 x 1.03125 = 121.1 MB``; at
        51 GB/s, 2.37 ms; the datasheet's floor sends 7/8 of them through a 50 GB/s port, 2.12 ms."""
        if kind not in EP_EXCHANGES:
            raise unknown_name("kind", kind, EP_EXCHANGES)
        ep, nbytes, k = float(ep), float(nbytes), float(per_node)
        if ep <= 1 or nbytes <= 0:
            return 0.0
        hw = self.hardware
        up = hw.link("scale_up").each_way if "scale_up" in hw.interconnect else hw.link("host").each_way
        if k >= ep:
            floor = nbytes * (ep - 1) / ep / up
            if kind in self.ep_nvlink:
                t = nbytes / self.ep_nvlink[kind]
            elif self.calibrated:
                t = float(self.collective_time("all_to_all", ep, nbytes))
            else:
                t = floor
            return float(max(t, floor))
        nodes = ep / k
        port = hw.link("network").each_way if "network" in hw.interconnect else up
        floor = nbytes * (nodes - 1) / nodes / port
        if kind in self.ep_rdma:
            t = nbytes / self.ep_rdma[kind](ep)
        elif self.calibrated:
            t = nbytes * (nodes - 1) / nodes / self.all_to_all_port
        else:
            t = floor
        return float(max(t, floor))

    @property
    def high(self) -> "ClusterRoof":
        """The roof the parts kept in bf16 run under: :attr:`bf16` where the roof has one, else itself."""
        return self if self.bf16 is None else self.bf16

    def memory_time(self, nbytes: ArrayLike, kernels: ArrayLike = 1):
        """Seconds for ``kernels`` memory-bound kernels moving ``nbytes`` in all: the bytes at the
        bandwidth, and at least one launch each."""
        t = np.maximum(np.asarray(nbytes, dtype=float) / self.bandwidth, np.asarray(kernels, dtype=float) * self.launch_s)
        return t.item() if t.ndim == 0 else t

    def flash_time(self, flops: ArrayLike, seq: ArrayLike, head_dim: int = 128, causal: bool = True,
                   kernel: str | None = None):
        """Seconds for a flash-attention forward and backward of ``flops`` FLOPs (the benchmarks' count:
        backward 2.5 times forward, causal halved) at sequence length ``seq``. The curve of the nearest
        measured head size is used (the datasheet roof has one flat curve); ``kernel`` names one of
        :attr:`attention_kernels` (None, or a kernel the roof holds no curve of: the roof's own)."""
        curves = self.attention_kernels.get(kernel) if kernel is not None else None
        curve = self.attention_curve(head_dim, causal, curves)
        flops = np.asarray(flops, dtype=float)
        t = np.where(flops > 0, flops / curve(np.maximum(np.asarray(seq, dtype=float), 1.0)), 0.0)
        return t.item() if t.ndim == 0 else t

    def flash_forward_time(self, flops: ArrayLike, seq: ArrayLike, head_dim: int = 128, causal: bool = True):
        """Seconds for a flash-attention forward pass alone of ``flops`` FLOPs (a prefill's) at sequence length
        ``seq``: the forward curve of the nearest measured head size where the roof has one, else the forward
        and backward curve's rate."""
        curve = self.attention_curve(head_dim, causal, self.attention_forward or self.attention)
        flops = np.asarray(flops, dtype=float)
        t = np.where(flops > 0, flops / curve(np.maximum(np.asarray(seq, dtype=float), 1.0)), 0.0)
        return t.item() if t.ndim == 0 else t

    def attention_curve(self, head_dim: int, causal: bool, curves: Mapping | None = None) -> Curve:
        """Flash attention's FLOP/s against sequence length at the measured head size nearest ``head_dim``
        (``curves``: the forward-and-backward curves unless given; a flat curve at the best matmul's rate where
        none was measured)."""
        curves = self.attention if curves is None else curves
        keys = [k for k in curves if k[1] == bool(causal)] or list(curves)
        if not keys:
            return Curve.flat(self.gemm.top)
        best = min(keys, key=lambda k: (abs(np.log(k[0] / head_dim)), -k[0]))
        return curves[best]

    # ----------------------------------------------------------------------------------------- collectives

    def bus_bandwidth(self, collective: str, n: ArrayLike, size: ArrayLike, per_node: ArrayLike):
        """nccl-tests bus bandwidth of ``collective`` over ``n`` GPUs, ``per_node`` of them in each node, on a
        ``size``-byte buffer."""
        _collective(collective)
        n, size, per_node = (np.asarray(x, dtype=float) for x in (n, size, per_node))
        inside = self.nvlink(np.maximum(size, 1.0))
        shape = inside / self.nvlink.top
        a2a = collective == "all_to_all"
        inside_bw = inside * (self.all_to_all_nvlink if a2a else 1.0)
        # a ring crosses each node boundary once per channel, one channel per port: k ports in parallel; an
        # all-to-all sends each GPU's pieces for other nodes through that GPU's own port
        across = np.minimum(self.all_to_all_port if a2a else per_node * self.port, self.nvlink.top) * shape
        out = np.where(per_node >= n, inside_bw, across)
        return out.item() if out.ndim == 0 else out

    def collective_time(self, collective: str, n: ArrayLike, size: ArrayLike, *, per_node: ArrayLike | None = None):
        """Seconds for ``collective`` over ``n`` GPUs on a ``size``-byte buffer; ``per_node`` members of the
        group share each node (``None``: the whole group is inside one node). 0 for a group of one."""
        if all(type(x) in (int, float) for x in (n, size, 1 if per_node is None else per_node)):
            return self._scalar_collective_time(collective, n, size, per_node)  # a search prices thousands of these
        n = np.asarray(number("n", n, minimum=1, strict=False, integer=True), dtype=float)
        size = np.asarray(number("size", size, strict=False), dtype=float)
        k = n if per_node is None else np.asarray(number("per_node", per_node, minimum=1, strict=False), dtype=float)
        bw = self.bus_bandwidth(collective, n, size, np.minimum(k, n))
        t = np.where((n > 1) & (size > 0), size * bus_factor(_collective(collective), n) / bw, 0.0)
        return t.item() if t.ndim == 0 else t

    def _scalar_collective_time(self, collective: str, n, size, per_node) -> float:
        """:meth:`collective_time` of one collective on plain numbers, the same arithmetic without arrays."""
        n = number("n", n, minimum=1, strict=False, integer=True)
        size = number("size", size, strict=False)
        k = n if per_node is None else number("per_node", per_node, minimum=1, strict=False)
        if n <= 1 or size <= 0:
            return 0.0
        a2a = _collective(collective) == "all_to_all"
        inside = self.nvlink(max(size, 1.0))
        if min(k, n) >= n:
            bw = inside * (self.all_to_all_nvlink if a2a else 1.0)
        else:
            bw = min(self.all_to_all_port if a2a else min(k, n) * self.port, self.nvlink.top) * inside / self.nvlink.top
        return size * bus_factor(collective, n) / bw

    def custom_all_reduce_applies(self, n: float, size: float, *, per_node: float | None = None) -> bool:
        """Whether an engine runs this all-reduce with its custom kernels: a group of two or more inside one
        node, a buffer of at most :data:`CUSTOM_ALL_REDUCE_MAX_BYTES`, and a roof that holds the kernels'
        times (the datasheet roof prices every all-reduce at the link, which no kernel beats)."""
        n = float(n)
        inside = per_node is None or float(per_node) >= n
        return bool(n > 1 and inside and 0 < float(size) <= CUSTOM_ALL_REDUCE_MAX_BYTES and self.custom_all_reduce)

    def custom_all_reduce_time(self, n: float, size: float) -> float:
        """Seconds for one custom all-reduce of a ``size``-byte buffer over ``n`` GPUs of a node: the measured
        time of the nearest group size at or above ``n`` (else the largest measured), read between its
        buffer sizes, held at the smallest buffer's time below it (a launch and two barriers whatever the
        bytes) and growing at the largest buffer's rate above it; never below the buffer's bytes at the
        link's one-way rate with the ring's factor ``2 (n-1)/n`` (no kernel beats the link)."""
        if not self.custom_all_reduce:
            raise ValueError(f"the {self.label} roof holds no custom all-reduce times; use collective_time")
        n, size = float(n), float(size)
        if n <= 1 or size <= 0:
            return 0.0
        sizes = sorted(self.custom_all_reduce)
        key = next((k for k in sizes if k >= n), sizes[-1])
        c = self.custom_all_reduce[key]
        lo, hi = c.xs[0], c.xs[-1]
        t = c(lo) if size <= lo else c(size) if size <= hi else c(hi) * size / hi
        link = self.hardware.link("scale_up").each_way if "scale_up" in self.hardware.interconnect else \
            self.hardware.link("host").each_way
        return float(max(t, size * bus_factor("all_reduce", n) / link))

    def all_reduce_time(self, n: float, size: float, *, per_node: float | None = None, kind: str = "nccl") -> float:
        """Seconds for one all-reduce as an inference engine runs it (``kind``, :data:`ALLREDUCE_KINDS`):
        ``'custom'`` takes :meth:`custom_all_reduce_time` where :meth:`custom_all_reduce_applies`, and
        :meth:`collective_time` (NCCL's sweep) elsewhere; ``'nccl'`` is :meth:`collective_time` always."""
        if kind not in ALLREDUCE_KINDS:
            raise unknown_name("allreduce", kind, ALLREDUCE_KINDS)
        if kind == "custom" and self.custom_all_reduce_applies(n, size, per_node=per_node):
            return self.custom_all_reduce_time(n, size)
        return float(self.collective_time("all_reduce", n, size, per_node=per_node))

    def moe_all_to_all_time(self, ep: float, tokens: float, hidden: float, top_k: float) -> float:
        """Seconds for one decode step's dispatch and combine of ``tokens`` tokens a GPU, each to ``top_k``
        experts of ``hidden`` numbers, over ``ep`` GPUs, with the low-latency kernels: the measured times at
        :data:`EP_LOW_LATENCY_LOAD` (128 tokens, 7,168 wide, top 8), read at the nearest group size (held past
        the ends), scaled by the bytes (``tokens x top_k x hidden``) against theirs, as their bandwidth column
        reads them."""
        if not self.ep_low_latency:
            raise ValueError(f"the {self.label} roof holds no low-latency all-to-all times; use collective_time")
        if ep <= 1 or tokens <= 0:
            return 0.0
        t0, h0, k0 = EP_LOW_LATENCY_LOAD
        scale = float(tokens) * float(top_k) * float(hidden) / (t0 * k0 * h0)
        return float((self.ep_low_latency["dispatch"](float(ep)) + self.ep_low_latency["combine"](float(ep))) * scale)

    def send_time(self, size: ArrayLike, *, across_nodes: ArrayLike = True):
        """Seconds for one point-to-point message of ``size`` bytes: over a network port, or NVLink."""
        size = np.asarray(number("size", size, strict=False), dtype=float)
        bw = np.where(np.asarray(across_nodes, dtype=bool), self.port, self.send_nvlink)
        t = np.where(size > 0, self.latency_s + size / bw, 0.0)
        return t.item() if t.ndim == 0 else t


def datasheet_cluster_roof(hardware: Hardware | str, dtype: str = "bf16") -> ClusterRoof:
    """The datasheet's promise for ``hardware``: the dense peak for every matmul and attention kernel, the
    HBM bandwidth for every memory-bound kernel, NVLink's one-way rate for every collective inside a node,
    one network port per GPU across nodes, no launch cost and no latency. What it prices is a floor."""
    hw = get_hardware(hardware)
    peak = hw.peak_flops(dtype)
    up = hw.link("scale_up").each_way if "scale_up" in hw.interconnect else hw.link("host").each_way
    port = hw.link("network").each_way if "network" in hw.interconnect else up
    return ClusterRoof(f"{hw.short} datasheet", hw, "datasheet", dtype, peak, gemm=Curve.flat(peak), attention={},
                       bandwidth=hw.hbm_bandwidth, launch_s=0.0, nvlink=Curve.flat(up), all_to_all_nvlink=1.0,
                       port=port, all_to_all_port=port, send_nvlink=up, latency_s=0.0,
                       sources={"all": (f"the {hw.short} catalog entry (roofline/data/hardware.toml)",)})
