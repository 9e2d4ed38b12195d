"""A data-parallel training step on the per-operation core (chapter 7): compute from
:func:`roofline.workloads.training.training_step`, communication from :mod:`roofline.core.collectives`, memory from
chapter 2's :func:`roofline.workloads.memory.training_footprint`, and the overlap between them.

Schedules (what each GPU sends per micro-batch of ``seq * micro_batch`` tokens; Psi = the gradients' bytes):

- **ZeRO-0** (plain data parallelism, PyTorch DDP): the gradients are all-reduced in buckets of ``bucket``
  bytes, each launched as soon as the backward pass has produced it; with gradient accumulation only the
  last micro-batch's backward pass carries them.
- **ZeRO-1 and ZeRO-2**: the buckets are reduce-scattered instead (each GPU keeps the share whose optimizer
  state it holds) and the updated weights all-gathered in buckets, behind the next forward pass.
- **ZeRO-3** (FSDP full sharding): each layer's weights are all-gathered before its forward pass (the next
  layer's prefetched while this one computes), all-gathered again before its backward pass, and its
  gradients reduce-scattered after it: 1.5x the bytes of plain data parallelism, every micro-batch.
- **FSDP hybrid sharding** (``hybrid=True``, ZeRO-3 inside each node, replicas across nodes): the gathers
  and reduce-scatters stay on NVLink, and each GPU all-reduces its 1/g share of the gradients with its
  counterparts in the other nodes over the network.

Overlap: a phase of compute time ``T`` whose traffic comes in ``k`` equal units of ``c`` seconds each (a
bucket, or a layer), sent one after another on the link as the compute produces (or before it consumes)
them, leaves ``max(c, T/k + k c - T)`` exposed: one unit at least (the last bucket after the backward
pass ends, the first layer's gather before the forward pass starts), and everything the link cannot
finish while the compute runs. This is the schedule PyTorch DDP (Li et al., VLDB 2020) and FSDP (Zhao et
al., VLDB 2023) describe; its floor ignores the contention of compute and communication kernels for SMs
and HBM, so a measured step sits above it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from roofline.core.checks import number
from roofline.core.collectives import bytes_sent, collective_cost, collective_time, latency_steps
from roofline.core.hardware import Hardware, get_hardware
from roofline.workloads.memory import Footprint, training_footprint
from roofline.core.model import Model, load_model, param_count
from roofline.core.network import ZERO_COLLECTIVES, cluster
from roofline.core.policies import recompute_policy, zero_stage as zero_stage_of
from roofline.core.roof import predict
from roofline.parallel.tensor_parallel import tier_ridge
from roofline.workloads.training import training_flops_per_token, training_step, check_dense
from roofline.core.units import dtype_bytes

__all__ = ["DEFAULT_BUCKET", "PUBLISHED", "DataParallelStep", "data_parallel_step", "exposed_time", "hiding_tokens",
           "strategy_name"]

# PyTorch DDP's default gradient bucket: bucket_cap_mb=25 (torch.nn.parallel.DistributedDataParallel).
DEFAULT_BUCKET = 25 * 2**20

PUBLISHED: dict = {}  # filled below with the chapter's anchors, each with its source


def exposed_time(compute, units, unit_time):
    """Communication left exposed when ``units`` transfers of ``unit_time`` seconds each run one after another
    beside ``compute`` seconds ``T`` of work that produces (or consumes) them evenly, chapter 7's
    ``max(T_bucket, T/n_b + n_b T_bucket - T)`` with ``n_b = units`` and ``T_bucket = unit_time``; nothing when
    there is nothing to send."""
    t = number("compute", compute, strict=False)
    k = number("units", units, integer=True)
    c = number("unit_time", unit_time, strict=False)
    out = np.maximum(c, t / k + k * c - t)
    out = np.where(np.asarray(c) > 0, out, 0.0)
    return float(out) if np.ndim(out) == 0 else out


def strategy_name(zero_stage: int, hybrid: bool = False) -> str:
    """How the chapter names a layout: 'DDP', 'ZeRO-1', 'ZeRO-2', 'ZeRO-3 (FSDP full)' or 'FSDP hybrid'."""
    stage = zero_stage_of(zero_stage).stage
    if hybrid:
        return "FSDP hybrid"
    return {0: "DDP", 1: "ZeRO-1", 2: "ZeRO-2", 3: "ZeRO-3 (FSDP full)"}[stage]


@dataclass(frozen=True)
class DataParallelStep:
    """One GPU's share of a data-parallel training step: memory, compute, communication and overlap.

    Times are seconds per step (``accumulation`` micro-batches). ``communication`` is the time the link is
    busy; ``exposed`` the part of it the compute does not hide; ``time = compute + exposed``.
    """

    model: Model
    hardware: Hardware
    nodes: int
    gpus_per_node: int
    zero_stage: int
    hybrid: bool
    seq: int
    micro_batch: int
    accumulation: int
    recompute: str
    achieved: float | None
    bucket: float
    footprint: Footprint
    forward_time: float  # one micro-batch
    backward_time: float  # one micro-batch, recomputation included
    model_flops: float  # per step on this GPU
    sent_scale_up: float  # bytes this GPU sends per step over NVLink
    sent_network: float  # bytes this GPU sends per step over the network
    communication: float
    exposed: float

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def tokens(self) -> int:
        """Tokens per GPU per step."""
        return self.seq * self.micro_batch * self.accumulation

    @property
    def compute(self) -> float:
        return self.accumulation * (self.forward_time + self.backward_time)

    @property
    def time(self) -> float:
        return self.compute + self.exposed

    @property
    def sent(self) -> float:
        return self.sent_scale_up + self.sent_network

    @property
    def peak(self) -> float:
        return self.hardware.peak_flops("bf16")

    @property
    def mfu(self) -> float:
        return self.model_flops / (self.time * self.peak)

    @property
    def tokens_per_s(self) -> float:
        """Tokens per second over all GPUs."""
        return self.tokens * self.gpus / self.time

    @property
    def strategy(self) -> str:
        return strategy_name(self.zero_stage, self.hybrid)


def data_parallel_step(model: Model | str, hardware: Hardware | str, *, nodes=1, gpus_per_node=8, zero_stage=0,
                       hybrid: bool = False, seq=4096, micro_batch=1, accumulation=1, recompute: str = "full",
                       achieved=None, bucket=DEFAULT_BUCKET, grad_dtype: str = "bf16",
                       timing: str = "step", attention: str = "flash") -> DataParallelStep:
    """Price one data-parallel training step on ``nodes`` x ``gpus_per_node`` GPUs (see the module's schedules).

    Compute is the per-operation step (:func:`~roofline.workloads.training.training_step`, ``recompute`` policy): its
    roofline floor under ``timing``, or its FLOPs at ``achieved`` of peak. Memory per GPU is chapter 2's
    :func:`~roofline.workloads.memory.training_footprint` with the model state sharded over the GPUs that share it
    (all of them for ZeRO; one node's for hybrid sharding). Communication is priced by
    :func:`~roofline.core.collectives.collective_cost` (hierarchical when a group spans nodes).
    """
    m, hw = load_model(model), get_hardware(hardware)
    check_dense(m, "data_parallel_step")
    nodes, g = cluster(nodes, gpus_per_node)
    stage = zero_stage_of(zero_stage).stage
    if not isinstance(hybrid, bool):
        raise TypeError(f"hybrid must be True or False, got {hybrid!r}")
    if hybrid and stage != 3:
        raise ValueError(f"hybrid sharding is ZeRO-3 inside each node: zero_stage must be 3 with hybrid=True, got {stage}")
    seq = int(number("seq", seq, integer=True))
    micro_batch = int(number("micro_batch", micro_batch, integer=True))
    accumulation = int(number("accumulation", accumulation, integer=True))
    bucket = float(number("bucket", bucket))
    policy = recompute_policy(recompute)
    if achieved is not None:
        achieved = float(number("achieved", achieved))
        if achieved > 1:
            raise ValueError(f"achieved is a fraction of peak and cannot exceed 1, got {achieved!r}")
    n = nodes * g
    shard = g if hybrid else n
    step = training_step(m, seq, micro_batch, recompute=policy.name, attention=attention)
    footprint = training_footprint(m, seq, micro_batch, gpus=shard, zero_stage=stage, recompute=policy.name,
                                   flash=attention == "flash")
    peak = hw.peak_flops(step.formats.math)
    total = float(predict(step, hw, timing=timing).time) if achieved is None else float(step.flops) / (achieved * peak)
    flops = float(step.flops)
    forward = total * float(step["forward"].flops) / flops
    backward = total - forward  # the backward pass and what the policy recomputes in it
    model_flops = accumulation * float(step["forward"].flops + step["backward"].flops)

    psi = param_count(m) * dtype_bytes(grad_dtype)
    up = net = busy = exposed = 0.0
    if n > 1 and not hybrid and stage < 3:
        k = max(1, math.ceil(psi / bucket))
        names = ("all_reduce",) if stage == 0 else ("reduce_scatter",)
        for name in names:
            c = collective_cost(name, n, psi / k, hw, gpus_per_node=g)
            up, net, busy = up + k * c.scale_up_bytes, net + k * c.network_bytes, busy + k * c.time
            exposed += exposed_time(backward, k, c.time)  # behind the last micro-batch's backward pass
        if stage > 0:
            c = collective_cost("all_gather", n, psi / k, hw, gpus_per_node=g)
            up, net, busy = up + k * c.scale_up_bytes, net + k * c.network_bytes, busy + k * c.time
            exposed += exposed_time(forward, k, c.time)  # behind the next step's first forward pass
    elif n > 1:
        k = m.num_layers
        layer = psi / k
        if hybrid:  # gathers and reduce-scatters inside the node; replicas all-reduce their shard across nodes
            gather = collective_cost("all_gather", g, layer, hw, gpus_per_node=g)
            scatter = collective_cost("reduce_scatter", g, layer, hw, gpus_per_node=g)
            across = collective_cost("all_reduce", nodes, layer / g, hw, tier="network") if nodes > 1 else None
        else:
            gather = collective_cost("all_gather", n, layer, hw, gpus_per_node=g)
            scatter = collective_cost("reduce_scatter", n, layer, hw, gpus_per_node=g)
            across = None
        per_micro = (gather, gather, scatter)  # forward gather, backward gather, gradient reduce-scatter
        up = accumulation * k * sum(c.scale_up_bytes for c in per_micro)
        net = accumulation * k * sum(c.network_bytes for c in per_micro)
        t_fwd, t_bwd = gather.time, gather.time + scatter.time
        busy = accumulation * k * (t_fwd + t_bwd)
        exposed = accumulation * exposed_time(forward, k, t_fwd) + (accumulation - 1) * exposed_time(backward, k, t_bwd)
        if across is None:
            exposed += exposed_time(backward, k, t_bwd)
        else:  # once a step, on the last micro-batch, on the network beside NVLink: the slower link paces it
            net += k * across.scale_up_bytes
            busy += k * across.time
            exposed += exposed_time(backward, k, max(t_bwd, across.time))
    return DataParallelStep(m, hw, nodes, g, stage, hybrid, seq, micro_batch, accumulation, policy.name, achieved,
                            bucket, footprint, forward, backward, model_flops, float(up), float(net), float(busy),
                            float(exposed))


def hiding_tokens(model: Model | str, hardware: Hardware | str, *, nodes=1, gpus_per_node=8, zero_stage=0,
                  tier: str | None = None, achieved=1.0, grad_dtype: str = "bf16"):
    """The network roofline's ridge for data parallelism: the tokens each GPU must process per step for the
    backward pass (``4 N`` FLOPs a token at ``achieved`` of peak) to last as long as the step's gradient
    exchange (one collective over the whole buffer, :func:`~roofline.core.collectives.collective_cost`; ``tier``
    forces a flat schedule on one tier). Below it the exchange cannot hide even with perfect overlap.

    With bf16 gradients on one tier this is ``traffic (G_coll-1)/G_coll * P / B`` tokens for a group of ``G_coll`` GPUs (the ``N``
    cancels, and the threshold scales as one over the link's bandwidth): ``(G_coll-1)/G_coll`` times the link's ridge point for plain
    data parallelism."""
    m, hw = load_model(model), get_hardware(hardware)
    nodes, g = cluster(nodes, gpus_per_node)
    stage = zero_stage_of(zero_stage).stage
    achieved = float(number("achieved", achieved))
    if achieved > 1:
        raise ValueError(f"achieved is a fraction of peak and cannot exceed 1, got {achieved!r}")
    n = nodes * g
    psi = param_count(m) * dtype_bytes(grad_dtype)
    kwargs = {"tier": tier} if tier is not None else {"gpus_per_node": g}
    comm = sum(collective_cost(name, n, psi, hw, overhead=0, **kwargs).transfer for name in ZERO_COLLECTIVES[stage])
    per_token = (training_flops_per_token(m) - 2 * param_count(m)) / (achieved * hw.peak_flops("bf16"))
    return comm / per_token


PUBLISHED.update({
    "zero_pflops": (15e15, "Rajbhandari et al., ZeRO (SC 2020, arXiv:1910.02054), abstract: models of over 100B "
                           "parameters on 400 GPUs at a throughput of 15 PFLOP/s"),
    "zero_gpus": (400, "same abstract: 400 GPUs (NVIDIA V100)"),
    "zero_params": (100e9, "same abstract: over 100B parameters"),
    "zero_no_mp_params": (13e9, "same abstract: up to 13B parameters with data parallelism alone, no model parallelism"),
    "llama3_gpus": (8192, "the Llama 3 paper (Grattafiori and colleagues, arXiv:2407.21783), Table 4: 405B on 8,192 H100s"),
    "llama3_tp": (8, "same table: tensor parallelism 8 (one node)"),
    "llama3_pp": (16, "same table: pipeline parallelism 16"),
    "llama3_cp": (1, "same table: context parallelism 1 at sequence 8,192"),
    "llama3_seq": (8192, "same table: sequence length 8,192"),
    "llama3_tokens": (2**24, "same table: 16M tokens per batch"),
    "llama3_tflops": (430e12, "same table: 430 TFLOP/s per GPU"),
    "llama3_mfu": (0.43, "same table: BF16 MFU 43%"),
    "busbw_h100_8": ((460e9, 480e9), "Alaya New, NCCL-tests in practice (2026): all-reduce busbw at large sizes, "
                                    "8 x H100 SXM5 on NVLink 4"),
    "busbw_a100_8": ((230e9, 250e9), "same page: 8 x A100 SXM4 on NVLink 3"),
})


# Chapter 7's quantities that the prose quotes, each one call for the notebook.

def gradient_bytes(model: Model | str, grad_dtype: str = "bf16") -> float:
    """Chapter 7: ``Psi``, the bytes of one copy of the gradients: parameters times bytes per element
    (``2 N`` in bf16; 16.06 GB for Llama 3 8B)."""
    return float(param_count(load_model(model)) * dtype_bytes(grad_dtype))


__all__ += ["gradient_bytes"]


def bucket_count(model: Model | str, bucket=DEFAULT_BUCKET, grad_dtype: str = "bf16") -> int:
    """Chapter 7: how many gradient buckets DDP launches per step, ``ceil(Psi / bucket)`` (at least one)."""
    bucket = float(number("bucket", bucket))
    return max(1, math.ceil(gradient_bytes(model, grad_dtype) / bucket))


__all__ += ["bucket_count"]


def exchange_intensity(model: Model | str, tokens, n: int = 8, grad_dtype: str = "bf16"):
    """Chapter 7: the backward pass's FLOPs (``4 N`` a token) per byte each GPU sends in a ring all-reduce
    of the gradients over ``n`` GPUs: ``4 N t / (2 (n-1)/n Psi)``, the point's intensity on the network
    roofline (``t`` tokens per GPU; broadcasts over arrays of ``tokens``)."""
    m = load_model(model)
    tokens = number("tokens", tokens, strict=False)
    n = int(number("n", n, integer=True, minimum=1))
    return 4 * param_count(m) * tokens / bytes_sent("all_reduce", n, gradient_bytes(m, grad_dtype))


__all__ += ["exchange_intensity"]


def exposure_sweep(model: Model | str, hardware: Hardware | str, seqs, *, nodes=1, achieved=0.5,
                   recompute: str = "none", zero_stage=0) -> dict:
    """Chapter 7's exposure figure, one panel: data-parallel steps (plain, or the ZeRO stage given) at ``seqs``
    tokens per GPU on ``nodes`` nodes; ``{'compute': [...], 'exposed': [...], 'threshold': hiding_tokens(...),
    'memory': [...]}`` (seconds, tokens, and bytes per GPU, so that a caller can check every step fits)."""
    steps = [data_parallel_step(model, hardware, nodes=nodes, seq=int(t), achieved=achieved, recompute=recompute,
                                zero_stage=zero_stage) for t in seqs]
    return {"compute": [s.compute for s in steps], "exposed": [s.exposed for s in steps],
            "threshold": hiding_tokens(model, hardware, nodes=nodes, achieved=achieved, zero_stage=zero_stage),
            "memory": [float(s.footprint.total) for s in steps]}


__all__ += ["exposure_sweep"]


def layer_gather_time(step: DataParallelStep, grad_dtype: str = "bf16") -> float:
    """Chapter 7: seconds to all-gather one layer's weights (``Psi / L`` bytes) over all of ``step``'s GPUs,
    the unit of traffic ZeRO-3 sends before each layer's forward pass."""
    if not isinstance(step, DataParallelStep):
        raise TypeError(f"step must be a DataParallelStep (from data_parallel_step), got {type(step).__name__}")
    layer = gradient_bytes(step.model, grad_dtype) / step.model.num_layers
    return float(collective_cost("all_gather", step.gpus, layer, step.hardware, gpus_per_node=step.gpus_per_node).time)


__all__ += ["layer_gather_time"]


def layer_forward_time(step: DataParallelStep) -> float:
    """Chapter 7: one layer's share of ``step``'s forward pass (seconds), the compute that hides the next
    layer's gather under ZeRO-3."""
    if not isinstance(step, DataParallelStep):
        raise TypeError(f"step must be a DataParallelStep (from data_parallel_step), got {type(step).__name__}")
    return step.forward_time / step.model.num_layers


__all__ += ["layer_forward_time"]


@dataclass(frozen=True)
class PublishedExchange:
    """Chapter 7: Llama 3 405B's published run (:data:`PUBLISHED`, the paper's Table 4) read on the chapter's
    model: the data-parallel degree the other degrees leave, the compute each GPU does per step, and the
    gradient exchange its replicas make. Times in seconds, bytes per GPU."""

    gpus: int
    tp: int
    pp: int
    dp: int
    seq: int
    tokens: int  # per step, all replicas
    flops_per_gpu: float  # 6 N tokens / gpus
    published_step: float  # flops_per_gpu at the published TFLOP/s per GPU
    floor: float  # flops_per_gpu at peak
    shard: float  # the gradient bytes one GPU holds: Psi / (tp pp)
    sync: float  # reduce-scatter plus all-gather of the shard over the dp replicas, on the network
    backward: float  # the backward pass (4 N a token) at peak

    @property
    def nodes(self) -> int:
        """Nodes of eight GPUs."""
        return self.gpus // 8

    @property
    def global_batch(self) -> int:
        """Sequences per step."""
        return self.tokens // self.seq

    @property
    def tokens_per_replica(self) -> float:
        return self.tokens / self.dp

    @property
    def floor_share(self) -> float:
        """The peak-rate floor as a fraction of the published step."""
        return self.floor / self.published_step

    def window(self, micro_batches: int) -> float:
        """The backward pass of one micro-batch when the step holds ``micro_batches`` per pipeline: the
        compute each bucket of the exchange can hide behind."""
        return self.backward / int(number("micro_batches", micro_batches, integer=True))


__all__ += ["PublishedExchange"]


def published_exchange(hardware: Hardware | str = "h100-sxm",
                       model: Model | str = "llama-3.1-405b") -> PublishedExchange:
    """Chapter 7: :class:`PublishedExchange` for Llama 3's published 8,192-GPU layout on ``hardware``:
    ``dp = gpus / (tp pp cp)``, ``6 N tokens / gpus`` FLOPs per GPU, the gradient shard ``2 N / (tp pp)``
    reduce-scattered and all-gathered over the ``dp`` replicas on the network, and the backward pass
    ``4 N tokens / gpus / P``."""
    m, hw = load_model(model), get_hardware(hardware)
    pub = {k: PUBLISHED[k][0] for k in ("llama3_gpus", "llama3_tp", "llama3_pp", "llama3_cp", "llama3_tokens",
                                        "llama3_seq", "llama3_tflops")}
    gpus, tp, pp = pub["llama3_gpus"], pub["llama3_tp"], pub["llama3_pp"]
    dpn = gpus // (tp * pp * pub["llama3_cp"])
    tokens, n, peak = pub["llama3_tokens"], param_count(m), hw.peak_flops("bf16")
    flops = 6 * n * tokens / gpus
    shard = gradient_bytes(m) / (tp * pp)
    sync = sum(collective_time(c, dpn, shard, hw, tier="network") for c in ("reduce_scatter", "all_gather"))
    return PublishedExchange(gpus, tp, pp, dpn, pub["llama3_seq"], tokens, flops, flops / pub["llama3_tflops"],
                             flops / peak, shard, float(sync), 4 * n * tokens / gpus / peak)


__all__ += ["published_exchange"]


def published_per_gpu(hardware: Hardware | str = "v100-sxm2", dtype: str = "fp16") -> tuple[float, float]:
    """Chapter 7: ZeRO's published throughput per GPU (15 PFLOP/s over 400 V100s: 37.5 TFLOP/s) and that
    rate as a fraction of ``hardware``'s ``dtype`` peak."""
    per_gpu = PUBLISHED["zero_pflops"][0] / PUBLISHED["zero_gpus"][0]
    return per_gpu, per_gpu / get_hardware(hardware).peak_flops(dtype)


__all__ += ["published_per_gpu"]


class TierThreshold(NamedTuple):
    """Chapter 7, exercise 1: one tier's share of the hierarchical all-reduce's traffic (``factor``, bytes
    each GPU sends over that tier per byte of Psi, over 2), the tier's ridge point, and their product:
    the tokens per GPU that hide that tier's transfer."""

    factor: float
    ridge: float
    tokens: float


__all__ += ["TierThreshold"]


def tier_thresholds(hardware: Hardware | str, *, nodes: int, gpus_per_node: int = 8,
                    dtype: str = "bf16") -> dict[str, TierThreshold]:
    """Chapter 7, exercise 1: for a hierarchical all-reduce over ``nodes`` nodes of ``G_node`` GPUs
    (``gpus_per_node``), NVLink carries ``(G_node-1)/G_node`` of the buffer per GPU and each GPU's network port
    ``(nodes-1)/nodes / G_node`` of it;
    each factor times its tier's :func:`~roofline.parallel.tensor_parallel.tier_ridge` is the tokens per GPU
    that hide that tier."""
    nodes = int(number("nodes", nodes, integer=True, minimum=1))
    g = int(number("gpus_per_node", gpus_per_node, integer=True))
    out = {}
    for tier, factor in (("scale_up", (g - 1) / g), ("network", (nodes - 1) / nodes / g)):
        ridge = tier_ridge(hardware, tier, dtype=dtype)
        out[tier] = TierThreshold(factor, ridge, factor * ridge)
    return out


__all__ += ["tier_thresholds"]


def hierarchical_latency_steps(n: int, gpus_per_node: int = 8, collective: str = "all_reduce") -> float:
    """Chapter 7, exercise 3: the latency steps of a hierarchical ``collective`` over ``n`` GPUs in nodes of
    ``gpus_per_node``: a ring inside the node plus a ring across the ``n / g`` nodes
    (:func:`~roofline.core.collectives.latency_steps` of each): ``2 (g-1) + 2 (n/g - 1)`` for an all-reduce."""
    n = int(number("n", n, integer=True))
    g = int(number("gpus_per_node", gpus_per_node, integer=True))
    if n % g:
        raise ValueError(f"n must be a whole number of nodes of gpus_per_node ({g}), got {n}")
    return latency_steps(collective, g) + latency_steps(collective, n // g)


__all__ += ["hierarchical_latency_steps"]


def _replica_backward(m: Model, seq: int, gpus_per_node: int, roof) -> float:
    """One ``seq``-token sequence's backward pass on one replica of plain data parallelism (no recomputation)
    under a cluster roof: what the gradient all-reduce hides behind."""
    from roofline.parallel.cluster import TrainLayout, backward_seconds

    return backward_seconds(m, TrainLayout(seq=seq, recompute="none", zero_stage=0, gpus_per_node=gpus_per_node), roof)


def roof_hiding_tokens(model: Model | str, roof, *, nodes=1, gpus_per_node=8, seq=4096,
                       grad_dtype: str = "bf16") -> float:
    """Chapter 7: :func:`hiding_tokens` for plain data parallelism under a cluster roof (appendix C's model,
    :class:`~roofline.core.cluster_roof.ClusterRoof`): the tokens per GPU per step at which one micro-batch's
    backward pass, as :func:`~roofline.parallel.cluster.backward_seconds` prices it per token for sequences of
    ``seq`` (matmuls, attention and memory-bound kernels at the roof's rates), lasts as long as the all-reduce
    of the gradients at the roof's bus bandwidth for a buffer of that size (hierarchical across nodes of
    ``gpus_per_node``). Under the datasheet roof this sits below :func:`hiding_tokens`, whose backward pass
    counts only the weights' ``4 N`` FLOPs a token; under a calibrated roof slower kernels lower it and a slower
    fabric raises it."""
    m = load_model(model)
    nodes, g = cluster(nodes, gpus_per_node)
    seq = int(number("seq", seq, integer=True))
    backward = _replica_backward(m, seq, g, roof)
    comm = roof.collective_time("all_reduce", nodes * g, gradient_bytes(m, grad_dtype), per_node=g if nodes > 1 else None)
    return float(comm * seq / backward)


__all__ += ["roof_hiding_tokens"]


def zero_layouts(*, seq: int, gpus: int, recompute: str = "full", micro_batch: int = 1, gpus_per_node: int = 8) -> dict:
    """Chapter 7: the layouts of the chapter's ZeRO comparison as appendix C's cluster model names them
    (:class:`~roofline.parallel.cluster.TrainLayout`, plain data parallelism over all ``gpus``, one micro-batch
    of ``seq`` tokens per GPU per step), keyed by :func:`strategy_name`: DDP and ZeRO stages 1 to 3. FSDP's
    hybrid sharding is a ``shard_group`` there, left out of this comparison."""
    from roofline.parallel.cluster import TrainLayout

    gpus = int(number("gpus", gpus, integer=True))
    recompute = recompute_policy(recompute).name
    return {strategy_name(z): TrainLayout(seq=int(number("seq", seq, integer=True)), dp=gpus, micro_batch=micro_batch,
                                          recompute=recompute, zero_stage=z, gpus_per_node=gpus_per_node)
            for z in (0, 1, 2, 3)}


__all__ += ["zero_layouts"]


class BucketExchange(NamedTuple):
    """Chapter 7: a step's gradient all-reduce sent in buckets under a cluster roof: the seconds the link is
    busy, and the seconds of it the backward pass does not hide."""

    busy: float
    exposed: float


__all__ += ["BucketExchange"]


def roof_bucket_exchange(model: Model | str, roof, *, nodes=1, gpus_per_node=8, bucket=DEFAULT_BUCKET, seq=2048,
                         grad_dtype: str = "bf16") -> BucketExchange:
    """Chapter 7: plain data parallelism's buckets under a cluster roof (appendix C's model): ``ceil(Psi /
    bucket)`` all-reduces of ``bucket`` bytes over ``nodes`` x ``gpus_per_node`` GPUs, each at the roof's bus
    bandwidth for a buffer of that size (where a calibrated roof's measured sweep carries the small
    messages' latency), sent one after another behind one ``seq``-token micro-batch's backward pass
    (:func:`~roofline.parallel.cluster.backward_seconds`, no recomputation), what shows by
    :func:`exposed_time`."""
    m = load_model(model)
    nodes, g = cluster(nodes, gpus_per_node)
    seq = int(number("seq", seq, integer=True))
    k = bucket_count(m, bucket, grad_dtype)
    backward = _replica_backward(m, seq, g, roof)
    size = gradient_bytes(m, grad_dtype) / k
    one = float(roof.collective_time("all_reduce", nodes * g, size, per_node=g if nodes > 1 else None))
    return BucketExchange(k * one, float(exposed_time(backward, k, one)))


__all__ += ["roof_bucket_exchange"]
