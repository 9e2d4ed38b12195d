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

import numpy as np

from roofline.core.checks import number
from roofline.core.collectives import collective_cost
from roofline.core.hardware import Hardware, get_hardware
from roofline.workloads.memory import Footprint, training_footprint
from roofline.core.model import Model, load_model, param_count
from roofline.core.network import MAX_GPUS, ZERO_COLLECTIVES, gpu_count
from roofline.core.policies import recompute_policy, zero_stage as zero_stage_of
from roofline.core.roof import predict
from roofline.workloads.training import training_flops_per_token, training_step, check_dense
from roofline.core.units import dtype_bytes

__all__ = ["DEFAULT_BUCKET", "PUBLISHED", "DataParallelStep", "data_parallel_step", "exposed_time", "hiding_tokens",
           "strategy_name"]

# PyTorch DDP's default gradient bucket: bucket_cap_mb=25 (torch.nn.parallel.DistributedDataParallel).
DEFAULT_BUCKET = 25 * 2**20

PUBLISHED: dict = {}  # filled below with the chapter's anchors, each with its source


def exposed_time(compute, units, unit_time):
    """Communication left exposed when ``units`` transfers of ``unit_time`` seconds each run one after another
    beside ``compute`` seconds of work that produces (or consumes) them evenly: ``max(c, T/k + k c - T)``;
    nothing when there is nothing to send."""
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
    g = gpu_count("gpus_per_node", gpus_per_node, per_node=True)
    nodes = gpu_count("nodes", nodes)
    if nodes * g > MAX_GPUS:
        raise ValueError(f"nodes x gpus_per_node must be at most {MAX_GPUS:,} GPUs (roofline.core.network.MAX_GPUS), "
                         f"got {nodes:,} x {g:,}")
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

    With bf16 gradients on one tier this is ``traffic (n-1)/n * P / B`` tokens (the ``N`` cancels, and the
    threshold scales as one over the link's bandwidth): ``(n-1)/n`` times the link's ridge point for plain
    data parallelism."""
    m, hw = load_model(model), get_hardware(hardware)
    g = gpu_count("gpus_per_node", gpus_per_node, per_node=True)
    nodes = gpu_count("nodes", nodes)
    if nodes * g > MAX_GPUS:
        raise ValueError(f"nodes x gpus_per_node must be at most {MAX_GPUS:,} GPUs (roofline.core.network.MAX_GPUS), "
                         f"got {nodes:,} x {g:,}")
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
