"""The whole plan: tensor, pipeline and data parallelism together for one model on one cluster (chapter 9).

:func:`plan` prices every layout of ``N = nodes * gpus_per_node`` GPUs as ``tp * pp * dp`` (tensor degree
inside a node, Megatron-LM's order: tensor fastest, then data, then pipeline), a micro-batch size, a
recomputation policy, a ZeRO stage and a pipeline schedule (1F1B, or interleaved 1F1B with ``v`` chunks per
GPU), keeps those that fit in the GPU's usable memory, and ranks them by predicted step time.

The grid is evaluated as numpy arrays in one pass. What it needs per (tensor degree, micro-batch, policy),
a handful of cases, comes from the per-operation core first: one GPU's kernels and its tensor-parallel
exchanges (:func:`~roofline.parallel.tensor_parallel.tp_training_step`, :func:`~roofline.parallel.tensor_parallel.predict_tp`,
sequence parallelism on), split into one layer's share and the share outside the layers (embedding,
final norm, output head), and one layer's activations (:func:`~roofline.workloads.memory.activation_bytes`).

For each layout, on the slowest stage (``ceil(L/pp)`` layers, or ``floor(L/pp)`` and the output head):

- **compute**: ``m (t_f + t_b)`` for ``m = global_batch / (dp * micro_batch)`` micro-batches, the tensor
  exchanges included (they sit between a block's matmul and the next norm; not hidden);
- **bubble**: ``(pp - 1)/v (t_f + t_b)`` (:func:`roofline.parallel.pipeline.bubble_fraction`);
- **pipeline messages**: ``2 (m v + pp - 1)`` point-to-point transfers of one micro-batch's boundary
  activations (:func:`roofline.parallel.pipeline.boundary_bytes`), counted as not overlapped: an upper bound;
- **data-parallel exposure**: the stage's gradients exchanged over the ``dp`` replicas as chapter 7 prices
  them (:func:`roofline.parallel.data_parallel.exposed_time`, 25 MB buckets, ZeRO-3 gathering every micro-batch).

Memory per GPU is the larger of the first stage (the embedding, and the most micro-batches in flight:
:func:`roofline.parallel.pipeline.in_flight`) and the last (the output head and the fp32 logits of one micro-batch):
model state at 16 bytes a parameter split over ``tp`` and sharded by ZeRO over ``dp``, activations, the
working set of the layer being recomputed.

What it does not see: mixture-of-experts (chapter 10) and context parallelism (chapter 11) layouts, stragglers,
failures and restarts, the imbalance of real stages, the lower efficiency of small split matmuls beyond what
the roofline's timing rule (or ``achieved``) gives.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from roofline.core.checks import count, number, unknown_name
from roofline.core.collectives import collective_cost
from roofline.parallel.data_parallel import DEFAULT_BUCKET, exposed_time
from roofline.core.hardware import Hardware, get_hardware
from roofline.workloads.memory import activation_bytes, recompute_working_set, state_bytes
from roofline.core.model import Model, load_model, param_count
from roofline.core.network import MAX_GPUS, MAX_GPUS_PER_NODE
from roofline.core.policies import RECOMPUTES, ZERO_STAGES
from roofline.parallel.pipeline import boundary_bytes
from roofline.parallel.tensor_parallel import check_tp, predict_tp, tp_training_step
from roofline.workloads.training import check_dense, training_step

__all__ = ["PUBLISHED", "Layout", "Plan", "NoLayoutFits", "plan", "cluster_size", "gpt_model", "MICRO_BATCHES", "CHUNKS"]

MICRO_BATCHES = (1, 2, 4, 8, 16)
CHUNKS = (1, 2, 4)  # v: 1 is plain 1F1B, more is interleaved 1F1B

PUBLISHED: dict = {
    "llama3_405b_8k": ({"gpus": 16384, "tp": 8, "cp": 1, "pp": 16, "dp": 128, "seq": 8192, "tokens": 16e6,
                        "tflops": 400e12, "mfu": 0.41},
                       "the Llama 3 paper (Grattafiori and colleagues, arXiv:2407.21783), Table 4: 405B "
                       "pre-training on 16,384 H100s, 400 TFLOP/s per GPU, 41% BF16 MFU"),
    "llama3_405b_8k_8192": ({"gpus": 8192, "tp": 8, "cp": 1, "pp": 16, "dp": 64, "seq": 8192, "tokens": 16e6,
                             "tflops": 430e12, "mfu": 0.43},
                            "same table: on 8,192 H100s, 430 TFLOP/s per GPU, 43% BF16 MFU"),
    "llama3_405b_128k": ({"gpus": 16384, "tp": 8, "cp": 16, "pp": 16, "dp": 8, "seq": 131072, "tokens": 16e6,
                          "batch": 128, "tflops": 380e12, "mfu": 0.38},
                         "same table: long-context stage, context parallelism 16, 380 TFLOP/s, 38% BF16 MFU; "
                         "batch 16 sequences per data-parallel rank, 128 in all (16M tokens). The data-parallel "
                         "degree 8 is the one 16,384 GPUs and 16M tokens imply; some copies of the table "
                         "print 4"),
    # Narayanan et al. 2021 (arXiv:2104.04473), Table 1: GPT models on A100 80GB (Selene), sequence 2,048,
    # vocabulary 51,200; heads, hidden size, layers, TP, PP, GPUs, global batch (sequences), achieved TFLOP/s per GPU
    "megatron_gpt": ([{"params": 145.6e9, "heads": 96, "hidden": 12288, "layers": 80, "tp": 8, "pp": 8, "gpus": 1536,
                       "batch": 2304, "tflops": 148e12},
                      {"params": 310.1e9, "heads": 128, "hidden": 16384, "layers": 96, "tp": 8, "pp": 16, "gpus": 1920,
                       "batch": 2160, "tflops": 155e12},
                      {"params": 529.6e9, "heads": 128, "hidden": 20480, "layers": 105, "tp": 8, "pp": 35,
                       "gpus": 2520, "batch": 2520, "tflops": 163e12},
                      {"params": 1008.0e9, "heads": 160, "hidden": 25600, "layers": 128, "tp": 8, "pp": 64,
                       "gpus": 3072, "batch": 3072, "tflops": 163e12}],
                     "Narayanan et al., Efficient Large-Scale Language Model Training on GPU Clusters Using "
                     "Megatron-LM (SC 2021, arXiv:2104.04473), Table 1 (weak scaling, A100 80GB, sequence 2,048): "
                     "the four largest GPT configurations"),
}


def gpt_model(hidden: int, heads: int, layers: int, *, vocab: int = 51200, seq: int = 2048) -> Model:
    """A GPT model of Megatron-LM's published runs (GPT-2's layer: LayerNorm, biases, a 4h GELU MLP, learned
    positions) of the given width, heads and depth, named by its parameter count."""
    from roofline.core.model import model_from_config

    cfg = {"model_type": "gpt2", "n_embd": int(number("hidden", hidden, integer=True)),
           "n_head": int(number("heads", heads, integer=True)), "n_layer": int(number("layers", layers, integer=True)),
           "n_positions": int(number("seq", seq, integer=True)), "vocab_size": int(number("vocab", vocab, integer=True))}
    m = model_from_config(cfg, name="gpt")
    return model_from_config(cfg, name=f"gpt-{param_count(m) / 1e9:.1f}b")


class NoLayoutFits(ValueError):
    """No layout of the cluster fits the model in memory; ``needed`` is the leanest layout's bytes per GPU."""

    def __init__(self, message: str, needed: float):
        super().__init__(message)
        self.needed = needed


@dataclass(frozen=True)
class Layout:
    """One layout of the search: its degrees and choices, and what the planner predicts for it (seconds per
    step, bytes per GPU)."""

    tp: int
    pp: int
    dp: int
    micro_batch: int
    micro_batches: int  # m, per pipeline per step
    v: int
    recompute: str
    zero_stage: int
    memory: float
    compute: float
    bubble: float
    pipeline_comm: float
    data_comm: float
    time: float
    mfu: float
    tflops: float  # model TFLOP/s per GPU, in FLOP/s
    fits: bool
    # seconds of the data-parallel collectives per step, hidden or not (``data_comm`` is the part that shows):
    # ZeRO-3's gathers and reduce-scatters of every layer for every micro-batch, or the gradient buckets
    data_traffic: float = 0.0

    @property
    def schedule(self) -> str:
        return "1f1b" if self.v == 1 else "interleaved"

    @property
    def exposed(self) -> float:
        """Communication the step waits for: pipeline messages and the data-parallel exchange."""
        return self.pipeline_comm + self.data_comm

    def describe(self) -> str:
        sched = "1F1B" if self.v == 1 else f"interleaved v={self.v}"
        return (f"TP {self.tp} x PP {self.pp} x DP {self.dp}, micro-batch {self.micro_batch} ({self.micro_batches} a step), "
                f"{sched}, recompute {self.recompute}, ZeRO-{self.zero_stage}")


@dataclass(frozen=True)
class Plan:
    """Every layout the search priced (``grid``: one numpy array per field of :class:`Layout`), the cluster and
    the question; ``ranked`` lists the indices of the layouts that fit, fastest first."""

    model: Model
    hardware: Hardware
    nodes: int
    gpus_per_node: int
    seq: int
    global_batch: int
    grid: dict
    ranked: np.ndarray

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def count(self) -> int:
        """Layouts priced."""
        return int(self.grid["time"].size)

    def layout(self, i: int) -> Layout:
        g = self.grid
        n = len(g["tp"])
        i = count("i", i, minimum=-n, maximum=n - 1, what=f" (the grid has {n:,} layouts)") if n else count("i", i)
        return Layout(int(g["tp"][i]), int(g["pp"][i]), int(g["dp"][i]), int(g["micro_batch"][i]),
                      int(g["micro_batches"][i]), int(g["v"][i]), str(RECOMPUTES[int(g["recompute"][i])]),
                      int(g["zero_stage"][i]), float(g["memory"][i]), float(g["compute"][i]), float(g["bubble"][i]),
                      float(g["pipeline_comm"][i]), float(g["data_comm"][i]), float(g["time"][i]),
                      float(g["mfu"][i]), float(g["tflops"][i]), bool(g["fits"][i]),
                      float(g["data_traffic"][i]) if "data_traffic" in g else 0.0)

    def top(self, k: int = 5) -> list[Layout]:
        k = int(number("k", k, integer=True))
        return [self.layout(int(i)) for i in self.ranked[:k]]

    @property
    def best(self) -> Layout:
        return self.layout(int(self.ranked[0]))

    def frontier(self) -> list[Layout]:
        """The fitting layouts no other beats on both step time and memory, fastest first."""
        out, low = [], math.inf
        for i in self.ranked:
            mem = float(self.grid["memory"][i])
            if mem < low:
                out.append(self.layout(int(i)))
                low = mem
        return out


def _degrees(n: int) -> list[int]:
    """The divisors of ``n``, in order: trial division up to its square root, never a loop to ``n``."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


# The most values any of plan's lists (micro_batches, recomputes, zero_stages, chunks) may hold, and the most
# layouts one search may price: the grid's arrays grow with their product.
_MOST_CHOICES = 256
_MOST_LAYOUTS = 20_000_000


def _per_case(m: Model, hw: Hardware, t: int, seq: int, mb: int, rc: str, g: int, timing: str, achieved):
    """One GPU's times per micro-batch for (tensor degree, micro-batch, policy): per layer and outside the
    layers, forward and backward (the tensor exchanges included), and one layer's activations and working set."""
    step = tp_training_step(m, t, seq, mb, recompute=rc, sequence_parallel=t > 1)
    pred = predict_tp(step, hw, timing=timing, gpus_per_node=g)
    work = step.work
    total = float(work.flops)
    peak = hw.peak_flops(work.formats.math)
    compute = float(pred.compute_time) if achieved is None else total / (achieved * peak)
    outside = {"embedding", "final_norm", "lm_head"}
    flops = {"forward": [0.0, 0.0], "backward": [0.0, 0.0]}  # [layers, outside]
    for op in work.ops:
        base = op.name.split(" (")[0]
        phase = "forward" if op.name == base else "backward"  # backward and recompute both run in the backward pass
        flops[phase][base in outside] += float(op.flops)  # an Op's flops already count all its launches
    scale = compute / sum(sum(v) for v in flops.values())
    L = m.num_layers
    comm = {"forward": [0.0, 0.0], "backward": [0.0, 0.0]}
    for e, c in pred.priced:
        layer = e.count == L and ("attention" in e.name or "mlp" in e.name)
        phase = "forward" if e.phase == "forward" else "backward"
        comm[phase][0 if layer else 1] += e.count * float(c.time)
    out = {}
    for phase in ("forward", "backward"):
        out[phase + "_layer"] = (flops[phase][0] * scale + comm[phase][0]) / L
        out[phase + "_outside"] = flops[phase][1] * scale + comm[phase][1]
    out["activations"] = float(activation_bytes(m, seq, mb, recompute=rc, tp=t, sequence_parallel=t > 1))
    out["working"] = float(recompute_working_set(m, seq, mb, recompute=rc)) / t
    out["logits"] = seq * mb * math.ceil(m.vocab_size / t) * 4.0
    return out


def cluster_size(nodes, gpus_per_node) -> tuple[int, int]:
    """``(nodes, gpus_per_node)`` checked against the largest NVLink domain and the largest cluster the
    searches price, each error naming its argument."""
    g = count("gpus_per_node", gpus_per_node, maximum=MAX_GPUS_PER_NODE,
              what=" (the largest NVLink domain, roofline.core.network.MAX_GPUS_PER_NODE)")
    nodes = count("nodes", nodes, maximum=MAX_GPUS // g,
                  what=f" at {g} GPUs per node (a cluster of at most {MAX_GPUS:,} GPUs, roofline.core.network.MAX_GPUS)")
    return nodes, g


def plan(model: Model | str, hardware: Hardware | str, *, nodes, gpus_per_node=8, seq, global_batch,
         micro_batches=MICRO_BATCHES, recomputes=RECOMPUTES, zero_stages=tuple(ZERO_STAGES), chunks=CHUNKS,
         timing: str = "step", achieved=None, bucket=DEFAULT_BUCKET) -> Plan:
    """Search tensor, pipeline and data degrees, micro-batch, recomputation and ZeRO stage for ``model`` on
    ``nodes`` x ``gpus_per_node`` GPUs of ``hardware``, training on ``global_batch`` sequences of ``seq`` tokens
    per step (see the module's accounting). Compute is the roofline floor under ``timing``, or the FLOPs at
    ``achieved`` of peak. A ``ValueError`` naming the argument when no layout divides the global batch, or when
    none fits in memory."""
    m, hw = load_model(model), get_hardware(hardware)
    check_dense(m, "plan")
    nodes, g = cluster_size(nodes, gpus_per_node)
    seq = count("seq", seq)
    B = count("global_batch", global_batch)
    for name, values in (("micro_batches", micro_batches), ("recomputes", recomputes), ("zero_stages", zero_stages),
                         ("chunks", chunks)):
        if np.ndim(values) != 1 or not 0 < len(values) <= _MOST_CHOICES:
            raise ValueError(f"{name} must be a list of 1 to {_MOST_CHOICES} values, got "
                             f"{'an array of shape ' + str(np.shape(values)) if np.ndim(values) != 1 else len(values)}")
    bucket = float(number("bucket", bucket))
    if achieved is not None:
        achieved = float(number("achieved", achieved))
        if achieved > 1:
            raise ValueError(f"achieved is a fraction of peak and cannot exceed 1, got {achieved!r}")
    mbs = sorted({int(number("micro_batches", x, integer=True)) for x in micro_batches})
    mbs = [x for x in mbs if B % x == 0] or mbs[:1]  # a micro-batch that does not divide the batch fits no layout
    rcs = list(dict.fromkeys(recomputes))
    for r in rcs:
        if r not in RECOMPUTES:
            raise unknown_name("recomputes", r, RECOMPUTES)
    zs = sorted({int(number("zero_stages", z, integer=True, strict=False)) for z in zero_stages})
    if any(z > 3 for z in zs):
        raise ValueError(f"zero_stages must be among 0, 1, 2 and 3, got {zero_stages!r}")
    vs = sorted({int(number("chunks", v, integer=True)) for v in chunks})
    N, L = nodes * g, m.num_layers

    tps = []
    for t in _degrees(g):
        try:
            check_tp(m, t, gpus_per_node=g)
            tps.append(t)
        except ValueError:
            pass
    # the handful of cases the core prices one by one
    keys = ("forward_layer", "forward_outside", "backward_layer", "backward_outside", "activations", "working",
            "logits")
    table = {k: np.zeros((len(tps), len(mbs), len(rcs))) for k in keys}
    for a, t in enumerate(tps):
        for b, mb in enumerate(mbs):
            for c, rc in enumerate(rcs):
                case = _per_case(m, hw, t, seq, mb, rc, g, timing, achieved)
                for k in keys:
                    table[k][a, b, c] = case[k]
    one = training_step(m, seq, 1)
    model_flops_seq = float(one["forward"].flops + one["backward"].flops)

    # the grid: every combination, as flat arrays
    size = len(tps) * len(_degrees(N)) * len(mbs) * len(rcs) * len(zs) * len(vs)
    if size > _MOST_LAYOUTS:
        raise ValueError(f"the search would price {size:,} layouts, more than {_MOST_LAYOUTS:,}: give fewer "
                         "micro_batches, recomputes or chunks")
    axes = np.meshgrid(np.arange(len(tps)), np.array(_degrees(N)), np.arange(len(mbs)), np.arange(len(rcs)),
                       np.array(zs), np.array(vs), indexing="ij")
    it, pp, imb, irc, zero, v = (x.ravel() for x in axes)
    tp = np.array(tps)[it]
    mb = np.array(mbs)[imb]
    keep = (N % (tp * pp) == 0) & (pp <= L)
    dp = np.where(keep, N // (tp * pp), 1)
    keep &= B % (dp * mb) == 0
    micro = np.where(keep, B // np.maximum(dp * mb, 1), 1)
    keep &= (v == 1) | ((pp > 1) & (micro % pp == 0) & (pp * v <= L))
    keep &= (dp > 1) | (zero == 0)  # ZeRO over one replica is plain data parallelism
    local = np.maximum(g // tp, 1)  # data-parallel peers per node
    keep &= (dp <= local) | (dp % local == 0)
    if not keep.any():
        raise ValueError(f"global_batch must be divisible by data-parallel degree x micro-batch for some layout of "
                         f"{N} GPUs: no layout divides {B} sequences (try a multiple of {N})")
    it, pp, imb, irc, zero, v, tp, mb, dp, micro = (x[keep] for x in (it, pp, imb, irc, zero, v, tp, mb, dp, micro))
    local = np.maximum(g // tp, 1)
    T = {k: table[k][it, imb, irc] for k in keys}

    hi = -(-L // pp)  # the busiest stage's layers
    lo = L // pp  # the last stage's, beside the output head
    fwd = np.maximum(hi * T["forward_layer"], lo * T["forward_layer"] + T["forward_outside"])
    bwd = np.maximum(hi * T["backward_layer"], lo * T["backward_layer"] + T["backward_outside"])
    compute = micro * (fwd + bwd)
    bubble = (pp - 1) / v * (fwd + bwd)

    # pipeline messages: one micro-batch's boundary activations, on the network when a stage fills a node
    size = boundary_bytes(m, seq, mb, tp=tp)
    across = tp * dp >= g
    sends = (pp > 1) & across  # only these cross the network: a one-node cluster needs no network tier
    on_net = collective_cost("send_recv", 2, size, hw, tier="network").time if sends.any() else 0.0
    on_link = collective_cost("send_recv", 2, size, hw, gpus_per_node=g).time
    p2p = np.where(across, on_net, on_link)
    pipeline_comm = np.where(pp > 1, 2 * (micro * v + pp - 1) * p2p, 0.0)

    # the stage's gradients across the data-parallel replicas (chapter 7's schedules)
    layer_params = (param_count(m) - m.embedding_params - m.lm_head_params) / L
    head = np.where(pp == 1, m.embedding_params + m.lm_head_params, max(m.embedding_params, m.lm_head_params))
    params = (hi * layer_params + head) / tp  # on one GPU of the heaviest stage
    psi = params * 2.0
    data_comm = np.zeros(tp.shape)
    data_traffic = np.zeros(tp.shape)
    for t in np.unique(tp):
        sel = (tp == t) & (dp > 1)
        if not sel.any():
            continue
        loc = max(g // int(t), 1)
        n = dp[sel]
        z = zero[sel]
        f, bk, mi = fwd[sel], bwd[sel], micro[sel]
        k = np.maximum(1, np.ceil(psi[sel] / bucket))
        red = collective_cost("all_reduce", n, psi[sel] / k, hw, gpus_per_node=loc).time
        scat = collective_cost("reduce_scatter", n, psi[sel] / k, hw, gpus_per_node=loc).time
        gath = collective_cost("all_gather", n, psi[sel] / k, hw, gpus_per_node=loc).time
        stage0 = exposed_time(bk, k, red)
        stage12 = exposed_time(bk, k, scat) + exposed_time(f, k, gath)
        lay = hi[sel].astype(float)
        lg = collective_cost("all_gather", n, psi[sel] / lay, hw, gpus_per_node=loc).time
        ls = collective_cost("reduce_scatter", n, psi[sel] / lay, hw, gpus_per_node=loc).time
        stage3 = mi * (exposed_time(f, lay, lg) + exposed_time(bk, lay, lg + ls))
        data_comm[sel] = np.where(z == 0, stage0, np.where(z == 3, stage3, stage12))
        data_traffic[sel] = np.where(z == 0, k * red, np.where(z == 3, mi * lay * (2 * lg + ls), k * (scat + gath)))

    time = compute + bubble + pipeline_comm + data_comm

    # memory: the first stage (embedding, most in flight) and the last (output head, logits)
    state = state_bytes()  # mixed-precision Adam, bytes per parameter
    state_per_param = (state["weights"] / np.where(zero >= 3, dp, 1) + state["gradients"] / np.where(zero >= 2, dp, 1)
                       + state["optimizer"] / np.where(zero >= 1, dp, 1))
    first_params = (hi * layer_params + m.embedding_params + np.where(pp == 1, m.lm_head_params, 0)) / tp
    last_params = (lo * layer_params + m.lm_head_params + np.where(pp == 1, m.embedding_params, 0)) / tp
    held_first = np.where(pp == 1, 1.0, np.minimum(pp + np.where(v > 1, (pp - 1) / v, 0.0), micro))
    held_last = np.where(v > 1, np.minimum(((v - 1) * pp + 1) / v, micro), 1.0)
    act = T["activations"]
    first = first_params * state_per_param + held_first * hi * act + T["working"] + np.where(pp == 1, T["logits"], 0)
    last = last_params * state_per_param + held_last * lo * act + T["working"] + T["logits"]
    memory = np.maximum(first, last)
    fits = memory <= hw.usable_capacity

    peak = hw.peak_flops("bf16")
    flops_per_gpu = B * model_flops_seq / N
    grid = {"tp": tp, "pp": pp, "dp": dp, "micro_batch": mb, "micro_batches": micro, "v": v, "recompute": irc,
            "zero_stage": zero, "memory": memory, "compute": compute, "bubble": bubble,
            "pipeline_comm": pipeline_comm, "data_comm": data_comm, "data_traffic": data_traffic, "time": time,
            "mfu": flops_per_gpu / (time * peak), "tflops": flops_per_gpu / time, "fits": fits}
    if rcs != list(RECOMPUTES):  # keep the names the indices refer to
        grid["recompute"] = np.array([RECOMPUTES.index(rcs[i]) for i in irc])
    if not fits.any():
        i = int(np.argmin(memory))
        raise NoLayoutFits(f"model {m.name} fits on no layout of {N} {hw.short}s at seq {seq}: the leanest needs "
                         f"{memory[i] / 1e9:.1f} GB per GPU against {hw.usable_capacity / 1e9:.1f} GB usable "
                         f"(more nodes, a shorter seq, or a smaller model)", float(memory[i]))
    idx = np.flatnonzero(fits)
    ranked = idx[np.lexsort((memory[idx], time[idx]))]
    return Plan(m, hw, nodes, g, seq, B, grid, ranked)


def where(plan: Plan, *, fitting: bool = False, **fields) -> np.ndarray:
    """Chapters 7 and 9: the indices of ``plan``'s layouts whose ``fields`` (any of :class:`Layout`'s grid
    fields: ``tp=8, pp=16, v=1, recompute='full'``...) take the values given; in grid order, or with
    ``fitting=True`` only the layouts that fit, fastest first (``plan.ranked``'s order)."""
    if not isinstance(plan, Plan):
        raise TypeError(f"plan must be a Plan (from planner.plan), got {type(plan).__name__}")
    bad = sorted(set(fields) - set(plan.grid))
    if bad:
        raise unknown_name("field", bad[0], sorted(plan.grid))
    idx = np.asarray(plan.ranked) if fitting else np.arange(plan.count)
    for name, value in fields.items():
        if name == "recompute":
            if value not in RECOMPUTES:
                raise unknown_name("recompute", value, RECOMPUTES)
            value = RECOMPUTES.index(value)
        idx = idx[plan.grid[name][idx] == value]
    return idx


__all__ += ["where"]


def first_layout(plan: Plan, *, fitting: bool = True, **fields) -> Layout:
    """Chapters 7 and 9: the first layout :func:`where` finds (with ``fitting=True``, the fastest fitting
    layout with those ``fields``: the published Llama 3 degrees, say); a ValueError when none has them."""
    idx = where(plan, fitting=fitting, **fields)
    if idx.size == 0:
        raise ValueError(f"no {'fitting ' if fitting else ''}layout of the plan has "
                         + ", ".join(f"{k}={v!r}" for k, v in fields.items()))
    return plan.layout(int(idx[0]))


__all__ += ["first_layout"]


def megatron_runs(hardware: Hardware | str = "a100-sxm-80gb", *, seq: int = 2048) -> list[tuple]:
    """Chapter 9: each of Megatron-LM's published GPT runs (:data:`PUBLISHED` ``'megatron_gpt'``) beside the
    planner's best layout for the same model, cluster (nodes of eight GPUs) and batch:
    ``(label 'GPT 146B', published dict, Layout)`` tuples, as :func:`~roofline.present.tables.megatron_table`
    takes them."""
    hw = get_hardware(hardware)
    out = []
    for run in PUBLISHED["megatron_gpt"][0]:
        m = gpt_model(run["hidden"], run["heads"], run["layers"])
        best = plan(m, hw, nodes=run["gpus"] // 8, gpus_per_node=8, seq=seq, global_batch=run["batch"]).best
        out.append((f"GPT {run['params'] / 1e9:.0f}B", run, best))
    return out


__all__ += ["megatron_runs"]


def published_over_bound(runs) -> list[float]:
    """Chapter 9: each run's published TFLOP/s per GPU over the planner's bound for it (:func:`megatron_runs`'s
    tuples): how close the published runs come to the model's floor."""
    try:
        return [pub["tflops"] / best.tflops for _, pub, best in runs]
    except (TypeError, ValueError, KeyError, AttributeError):
        raise TypeError("runs must be (label, published dict with 'tflops', Layout) tuples, as megatron_runs "
                        f"returns them, got {runs!r}"[:200]) from None


__all__ += ["published_over_bound"]


def bubble_share(layout: Layout) -> float:
    """Chapter 9: a layout's pipeline bubble as a share of its compute, ``bubble / compute`` (0 without a
    pipeline)."""
    if not isinstance(layout, Layout):
        raise TypeError(f"layout must be a Layout (from a Plan), got {type(layout).__name__}")
    return layout.bubble / layout.compute


__all__ += ["bubble_share"]
