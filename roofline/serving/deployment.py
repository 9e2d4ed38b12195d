"""Serving at scale: what a deployment sustains for a workload, under latency targets (chapter 13).

A **workload** is a prompt length, an answer length, an optional shared prefix already in cache (its hit
rate) and an offered load: a request rate, a number of clients each waiting for its answer before it asks
again (a concurrency), or neither (the offline benchmark: every request queued at once, as many in flight as
fit). A **deployment** is one model on GPUs of one kind: a replica of ``tp x pp x dp_attention`` GPUs (tensor
and pipeline parallel, attention data parallel with the KV cache sharded by batch, experts spread over
``ep`` of the replica's GPUs), repeated ``replicas`` times; or, disaggregated, a pool of replicas that only
prefill and a pool that only decode, the KV cache of every prompt sent between them.

The steady state (:func:`sustain`). With continuous batching and chunked prefill, ``B`` sequences decode
together, one token each per step, and each step also carries the prompt tokens of the requests that join:
``B / O`` requests finish per step on average, so ``B I / O`` prompt tokens (less the cached prefix) ride in
every step. The step time ``tau(B)`` is the roof's for everything the step holds (:func:`step_time`); the
time per output token is ``tau`` (``pp`` stage steps with a pipeline), the output rate of a replica
``B / tau``. ``B`` is the largest batch whose KV cache fits (offline), the clients (concurrency), or the
batch that Little's law gives at the offered rate, ``B = lambda (TTFT + (O - 1) TPOT)``; past the
deployment's capacity the rate is not sustained and the answer says so.

Two roofs price the same step (:class:`~roofline.core.cluster_roof.ClusterRoof`). The **datasheet** roof
takes the step's FLOPs at the dense peak, its bytes at the HBM bandwidth and its exchanges at the link's
rate, all overlapped: ``max(F / P, bytes / BW, exchanges)``, so its throughput is a ceiling and its latency
a floor. A **calibrated** roof (:func:`roofline.core.calibration.get_roof`) times each kernel at the rate microbenchmarks
saw for its size, with a launch each, and adds them: nothing overlaps.

The memory a sequence holds is its prompt and half its answer on average (``kv_policy='grow'``: a paged
cache that grows as the answer does, vLLM's), or its prompt and whole answer from the step it is admitted
(``'reserve'``: TensorRT-LLM's default, which never evicts a request it started). A prefix cache with hit
rate ``h`` keeps the first ``h I`` tokens of every prompt once, shared: they are neither recomputed nor stored
per sequence, and the shared copy takes its own room.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping, NamedTuple, Sequence

import numpy as np
from numpy.typing import ArrayLike

from roofline.core.checks import count, number
from roofline.core.calibration import get_roof, roof_kind
from roofline.core.cluster_roof import ALLREDUCE_KINDS, ENGINE_ALLREDUCE, ClusterRoof
from roofline.core.hardware import Hardware, get_hardware, require_links
from roofline.core.model import Model, load_model
from roofline.core.routing import expected_experts
from roofline.core.units import dtype_bytes, fmt
from roofline.parallel.tensor_parallel import linear_shard, weights_per_gpu
from roofline.serving.capacity import mla_attention_flops_per_key

__all__ = ["Workload", "Deployment", "StepTime", "Sustained", "KV_POLICIES", "ARRIVALS", "OVERLAPS", "EXCHANGE_BYTES",
           "PREFILL_BATCH_TOKENS", "CHUNK_TOKENS", "pipelined_prefill", "pipeline_piece_share", "PrefillPool", "prefill_pool", "check_deployment", "moe_dispatch_bytes", "step_time", "largest_batch", "sustain",
           "ServingPlanRow", "plan_serving", "smallest_slice", "layouts", "Frontier", "frontier"]

KV_POLICIES = ("grow", "reserve")
OVERLAPS = ("none", "two-batch")
ARRIVALS = ("poisson", "regular")
EXCHANGE_BYTES = 2.0
"""Bytes per number of the activations the GPUs exchange (all-reduces, all-to-alls, pipeline sends): 16 bits,
whatever the matmuls' format."""
PREFILL_BATCH_TOKENS = 8192
"""Prompt tokens a prefill-only step gathers (a disaggregated prefill pool): enough for the matmuls to be
compute-bound on every chip in the catalog, and vLLM's and TensorRT-LLM's usual token budget per step."""
MATH_FORMATS = ("bf16", "fp16", "fp8", "int8", "fp32")
"""Storage formats a deployment's matmuls compute in as they are (tensor cores take them); any other weights'
format is widened to bf16 first."""
CHUNK_TOKENS = 8192
"""The engines' default token budget of one step (decode tokens and prompt chunks together): ``vllm serve``'s
``max_num_batched_tokens`` on GPUs of 70 GB or more, SGLang's ``chunked_prefill_size`` and TensorRT-LLM's
``max_num_tokens``. A :class:`Deployment`'s ``max_tokens``; None: no budget (every prompt joins one step whole)."""
LARGEST_BATCH = 1 << 20  # sequences in flight a replica may be asked to hold (a bound on every search)


# --------------------------------------------------------------------------------------------- the inputs


@dataclass(frozen=True)
class Workload:
    """What the requests look like and how fast they come.

    ``input_tokens`` and ``output_tokens``: each request's prompt and answer. ``rate``: requests per second
    offered to the whole deployment; ``concurrency``: clients, each sending its next request when its answer
    is done; neither: the offline benchmark (all requests waiting, as many in flight as fit). ``prefix_hit``:
    the share of every prompt found in a prefix cache (0: no cache). ``requests``: how many requests an
    offline benchmark issues at once (None: so many that the deployment runs in its steady state); with
    fixed lengths they are admitted in waves of the largest batch, each prefilled, then decoded to the end.
    ``arrival``: how a rate's requests (or the prompts a disaggregated prefill pool sees) arrive
    (:data:`ARRIVALS`): 'poisson', at random (a benchmark's default, vLLM's ``--burstiness 1``), so that
    prompts queue behind each other now and then; or 'regular', evenly spaced, so that none waits below the
    peak.
    """

    input_tokens: int
    output_tokens: int
    rate: float | None = None
    concurrency: int | None = None
    prefix_hit: float = 0.0
    requests: int | None = None
    arrival: str = "poisson"

    def __post_init__(self):
        if self.arrival not in ARRIVALS:
            raise ValueError(f"arrival must be one of {', '.join(ARRIVALS)}, got {self.arrival!r}")
        object.__setattr__(self, "input_tokens", count("input_tokens", self.input_tokens))
        object.__setattr__(self, "output_tokens", count("output_tokens", self.output_tokens))
        if self.rate is not None and self.concurrency is not None:
            raise ValueError("give a rate or a concurrency, not both (neither: the offline benchmark)")
        if self.rate is not None:
            r = float(number("rate", self.rate))
            if not math.isfinite(r):
                raise ValueError(f"rate must be a finite number of requests per second, got {self.rate!r}")
            object.__setattr__(self, "rate", r)
        if self.concurrency is not None:
            object.__setattr__(self, "concurrency", count("concurrency", self.concurrency, maximum=LARGEST_BATCH))
        h = float(number("prefix_hit", self.prefix_hit, strict=False))
        if h >= 1.0:
            raise ValueError(f"prefix_hit must be at least 0 and below 1 (the last prompt token is always computed), "
                             f"got {self.prefix_hit!r}")
        object.__setattr__(self, "prefix_hit", h)
        if self.requests is not None:
            if self.rate is not None or self.concurrency is not None:
                raise ValueError("requests counts an offline benchmark's requests: give it without a rate or a concurrency")
            object.__setattr__(self, "requests", count("requests", self.requests, maximum=1 << 30))

    @property
    def load(self) -> str:
        """'rate', 'concurrency' or 'offline'."""
        return "rate" if self.rate is not None else "concurrency" if self.concurrency is not None else "offline"

    @property
    def cached_tokens(self) -> float:
        """Prompt tokens found in the prefix cache, ``h I``."""
        return self.prefix_hit * self.input_tokens

    @property
    def computed_tokens(self) -> float:
        """Prompt tokens each request prefills, ``(1 - h) I``."""
        return self.input_tokens - self.cached_tokens

    @property
    def mean_context(self) -> float:
        """Cache tokens a decoding sequence reads on average over its answer, ``I + O / 2``."""
        return self.input_tokens + self.output_tokens / 2.0

    @property
    def prompt_keys(self) -> float:
        """Keys a computed prompt token attends to on average: the cached prefix and half the rest, causal."""
        return self.cached_tokens + self.computed_tokens / 2.0


@dataclass(frozen=True)
class Deployment:
    """How one model is laid over GPUs to serve.

    A replica is ``tp x pp x dp_attention`` GPUs: attention and dense MLPs split ``tp`` ways inside each of
    ``dp_attention`` groups that each attend for their own share of the batch, layers split ``pp`` ways; a
    mixture of experts spreads its experts over ``ep`` of the replica's ``tp x dp_attention`` GPUs, each
    expert split over the rest. ``replicas`` copies serve side by side. ``disaggregate=(P, D)``: ``P`` GPUs
    only prefill and ``D`` only decode (each a whole number of replicas; ``replicas`` is then unused), the
    KV cache crossing ``kv_link`` ('auto': NVLink when both pools fit in one node, else the network port;
    or a number of bytes/s per GPU). ``kv_policy`` and ``kv_fraction``: what a sequence holds
    (:data:`KV_POLICIES`) and the share of the HBM left after the weights that the runtime gives the cache.
    ``max_batch``: the runtime's cap on sequences in flight per replica (None: memory alone); ``max_tokens``:
    its budget of tokens a step, decode tokens and prompt chunks together, which chunked prefill cuts prompts to
    (:data:`CHUNK_TOKENS` by default, the engines'; None: no budget, each prompt joins one step whole). ``head_dtype``: the format
    of the output head and the embedding table, which quantizers often leave wide (None: the weights'); the
    head's matmul then runs at that format's peak's share of the matmuls' format's. ``allreduce``: how the
    tensor-parallel group all-reduces inside a node (:data:`~roofline.core.cluster_roof.ALLREDUCE_KINDS`):
    the engines' custom one-shot/two-shot kernels where they apply (their default), or NCCL always.
    ``redundant_experts``: extra copies of busy routed experts (DeepSeek's 32, placed by its load balancer), so
    that ``ep`` divides the experts and copies together and each copy takes an even share of the tokens.
    ``overlap``: ``'two-batch'`` splits each step into two micro-batches whose expert all-to-alls run while the
    other computes (SGLang's two-batch overlap, DeepSeek's dual-batch overlap); ``'none'`` (default) adds them.
    """

    tp: int = 1
    pp: int = 1
    ep: int = 1
    dp_attention: int = 1
    replicas: int = 1
    weights_dtype: str = "bf16"
    kv_dtype: str | None = None
    math_dtype: str | None = None
    disaggregate: tuple[int, int] | None = None
    kv_link: float | str = "auto"
    kv_policy: str = "grow"
    kv_fraction: float = 1.0
    max_batch: int | None = None
    max_tokens: int | None = CHUNK_TOKENS
    gpus_per_node: int = 8
    head_dtype: str | None = None
    allreduce: str = ENGINE_ALLREDUCE
    redundant_experts: int = 0
    overlap: str = "none"

    def __post_init__(self):
        if self.allreduce not in ALLREDUCE_KINDS:
            raise ValueError(f"allreduce must be one of {', '.join(ALLREDUCE_KINDS)}, got {self.allreduce!r}")
        if self.overlap not in OVERLAPS:
            raise ValueError(f"overlap must be one of {', '.join(OVERLAPS)}, got {self.overlap!r}")
        object.__setattr__(self, "redundant_experts", int(number("redundant_experts", self.redundant_experts,
                                                                 integer=True, strict=False)))
        for name in ("tp", "pp", "ep", "dp_attention", "replicas", "gpus_per_node"):
            object.__setattr__(self, name, count(name, getattr(self, name), maximum=1 << 16))
        for name in ("weights_dtype", "kv_dtype", "math_dtype", "head_dtype"):
            if getattr(self, name) is not None:
                dtype_bytes(getattr(self, name))  # unknown names raise with the close matches
        if self.kv_policy not in KV_POLICIES:
            raise ValueError(f"kv_policy must be one of {', '.join(KV_POLICIES)}, got {self.kv_policy!r}")
        f = float(number("kv_fraction", self.kv_fraction))
        if f > 1.0:
            raise ValueError(f"kv_fraction must be above 0 and at most 1, got {self.kv_fraction!r}")
        object.__setattr__(self, "kv_fraction", f)
        for name in ("max_batch", "max_tokens"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, count(name, getattr(self, name), maximum=LARGEST_BATCH))
        if self.disaggregate is not None:
            try:
                p, d = self.disaggregate
            except (TypeError, ValueError):
                raise TypeError(f"disaggregate must be a pair (prefill GPUs, decode GPUs), got {self.disaggregate!r}") from None
            p, d = count("disaggregate prefill GPUs", p, maximum=1 << 16), count("disaggregate decode GPUs", d, maximum=1 << 16)
            for what, n in (("prefill", p), ("decode", d)):
                if n % self.replica_gpus:
                    raise ValueError(f"disaggregate: the {what} pool's {n} GPUs must be a whole number of replicas of "
                                     f"{self.replica_gpus} GPUs (tp x pp x dp_attention)")
            object.__setattr__(self, "disaggregate", (p, d))
            if self.replicas != 1:
                raise ValueError(f"replicas ({self.replicas}) with disaggregate: the two pools' GPUs set the replicas "
                                 f"(the prefill pool's {p} GPUs and the decode pool's {d}, each a whole number of "
                                 "replicas); leave replicas out")
        if not isinstance(self.kv_link, str) and not (isinstance(self.kv_link, float) and self.kv_link == math.inf):
            object.__setattr__(self, "kv_link", float(number("kv_link", self.kv_link)))  # inf: a what-if, no transfer
        elif isinstance(self.kv_link, str) and self.kv_link not in ("auto", "nvlink", "network"):
            raise ValueError(f"kv_link must be 'auto', 'nvlink', 'network' or bytes/s per GPU, got {self.kv_link!r}")

    @property
    def replica_gpus(self) -> int:
        """GPUs of one replica, ``tp x pp x dp_attention``."""
        return self.tp * self.pp * self.dp_attention

    @property
    def gpus(self) -> int:
        """GPUs of the whole deployment."""
        return sum(self.disaggregate) if self.disaggregate else self.replicas * self.replica_gpus

    @property
    def kv(self) -> str:
        """The cache's format (the weights' unless given)."""
        return self.kv_dtype or self.weights_dtype

    @property
    def math(self) -> str:
        """The matmuls' format: as given, else the weights' where tensor cores take it as it is stored (bf16, fp16,
        fp8, int8: an fp8 model computes in fp8), else bf16 (a group-wise or int4 format, ``int4-g128`` or
        ``mxfp4``, is widened to bf16 before its matmuls, W4A16)."""
        if self.math_dtype:
            return self.math_dtype
        return self.weights_dtype if self.weights_dtype in MATH_FORMATS else "bf16"

    @property
    def head(self) -> str:
        """The output head's and the embedding table's format (the weights' unless given)."""
        return self.head_dtype or self.weights_dtype

    def label(self) -> str:
        """A short name, e.g. 'TP 8', 'TP 2 x DP-attention 4, EP 8' or 'TP 4, prefill 4 : decode 12'."""
        parts = [f"TP {self.tp}"]
        if self.pp > 1:
            parts[0] += f" x PP {self.pp}"
        if self.dp_attention > 1:
            parts[0] += f" x DP-attention {self.dp_attention}"
        if self.ep > 1:
            parts.append(f"EP {self.ep}" + (f" (+{self.redundant_experts} copies)" if self.redundant_experts else ""))
        if self.overlap == "two-batch":
            parts.append("two-batch overlap")
        if self.disaggregate:
            parts.append(f"prefill {self.disaggregate[0]} : decode {self.disaggregate[1]}")
        elif self.replicas > 1:
            parts.append(f"{self.replicas} replicas")
        return ", ".join(parts)


def _chip(hardware: Hardware | str, roof: ClusterRoof | None = None) -> Hardware:
    """``hardware`` as a catalog entry (a name is looked up), and, with ``roof``, refused unless the roof is that
    chip's: a deployment is priced under its own GPU's roof."""
    hw = get_hardware(hardware)
    if roof is not None:
        if not isinstance(roof, ClusterRoof):
            raise TypeError(f"roof must be a ClusterRoof (roofline.core.calibration.get_roof), got {type(roof).__name__}")
        if roof.hardware.key != hw.key:
            raise ValueError(f"roof is the {roof.hardware.short}'s but hardware is the {hw.short}: price a deployment "
                             f"under its own chip's roof, get_roof({hw.key!r}, ...)")
    return hw


def check_deployment(model: Model | str, deployment: Deployment, hardware: Hardware | None = None) -> Model:
    """The model, after checking that ``deployment`` can lay it out: heads divide by ``tp``, layers at least
    ``pp``, experts by ``ep`` and ``ep`` by the replica's ``tp x dp_attention``, ``tp`` inside a node, the
    matmuls' format on the chip. Each refusal names the argument."""
    m = load_model(model)
    d = deployment
    if not isinstance(d, Deployment):
        raise TypeError(f"deployment must be a Deployment, got {type(d).__name__}")
    if m.num_heads % d.tp:
        raise ValueError(f"tp {d.tp} must divide {m.name}'s {m.num_heads} attention heads")
    if d.tp > d.gpus_per_node:
        raise ValueError(f"tp {d.tp} is more than the {d.gpus_per_node} GPUs of a node: tensor parallelism's "
                         "all-reduces are kept on NVLink")
    if d.pp > m.num_layers:
        raise ValueError(f"pp {d.pp} is more than {m.name}'s {m.num_layers} layers")
    if m.moe is None:
        if d.ep > 1:
            raise ValueError(f"ep {d.ep}: {m.name} has no experts")
        if d.redundant_experts:
            raise ValueError(f"redundant_experts {d.redundant_experts}: {m.name} has no experts")
    else:
        slots = m.moe.num_experts + d.redundant_experts
        if slots % d.ep:
            extra = f" and {d.redundant_experts} copies" if d.redundant_experts else ""
            raise ValueError(f"ep {d.ep} must divide {m.name}'s {m.moe.num_experts} experts{extra}")
        if (d.tp * d.dp_attention) % d.ep:
            raise ValueError(f"ep {d.ep} must divide tp x dp_attention = {d.tp * d.dp_attention}: the experts are "
                             "spread over the GPUs that attend")
    if hardware is not None:
        hardware.peak_flops(d.math)  # a format the chip has no peak for is refused, named
        if d.head_dtype is not None:
            hardware.peak_flops(d.head_dtype)
    return m


# ------------------------------------------------------------------------------------------ one step's price


@dataclass(frozen=True)
class StepTime:
    """One step of one replica, seen from one GPU: the FLOPs, HBM bytes and exchange seconds it holds, each
    part's seconds under the roof, and the step's time (``seconds``): the parts added under a calibrated roof,
    the largest of the three totals under the datasheet's."""

    seconds: float
    flops: float
    bytes: float
    exchange: float
    parts: Mapping[str, float]
    kind: str
    streaming: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    experts: tuple = (0.0, 0.0)
    overlapped: bool = False

    @property
    def bound(self) -> str:
        """Which budget the step spends most of: 'compute', 'bandwidth' or 'exchange' (for a calibrated
        step, the largest group of its parts; a matmul whose weights take longer to read than its FLOPs to
        run, ``streaming``, counts as bandwidth). A step whose exchanges ran under the other micro-batch's
        work is 'exchange'-bound only where they outlast that work."""
        if self.kind == "datasheet":
            return max((("compute", self.parts["compute"]), ("bandwidth", self.parts["bandwidth"]),
                        ("exchange", self.exchange)), key=lambda kv: kv[1])[0]
        groups = {"compute": 0.0, "bandwidth": 0.0, "exchange": 0.0}
        for name, t in self.parts.items():
            moved = self.streaming.get(name, 0.0)
            groups[_GROUP.get(name, "compute")] += t - moved
            groups["bandwidth"] += moved
        if self.overlapped:
            work = groups["compute"] + groups["bandwidth"]
            return "exchange" if groups["exchange"] > work else max(("compute", "bandwidth"), key=groups.get)
        return max(groups.items(), key=lambda kv: kv[1])[0]

    @property
    def expert_matmuls(self) -> str | None:
        """What binds the routed experts' grouped matmuls: 'weight streaming' where reading their weights
        takes longer than their FLOPs for most of their time, 'FLOPs' otherwise; None without experts."""
        total, streaming = self.experts
        if total <= 0:
            return None
        return "weight streaming" if streaming > 0.5 * total else "FLOPs"


_GROUP = {"matmuls": "compute", "prefill attention": "compute", "decode attention": "bandwidth",
          "memory-bound": "bandwidth", "tensor-parallel": "exchange", "expert all-to-all": "exchange",
          "pipeline sends": "exchange", "output head": "compute"}


class _Tally:
    def __init__(self):
        self.flops = self.bytes = self.exchange = 0.0
        self.peak_flops = 0.0  # FLOPs weighted by how far each one's format's peak is short of the roof's
        self.parts: dict[str, float] = {}
        self.streaming: dict[str, float] = {}  # seconds of matmuls whose weight bytes outlast their FLOPs
        self.experts = [0.0, 0.0]  # the routed experts' matmuls: seconds, and those of them streaming

    def add(self, part: str, seconds: float, flops: float = 0.0, nbytes: float = 0.0, exchange: float = 0.0, times=1.0,
            slower: float = 1.0):
        self.parts[part] = self.parts.get(part, 0.0) + times * float(seconds)
        self.flops += times * flops
        self.peak_flops += times * slower * flops
        self.bytes += times * nbytes
        self.exchange += times * exchange


def _gemm(t: _Tally, roof: ClusterRoof, part: str, rows: float, n: float, k: float, wb: float, ab: float,
          times: float = 1.0, weights_read: float = 1.0, slower: float = 1.0, expert: bool = False):
    """One matmul of ``rows`` x ``k`` by ``k`` x ``n``; ``slower``: how many times the roof's format's peak
    the matmul's own format's is short of (2 for a bf16 matmul on an fp8 roof)."""
    if rows <= 0:
        return
    flops = 2.0 * rows * n * k
    nbytes = weights_read * k * n * wb + ab * rows * (k + n)
    sec = roof.gemm_time(slower * flops, nbytes)
    t.add(part, sec, flops, nbytes, times=times, slower=slower)
    compute = slower * flops / float(roof.gemm(max(slower * flops, 1.0)))
    streams = nbytes / roof.bandwidth > compute
    if streams:
        t.streaming[part] = t.streaming.get(part, 0.0) + times * float(sec)
    if expert:
        t.experts[0] += times * float(sec)
        t.experts[1] += times * float(sec) if streams else 0.0


def _kv_split(m: Model, tp: int) -> int:
    """GPUs of a tensor-parallel group that share one sequence's cache: the KV heads split ``min(tp, KV
    heads)`` ways (a latent is kept whole on every GPU)."""
    return 1 if m.mla is not None else min(tp, m.num_kv_heads)


def _layer(t: _Tally, m: Model, d: Deployment, roof: ClusterRoof, *, moe: bool, decode: float, context: float,
           prefill: float, keys: float, seq: float, times: float):
    """One layer of one GPU: ``decode`` sequences at ``context`` cached tokens each and ``prefill`` prompt
    tokens attending to ``keys`` keys each on average, for the whole replica (one pipeline stage)."""
    a, tp = d.dp_attention, d.tp
    wb, ab = dtype_bytes(d.weights_dtype), dtype_bytes(d.math)
    rows = (decode + prefill) / a  # tokens this GPU's attention group holds
    h = m.hidden_size
    for lin in m.attention_linears():
        n, k = linear_shard(lin, tp, m.num_kv_heads)
        _gemm(t, roof, "matmuls", rows, n, k, wb, ab, times)
    if moe:
        e = m.moe
        slots = e.num_experts + d.redundant_experts  # each copy of an expert takes an even share of its tokens
        local, etp = slots / d.ep, tp * a / d.ep
        routed = (decode + prefill) * e.experts_per_token  # expert rows of the whole replica
        per_expert = routed / slots
        touched = local / e.num_experts * expected_experts(e.num_experts, e.experts_per_token, decode + prefill)
        for lin in m.expert_linears():
            n, k = (lin.out_features / etp, lin.in_features) if lin.name.endswith(("gate_proj", "up_proj")) \
                else (lin.out_features, lin.in_features / etp)
            _gemm(t, roof, "matmuls", per_expert, n, k, wb, ab, times * touched, expert=True)
        for lin in m.shared_expert_linears():
            n, k = linear_shard(lin, tp, m.num_kv_heads)
            _gemm(t, roof, "matmuls", rows, n, k, wb, ab, times)
        r = m.router()
        _gemm(t, roof, "matmuls", rows, r.out_features, r.in_features, 2.0, ab, times)
        width = e.expert_intermediate_size * e.experts_per_token / etp
    else:
        for lin in m.dense_mlp_linears():
            n, k = linear_shard(lin, tp, m.num_kv_heads)
            _gemm(t, roof, "matmuls", rows, n, k, wb, ab, times)
        width = m.intermediate_size / tp
    # attention: decode reads the cache, prefill computes its pairs
    heads = m.num_heads / tp
    dqk, dv = m.attention_head_dims
    split = _kv_split(m, tp)
    seqs = decode / a
    if seqs > 0:
        kv_bytes = seqs * context * m.kv_bytes_per_layer(d.kv) / split
        if m.mla is not None:
            f = seqs * context * mla_attention_flops_per_key(m) / m.num_layers / tp
        else:
            f = seqs * context * 2.0 * heads * (dqk + dv)
        sec = max(kv_bytes / roof.bandwidth, f / roof.peak_flops, roof.launch_s)
        t.add("decode attention", sec, f, kv_bytes, times=times)
    if prefill > 0:
        f = prefill / a * keys * 2.0 * heads * (dqk + dv)
        kv_rw = prefill / a * m.kv_bytes_per_layer(d.kv) / split  # the new tokens' keys and values written
        sec = max(roof.flash_forward_time(f, seq, head_dim=int(round(dqk)), causal=True), kv_rw / roof.bandwidth)
        t.add("prefill attention", sec, f, kv_rw, times=times)
    # memory-bound kernels: norms, residuals, rotary, the MLP's activation, each token's bytes; a mixture of
    # experts also copies each token once per chosen expert and sums the expert outputs back, 2 (1 + k) h
    # 16-bit numbers a token (moe_dispatch_bytes)
    per_token = m.norms_per_layer * 4 * h + 12 * h + (6 if m.gated_mlp else 4) * width
    kernels = m.norms_per_layer + 4
    if moe:
        per_token += moe_dispatch_bytes(m)
        kernels += 2
    t.add("memory-bound", roof.memory_time(per_token * rows, kernels), 0.0, per_token * rows, times=times)
    # exchanges: two all-reduces in a tensor-parallel group; all-to-alls when the experts see other groups' tokens
    if tp > 1:
        msg = rows * h * EXCHANGE_BYTES
        sec = 2 * roof.all_reduce_time(tp, msg, per_node=min(tp, d.gpus_per_node), kind=d.allreduce)
        t.add("tensor-parallel", sec, exchange=sec, times=times)
    if moe and a > 1 and d.ep > 1:
        if prefill <= 0 and roof.ep_low_latency:  # a decode step: the low-latency kernels (DeepEP's), dispatch + combine
            sec = roof.moe_all_to_all_time(d.ep, rows / tp, h, m.moe.experts_per_token)
        else:  # dispatch in the matmuls' format where it is narrower (DeepSeek's fp8), combine in 16 bits
            out = rows / tp * m.moe.experts_per_token * h
            k = min(d.ep, d.gpus_per_node)
            sec = sum(roof.collective_time("all_to_all", d.ep, out * b, per_node=k)
                      for b in (min(EXCHANGE_BYTES, dtype_bytes(d.math)), EXCHANGE_BYTES))
        t.add("expert all-to-all", sec, exchange=sec, times=times)


def moe_dispatch_bytes(model: Model | str) -> float:
    """HBM bytes one token moves in one MoE layer to reach its experts and come back, beyond the experts'
    own matmuls: its hidden state read once and written once per chosen expert (the dispatch into expert
    order), then the ``k`` expert outputs read and their weighted sum written (the combine), at 16 bits:
    ``2 (1 + k) h`` numbers, ``4 (1 + k) h`` bytes. 0 for a dense model."""
    m = load_model(model) if isinstance(model, str) else model
    if m.moe is None:
        return 0.0
    return 2.0 * EXCHANGE_BYTES * (1 + m.moe.experts_per_token) * m.hidden_size


def step_time(model: Model | str, deployment: Deployment, roof: ClusterRoof, *, decode: float, context: float,
              prefill: float = 0.0, keys: float | None = None, seq: float | None = None) -> StepTime:
    """One step of one replica under ``roof``: ``decode`` sequences each reading ``context`` cached tokens,
    and ``prefill`` prompt tokens each attending to ``keys`` earlier tokens on average (default: half the
    context) in prompts of ``seq`` tokens (default: the context). With a pipeline it is one stage's step
    (``ceil(L / pp)`` layers of the replica's load, the output head on the last stage, one send between
    stages); the replica's time per output token is ``pp`` of them. With ``overlap='two-batch'`` (a mixture of
    experts whose attention is data parallel) the step is two micro-batches of half its load, each one's expert
    all-to-alls hidden behind the other's kernels: it lasts the longer of the two streams."""
    m = check_deployment(model, deployment)
    d = deployment
    decode = float(number("decode", decode, strict=False))
    context = float(number("context", context, strict=False))
    prefill = float(number("prefill", prefill, strict=False))
    if decode + prefill <= 0:
        raise ValueError("a step needs decode sequences or prefill tokens (both are 0)")
    keys = context / 2.0 if keys is None else float(number("keys", keys, strict=False))
    seq = max(context, 1.0) if seq is None else float(number("seq", seq))
    if not isinstance(roof, ClusterRoof):
        raise TypeError(f"roof must be a ClusterRoof (roofline.core.cluster_roof), got {type(roof).__name__}")
    split = (d.overlap == "two-batch" and roof.kind == "calibrated" and m.moe is not None and d.dp_attention > 1
             and d.ep > 1)
    t = _tally(m, d, roof, decode / 2 if split else decode, context, prefill / 2 if split else prefill, keys, seq)
    if roof.kind == "datasheet":
        compute, memory = t.peak_flops / roof.peak_flops, t.bytes / roof.bandwidth
        parts = {"compute": compute, "bandwidth": memory, "exchange": t.exchange}
        return StepTime(max(compute, memory, t.exchange), t.flops, t.bytes, t.exchange, MappingProxyType(parts), roof.kind)
    if not split:
        return StepTime(sum(t.parts.values()), t.flops, t.bytes, t.exchange, MappingProxyType(dict(t.parts)), roof.kind,
                        MappingProxyType(dict(t.streaming)), tuple(t.experts))
    # two micro-batches of half the step each: one's all-to-alls run while the other computes, so the step lasts
    # the longer of the two streams, both micro-batches' work against both micro-batches' all-to-alls
    parts = {k: 2 * v for k, v in t.parts.items()}
    hidden = parts.get("expert all-to-all", 0.0)
    work = sum(parts.values()) - hidden
    return StepTime(max(work, hidden), 2 * t.flops, 2 * t.bytes, 2 * t.exchange, MappingProxyType(parts), roof.kind,
                    MappingProxyType({k: 2 * v for k, v in t.streaming.items()}), tuple(2 * x for x in t.experts), True)


def _tally(m: Model, d: Deployment, roof: ClusterRoof, decode: float, context: float, prefill: float, keys: float,
           seq: float) -> _Tally:
    """Every kernel and exchange of one stage step, priced under ``roof`` (:func:`step_time`)."""
    t = _Tally()
    L = m.num_layers
    moe_layers = m.moe.moe_layers(L) if m.moe is not None else 0
    stage = math.ceil(L / d.pp) / L  # the share of the layers on the busiest stage
    opts = dict(decode=decode / d.pp, context=context, prefill=prefill / d.pp, keys=keys, seq=seq)
    if L - moe_layers:
        _layer(t, m, d, roof, moe=False, times=(L - moe_layers) * stage, **opts)
    if moe_layers:
        _layer(t, m, d, roof, moe=True, times=moe_layers * stage, **opts)
    # the output head: one row per decoding sequence (and per prompt that finishes), on the last stage
    head = m.lm_head
    rows = decode / d.pp / d.dp_attention
    head_math = d.head if d.head_dtype is not None else d.math
    slower = roof.hardware.peak_flops(d.math) / roof.hardware.peak_flops(head_math)
    _gemm(t, roof, "output head", rows, head.out_features / d.tp, head.in_features, dtype_bytes(d.head),
          dtype_bytes(d.math), slower=slower)
    if d.pp > 1:
        msg = (decode + prefill) / d.pp / d.dp_attention / d.tp * m.hidden_size * EXCHANGE_BYTES
        sec = roof.send_time(msg, across_nodes=d.replica_gpus > d.gpus_per_node)
        t.add("pipeline sends", sec, exchange=sec)
    return t


# ---------------------------------------------------------------------------------------------- memory


def _kv_per_token_per_gpu(m: Model, d: Deployment) -> float:
    return m.kv_bytes_per_token(d.kv) / _kv_split(m, d.tp) * math.ceil(m.num_layers / d.pp) / m.num_layers


def _held_tokens(w: Workload, policy: str) -> float:
    """Cache tokens one sequence holds on average, less the shared prefix (kept once)."""
    answer = w.output_tokens if policy == "reserve" else w.output_tokens / 2.0
    return w.computed_tokens + answer


@dataclass(frozen=True)
class _Memory:
    weights: float
    room: float
    per_sequence: float
    prefix: float
    batch: int
    usable: float


def _memory(m: Model, d: Deployment, hw: Hardware, w: Workload) -> _Memory:
    # the replica's tp x dp_attention GPUs share the routed experts (ep only says how they are split)
    weights = weights_per_gpu(m, tp=d.tp, ep=d.dp_attention, pp=d.pp, weights_dtype=d.weights_dtype, head_dtype=d.head,
                              redundant_experts=d.redundant_experts)
    per_tok = _kv_per_token_per_gpu(m, d)
    prefix = w.cached_tokens * per_tok  # one shared copy on every attention group's GPUs
    room = max(0.0, (hw.usable_capacity - weights) * d.kv_fraction - prefix)
    per_seq = _held_tokens(w, d.kv_policy) * per_tok
    batch = int(min(room / per_seq * d.dp_attention, LARGEST_BATCH)) if per_seq > 0 else LARGEST_BATCH
    if d.max_batch is not None:
        batch = min(batch, d.max_batch)
    return _Memory(weights, room, per_seq, prefix, batch, hw.usable_capacity)


def largest_batch(model: Model | str, hardware: Hardware, workload: Workload, deployment: Deployment) -> int:
    """Sequences one replica holds at once: the HBM its GPUs keep after the weights (times ``kv_fraction``,
    less the shared prefix), over what one sequence holds under the deployment's ``kv_policy``; capped by
    ``max_batch``. 0 if the weights alone do not fit."""
    hardware = _chip(hardware)
    m = check_deployment(model, deployment, hardware)
    return _memory(m, deployment, hardware, workload).batch


# ------------------------------------------------------------------------------------------- the steady state


@dataclass(frozen=True)
class Sustained:
    """What a deployment sustains for a workload under one roof.

    Rates are of the whole deployment (``_per_gpu``: divided by its GPUs); the output rate is ``O`` times
    the requests finished per second, which Little's law ties to the latencies printed: the requests in
    flight are that rate times ``TTFT + (O - 1) TPOT``. ``ttft_s``: from a request's arrival to its first
    token, a wait for a place included under a number of clients (the offline benchmark's queue for
    admission is not counted); ``tpot_s``: between two of its tokens. ``batch``: requests in flight in each
    replica (the decode pool's sequences when disaggregated; an offline benchmark's wave). ``sustained``:
    False when the offered rate is past what the deployment can serve (the rates are then its peak, and the
    latencies grow without bound: None). ``limit``: what set the flow: 'memory', 'max_batch', 'max_tokens'
    (the step budget), 'load' (the offered rate or clients), 'slo' or, disaggregated, 'prefill', 'decode' or
    'kv link'. ``bound``: the budget a step spends most of. ``peak_output_tokens_per_s``: the most the
    deployment sustains under the same targets, the offline figure a planner sizes from (None for an
    offline benchmark of a given number of requests).
    """

    model: str
    hardware: str
    deployment: Deployment
    workload: Workload
    roof: str
    fits: bool
    output_tokens_per_s: float
    ttft_s: float | None
    tpot_s: float | None
    batch: float
    max_batch: int
    memory_per_gpu: float
    usable_per_gpu: float
    limit: str
    bound: str
    sustained: bool = True
    step: StepTime | None = None
    kv_transfer_s: float = 0.0
    notes: tuple = ()
    peak_output_tokens_per_s: float | None = None

    @property
    def gpus(self) -> int:
        return self.deployment.gpus

    @property
    def total_tokens_per_s(self) -> float:
        """Prompt and answer tokens per second, ``(I + O) / O`` of the output rate."""
        w = self.workload
        return self.output_tokens_per_s * (w.input_tokens + w.output_tokens) / w.output_tokens

    @property
    def output_tokens_per_s_per_gpu(self) -> float:
        return self.output_tokens_per_s / self.gpus

    @property
    def requests_per_s(self) -> float:
        return self.output_tokens_per_s / self.workload.output_tokens

    @property
    def request_latency_s(self) -> float | None:
        """TTFT plus ``O - 1`` times TPOT."""
        if self.ttft_s is None or self.tpot_s is None:
            return None
        return self.ttft_s + (self.workload.output_tokens - 1) * self.tpot_s

    def as_dict(self) -> dict:
        w, d = self.workload, self.deployment
        return {"model": self.model, "gpu": self.hardware, "roof": self.roof, "layout": d.label(), "gpus": self.gpus,
                "tp": d.tp, "pp": d.pp, "ep": d.ep, "dp_attention": d.dp_attention, "allreduce": d.allreduce,
                "disaggregate": list(d.disaggregate) if d.disaggregate else None,
                "input_tokens": w.input_tokens, "output_tokens": w.output_tokens, "load": w.load, "rate": w.rate,
                "concurrency": w.concurrency, "requests": w.requests, "arrival": w.arrival,
                "prefix_hit": w.prefix_hit, "max_batch_cap": d.max_batch, "max_num_tokens": d.max_tokens,
                "kv_fraction": d.kv_fraction, "kv_policy": d.kv_policy, "fits": self.fits,
                "sustained": self.sustained, "output_tokens_per_s": self.output_tokens_per_s,
                "output_tokens_per_s_per_gpu": self.output_tokens_per_s_per_gpu,
                "total_tokens_per_s": self.total_tokens_per_s, "ttft_s": self.ttft_s, "tpot_s": self.tpot_s,
                "batch": self.batch, "max_batch": self.max_batch, "memory_per_gpu": self.memory_per_gpu,
                "usable_per_gpu": self.usable_per_gpu, "limit": self.limit, "bound": self.bound,
                "kv_transfer_s": self.kv_transfer_s, "peak_output_tokens_per_s": self.peak_output_tokens_per_s,
                "notes": list(self.notes)}

    def summary(self) -> str:
        """Three lines a reader can quote."""
        if not self.fits:
            return (f"{self.model} does not fit {self.deployment.label()} on {self.hardware}: the weights take "
                    f"{fmt(self.memory_per_gpu, 'B')} of {fmt(self.usable_per_gpu, 'B')} usable per GPU")
        rate = f"{self.output_tokens_per_s:,.0f} output tokens/s ({self.output_tokens_per_s_per_gpu:,.0f} per GPU)"
        lat = ("latency grows without bound (the offered rate is past capacity)" if not self.sustained else
               f"TTFT {fmt(self.ttft_s, 's')}, TPOT {fmt(self.tpot_s, 's')}")
        return f"{rate}; {lat}; batch {self.batch:,.0f} per replica, set by {self.limit}, {self.bound}-bound"


def _colocated_at(m, d, roof, w, b: float):
    """The steady state at about ``b`` sequences decoding (the frontier's and the chapter's old handle):
    ``(average step, TPOT, TTFT)`` of :func:`_point` at ``b / (O - 1)`` requests admitted a round."""
    p = _point(m, d, roof, w, max(b, 1e-9) / max(w.output_tokens - 1, 1))
    return p.step, p.tpot, p.ttft


def _bisect(ok, lo: float, hi: float) -> tuple[float, float]:
    """Narrow ``[lo, hi]``, geometrically, to the point where ``ok`` turns from true (at ``lo``) to false (at
    ``hi``): the last true and first false points, within 0.05% of each other."""
    for _ in range(80):
        if hi / lo < 1.0005:
            break
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo, hi


def _largest(feasible, hi: float, lo: float = 1.0) -> float | None:
    """The largest ``b`` in ``[lo, hi]`` with ``feasible(b)``, for a predicate true below some point."""
    if hi < lo or not feasible(lo):
        return None
    return hi if feasible(hi) else _bisect(feasible, lo, hi)[0]


def _smallest(ok, hi: float) -> float:
    """The smallest ``b`` in ``(0, hi]`` with ``ok(b)``, for a predicate true above some point and at ``hi``."""
    lo = 1e-6
    return lo if ok(lo) else _bisect(lambda b: not ok(b), lo, hi)[1]


# ---------------------------------------------------------------------------- the queue: one replica's flow


_R_MIN = 1e-7  # requests admitted a round: the lightest load the searches try (a lone request, nearly)


class _Point(NamedTuple):
    """One colocated replica's steady state at ``r`` requests admitted per round (a round: each micro-batch
    once through the pipeline, one step without one). ``step``: the average stage step; ``tpot``: a round;
    ``service``: from admission to the first token (half a round's wait, then the prompt's chunks, one a
    round); ``wait``: seconds a prompt waits for room in the step budget behind other prompts; ``ttft``: the
    two together, from arrival; ``rate``: requests/s, ``r / tpot``; ``in_flight``: requests in the replica
    by Little's law, ``rate (TTFT + (O - 1) TPOT)``, and ``admitted`` those holding a cache,
    ``rate (service + (O - 1) TPOT)``; ``decode``: sequences decoding; ``room``: prompt tokens a round can
    take beside them (inf: no budget); ``use``: the share of that room the prompts take (1: past the budget);
    ``chunks``: a prompt's pieces."""

    r: float
    step: StepTime
    tpot: float
    service: float
    wait: float
    rate: float
    decode: float
    room: float
    use: float
    chunks: int
    output_tokens: int

    @property
    def ttft(self) -> float:
        return self.service + self.wait

    @property
    def in_flight(self) -> float:
        return self.rate * (self.ttft + (self.output_tokens - 1) * self.tpot)

    @property
    def admitted(self) -> float:
        return self.rate * (self.service + (self.output_tokens - 1) * self.tpot)


def _point(m, d, roof, w: Workload, r: float) -> _Point:
    """:class:`_Point` at ``r`` requests admitted per round, under chunked prefill with a budget of
    ``d.max_tokens`` tokens a step (:data:`CHUNK_TOKENS` by default).

    Each request decodes ``O - 1`` rounds after its first token, so ``r (O - 1)`` sequences decode and
    ``r (1 - h) I`` prompt tokens ride in every round. A prompt goes in chunks of what the step's budget
    leaves after the decoding tokens (``C - B_dec / pp`` in each micro-batch's step), cut evenly, one chunk a
    round, the round that holds a chunk lasting as a step with that chunk in it; prompts queue for that room as at one
    server of fixed service (M/D/1: ``u s / (2 (1 - u))`` rounds of wait, ``u`` the room's use and ``s`` a
    prompt's share of a round's room). With no budget every prompt joins one step whole."""
    O, Ic, pp = w.output_tokens, w.computed_tokens, d.pp
    r = max(float(r), _R_MIN)
    dec, pre = r * (O - 1), r * Ic
    step = _mixed(m, d, roof, w, dec, pre)
    tpot = pp * step.seconds
    budget = d.max_tokens
    if budget is None:
        room, chunk, use = math.inf, max(Ic, 1.0), 0.0
    else:
        room = pp * budget - dec  # prompt tokens a round's micro-batches can still take
        chunk = budget - dec / pp
        use = pre / room if room > 0 else math.inf
    if chunk <= 0 or use >= 1.0:
        return _Point(r, step, tpot, math.inf, math.inf, r / tpot, dec, room, 1.0, 0, O)
    chunks = max(1, math.ceil(Ic / chunk - 1e-9)) if Ic > 0 else 1
    join = _mixed(m, d, roof, w, dec, max(pre, Ic / chunks * pp)) if Ic > 0 else step
    serve = Ic / room if room < math.inf else 0.0
    wait = use * serve / (2.0 * (1.0 - use)) if use > 0 and w.arrival == "poisson" else 0.0
    service = pp * (0.5 * step.seconds + chunks * join.seconds)
    return _Point(r, step, tpot, service, wait * tpot, r / tpot, dec, room, use, chunks, O)


def _mixed(m, d, roof, w: Workload, decode: float, prefill: float) -> StepTime:
    """A stage step of ``decode`` sequences at the workload's mean context and ``prefill`` prompt tokens
    (each replica-wide, split over the pipeline's micro-batches)."""
    return step_time(m, d, roof, decode=decode, context=w.mean_context, prefill=prefill, keys=w.prompt_keys,
                     seq=w.input_tokens)


def _mixed_step(m, d, roof, w: Workload, b: float) -> StepTime:
    """The average step of a colocated replica at ``b`` sequences decoding: their tokens and the prompt
    tokens of the ``b / O`` requests that join per step."""
    chunk = b * w.computed_tokens / w.output_tokens
    return step_time(m, d, roof, decode=b, context=w.mean_context, prefill=chunk, keys=w.prompt_keys,
                     seq=w.input_tokens)


def _join_step(m, d, roof, w: Workload, b: float) -> StepTime:
    """The step a new request's whole prompt joins, beside ``b`` decoding sequences."""
    return step_time(m, d, roof, decode=max(b, 0.0), context=w.mean_context, prefill=w.computed_tokens,
                     keys=w.prompt_keys, seq=w.input_tokens)


class _Capacity(NamedTuple):
    """The most a replica sustains: the round's admissions ``r``, its point, and what stopped it."""

    r: float
    point: _Point
    limit: str


def _capacity(m, d, roof, w: Workload, slots: float, slot_limit: str, slos) -> _Capacity | None:
    """The largest admissions per round the replica sustains: requests in flight within ``slots`` (its KV
    cache, or its runtime's cap on sequences: ``slot_limit``), prompts within the step budget, and the
    targets met. None where even the lightest load misses a target."""
    def fits(r):
        p = _point(m, d, roof, w, r)
        return p.use < 1.0 and p.admitted <= slots

    def meets(r):
        p = _point(m, d, roof, w, r)
        return ((slos["tpot_slo"] is None or p.tpot <= slos["tpot_slo"])
                and (slos["ttft_slo"] is None or p.ttft <= slos["ttft_slo"]))

    hi = max(slots / (w.output_tokens + 0.5), _R_MIN)  # in flight at least r (O + 1/2): the memory's reach
    if d.max_tokens is not None:  # and the budget's: r ((O - 1) + (1 - h) I) < pp C
        hi = min(hi, d.pp * d.max_tokens / max(w.output_tokens - 1 + w.computed_tokens, 1.0))
    if not fits(_R_MIN):
        return _Capacity(_R_MIN, _point(m, d, roof, w, _R_MIN), slot_limit)
    top = _largest(fits, hi, _R_MIN) or _R_MIN
    p = _point(m, d, roof, w, top)
    limit = slot_limit if p.admitted >= 0.999 * slots else "max_tokens"
    if slos["tpot_slo"] is not None or slos["ttft_slo"] is not None:
        ok = _largest(meets, top, _R_MIN)
        if ok is None:
            return None
        if ok < top:
            top, limit = ok, "slo"
    return _Capacity(top, _point(m, d, roof, w, top), limit)


def _r_for(value, target: float, hi: float) -> float:
    """The admissions per round at which ``value(r)`` (increasing) reaches ``target``, within ``(0, hi]``:
    bisected until the value is within a billionth of the target (or the bracket cannot narrow)."""
    if value(hi) <= target:
        return hi
    lo = _R_MIN
    if value(lo) > target:
        return lo
    for _ in range(300):
        mid = math.sqrt(lo * hi) if hi / lo > 1.01 else 0.5 * (lo + hi)
        v = value(mid)
        if v <= target:
            lo = mid
            if target - v <= 1e-10 * target:
                break
        else:
            hi = mid
        if hi - lo <= 1e-15 * hi:
            break
    return lo


def sustain(model: Model | str, hardware: Hardware | str, workload: Workload, deployment: Deployment,
            roof: ClusterRoof, *, ttft_slo: float | None = None, tpot_slo: float | None = None) -> Sustained:
    """What ``deployment`` of ``model`` on ``hardware`` sustains for ``workload`` under ``roof``
    (:class:`Sustained`).

    The load sets the flow (:class:`_Point`): offline, the most the replica sustains (its **peak**: requests
    in flight within its KV cache and its cap on sequences, prompts within the step budget, the targets
    met), which no load exceeds; a rate, the admissions that carry it (past the peak: not sustained); a number
    of clients, the flow at which they are all in flight by Little's law, ``c = rate (TTFT + (O - 1) TPOT)``,
    and past the peak the rest wait in a queue, their wait counted in the TTFT. Output tokens/s are ``O``
    times the request rate, so Little's law holds for the latencies printed. ``ttft_slo`` and ``tpot_slo``
    (seconds) cap the flow at the most that meets them; a target no load meets leaves a result with
    ``limit='slo'`` and no output. A prompt and answer past the model's context are refused."""
    hardware = _chip(hardware, roof)
    m = check_deployment(model, deployment, hardware)
    w, d = workload, deployment
    if not isinstance(w, Workload):
        raise TypeError(f"workload must be a Workload, got {type(w).__name__}")
    if not isinstance(roof, ClusterRoof):
        raise TypeError(f"roof must be a ClusterRoof (roofline.core.calibration.get_roof), got {type(roof).__name__}")
    if roof.hardware.key != hardware.key and roof.hardware.name != hardware.name:
        raise ValueError(f"roof is the {roof.hardware.short}'s ({roof.label}), not the {hardware.short}'s: "
                         "price a chip under its own roof")
    if m.max_position_embeddings and w.input_tokens + w.output_tokens > m.max_position_embeddings:
        raise ValueError(f"input_tokens + output_tokens = {w.input_tokens + w.output_tokens:,} is past "
                         f"{m.name}'s context of {m.max_position_embeddings:,} tokens")
    slos = {name: (None if v is None else float(number(name, v))) for name, v in (("ttft_slo", ttft_slo), ("tpot_slo", tpot_slo))}
    if d.disaggregate:
        return _disaggregated(m, hardware, w, d, roof, slos)
    mem = _memory(m, d, hardware, w)
    base = dict(model=m.name, hardware=hardware.short or hardware.name, deployment=d, workload=w, roof=roof.label,
                max_batch=mem.batch, usable_per_gpu=mem.usable)
    if mem.batch < 1:
        return Sustained(**base, fits=False, output_tokens_per_s=0.0, ttft_s=None, tpot_s=None, batch=0,
                         memory_per_gpu=mem.weights, limit="memory", bound="memory")
    if w.load == "offline" and w.requests is not None:
        limit = "max_batch" if d.max_batch is not None and mem.batch == d.max_batch else "memory"
        return _waves(m, d, roof, w, base, mem, limit)
    used = mem.weights + mem.prefix
    slot_limit = "max_batch" if d.max_batch is not None and mem.batch == d.max_batch else "memory"
    cap = _capacity(m, d, roof, w, float(mem.batch), slot_limit, slos)
    if cap is None:
        p = _point(m, d, roof, w, _R_MIN)
        return Sustained(**base, fits=True, output_tokens_per_s=0.0, ttft_s=p.ttft, tpot_s=p.tpot, batch=0,
                         memory_per_gpu=used + mem.per_sequence, limit="slo", bound=p.step.bound, step=p.step,
                         notes=("no load meets the targets: even one request alone takes these",))
    peak, limit, sustained, notes = cap.point, cap.limit, True, ()
    O, n = w.output_tokens, d.replicas

    def memory(in_flight):
        return used + min(in_flight, mem.batch) / d.dp_attention * mem.per_sequence

    if w.load == "offline":  # from admission: the queue of a benchmark's waiting requests is not counted
        p = peak
        ttft, tpot, rate, in_flight = p.service, p.tpot, p.rate, p.admitted
    elif w.load == "rate":
        lam = w.rate / n
        if lam > peak.rate * (1 + 1e-9):
            p, sustained = peak, False
            ttft = tpot = None
            rate, in_flight = peak.rate, peak.in_flight
        else:
            p = _point(m, d, roof, w, _r_for(lambda r: _point(m, d, roof, w, r).rate, lam, cap.r))
            ttft, tpot, rate, in_flight, limit = p.ttft, p.tpot, lam, lam * (p.ttft + (O - 1) * p.tpot), "load"
    else:
        c = w.concurrency / n
        if c <= peak.in_flight and math.isfinite(peak.ttft):
            p = _point(m, d, roof, w, _r_for(lambda r: _point(m, d, roof, w, r).in_flight, c, cap.r))
            ttft, tpot, limit = p.ttft, p.tpot, "load"
        else:  # the rest wait for a place: their wait is in the time to first token
            p = peak
            ttft, tpot = c / p.rate - (O - 1) * p.tpot, p.tpot
            notes = (f"{c - p.admitted:,.0f} clients a replica wait for a place, "
                     f"{fmt(ttft - p.service, 's')} each",)
        rate, in_flight = c / (ttft + (O - 1) * tpot), c
    return Sustained(**base, fits=True, output_tokens_per_s=n * rate * O, ttft_s=ttft, tpot_s=tpot,
                     batch=in_flight, memory_per_gpu=memory(in_flight), limit=limit, bound=p.step.bound,
                     sustained=sustained, step=p.step, notes=notes, peak_output_tokens_per_s=n * peak.rate * O)


def pipelined_prefill(model: Model | str, deployment: Deployment, roof: ClusterRoof, tokens: float, *,
                      keys: float | None = None, seq: float | None = None) -> tuple[float, int]:
    """Seconds to prefill ``tokens`` prompt tokens alone on one replica, and the pieces it was cut into.

    Without a pipeline: ``ceil(T / C)`` steps of the step budget ``C`` (one step with no budget). Through
    ``p`` pipeline stages, ``k`` pieces flow as a pipeline does: the first piece crosses every stage, each
    later one a stage behind it, ``(k + p - 1)`` stage steps of one piece; a prompt cut into ``p`` even
    pieces takes ``(2p - 1) / p^2`` of its serial time when a piece's stage step is a ``p``-th of the whole's.
    The replica cuts into the budget's pieces, or ``p`` of them where that is faster (never slower than one
    piece through every stage in turn)."""
    m = load_model(model)
    d = deployment
    t = float(number("tokens", tokens))
    keys = t / 2.0 if keys is None else keys
    seq = t if seq is None else seq
    least = 1 if d.max_tokens is None else max(1, math.ceil(t / d.max_tokens - 1e-9))
    best = None
    for k in sorted({least, max(least, d.pp)}):
        piece = step_time(m, d, roof, decode=0.0, context=seq, prefill=t / k * d.pp, keys=keys, seq=seq).seconds
        s = (k + d.pp - 1) * piece
        if best is None or s < best[0]:
            best = (s, k)
    return best


def pipeline_piece_share(stages: int) -> float:
    """The share of its serial time a prompt takes through ``stages`` pipeline stages when cut into as many
    even pieces: ``(2p - 1) / p^2`` (``p + p - 1`` stage steps, each a ``p``-th of a ``p``-th of the whole);
    1 for one stage, 15/64 for eight."""
    p = int(number("stages", stages, minimum=1, strict=False, integer=True))
    return (2 * p - 1) / p ** 2


def _prefill_seconds(m, d, roof, w: Workload, n: float) -> float:
    """Seconds to prefill ``n`` prompts together (:func:`pipelined_prefill`)."""
    return pipelined_prefill(m, d, roof, n * w.computed_tokens, keys=w.prompt_keys, seq=w.input_tokens)[0]


def _waves(m, d, roof, w: Workload, base: dict, mem: _Memory, limit: str) -> Sustained:
    """An offline benchmark of ``w.requests`` requests of fixed lengths, all issued at once: waves of the
    largest batch, each prefilled whole (its first tokens come at the wave's end of prefill), then decoded
    ``O`` steps at the mean context; the last wave holds what is left."""
    per = w.requests / d.replicas
    b = float(min(mem.batch, math.ceil(per)))
    if b < mem.batch:
        limit = "load"
    full, rest = divmod(per, b)
    ctx = w.mean_context

    def wave(n):
        st = step_time(m, d, roof, decode=n, context=ctx)
        return _prefill_seconds(m, d, roof, w, n), d.pp * st.seconds, st

    ttft, tpot, step = wave(b)
    total = full * (ttft + w.output_tokens * tpot)
    if rest > 0:
        p, t, _ = wave(rest)
        total += p + w.output_tokens * t
    out = d.replicas * per * w.output_tokens / total
    return Sustained(**base, fits=True, output_tokens_per_s=out, ttft_s=ttft, tpot_s=tpot, batch=b,
                     memory_per_gpu=mem.weights + mem.prefix + b / d.dp_attention * mem.per_sequence, limit=limit,
                     bound=step.bound, step=step, notes=(_waves_note(math.ceil(per / b), b),))


def _waves_note(n: int, b: float) -> str:
    return f"one wave of {b:,.0f} requests" if n == 1 else f"{n} waves of at most {b:,.0f} requests"


def _link_rate(m: Model, d: Deployment, roof: ClusterRoof) -> float:
    """Bytes/s one GPU of the prefill pool sends its share of a cache at."""
    if not isinstance(d.kv_link, str):
        return d.kv_link
    inside = d.kv_link == "nvlink" or (d.kv_link == "auto" and d.gpus <= d.gpus_per_node)
    if not inside:  # the datasheet roof of a chip with no network tier would price the port at NVLink's rate
        require_links(roof.hardware, ["network"], f"sending the KV cache between pools of {d.gpus:,} GPUs in nodes "
                      f"of {d.gpus_per_node}")
    return roof.send_nvlink if inside else roof.port


class PrefillPool(NamedTuple):
    """A disaggregated deployment's prefill replica under a flow of prompts (chapter 13): ``alone``, one
    prompt's prefill with nothing else (the least TTFT can be); ``batches``, ``(prompts k, seconds T(k))``
    for the batches a replica may gather; ``peak``, the most prompts/s one replica finishes."""

    alone: float
    batches: tuple
    peak: float
    poisson: bool = True

    @property
    def peak_batch(self) -> int:
        """The prompts ``k`` of the batch that finishes the most prompts a second, ``k / T(k)`` (the batch the
        replica runs at its :attr:`peak`)."""
        return max(self.batches, key=lambda kt: kt[0] / kt[1])[0]

    def ttft(self, rate: float) -> float:
        """Seconds from a prompt's arrival to its last token prefilled at ``rate`` prompts/s per replica: the
        best batch ``k`` the queue allows, a batch's time and its wait as at one server of fixed service
        (M/D/1, ``rho T / (2 (1 - rho))`` with ``rho = rate T(k) / k``; none for evenly spaced prompts); inf
        past the peak."""
        best = math.inf
        for k, t in self.batches:
            rho = rate * t / k
            if rho < 1.0:
                best = min(best, t * (1.0 + (rho / (2.0 * (1.0 - rho)) if self.poisson else 0.0)))
        return best

    def rate_within(self, seconds: float) -> float:
        """The most prompts/s per replica whose :meth:`ttft` stays within ``seconds`` (DistServe's goodput
        for a TTFT target): for each batch with ``T(k) <= seconds``, ``rho <= 2a / (1 + 2a)`` with
        ``a = seconds / T(k) - 1``; 0 if even a prompt alone takes longer."""
        best = 0.0
        for k, t in self.batches:
            if t <= seconds:
                a = seconds / t - 1.0
                best = max(best, k / t * ((2 * a / (1 + 2 * a)) if self.poisson else 1.0 - 1e-9))
        return best


def prefill_pool(model: Model | str, deployment: Deployment, roof: ClusterRoof, workload: Workload) -> PrefillPool:
    """:class:`PrefillPool` of ``deployment``'s replica for ``workload``'s prompts: batches of 1, 2, 4, ...
    prompts up to four times the step budget's tokens (:data:`CHUNK_TOKENS` with none), each prefilled as
    :func:`pipelined_prefill` prices it."""
    m = load_model(model)
    w, d = workload, deployment
    ic = max(w.computed_tokens, 1.0)
    most = max(1, int(4 * (d.max_tokens or CHUNK_TOKENS) // ic))
    ks, k = [], 1
    while k <= most:
        ks.append(k)
        k *= 2
    if ks[-1] != most:
        ks.append(most)
    batches = tuple((k, _prefill_seconds(m, d, roof, w, k)) for k in ks)
    return PrefillPool(batches[0][1], batches, max(k / t for k, t in batches), w.arrival == "poisson")


def _disaggregated(m: Model, hw: Hardware, w: Workload, d: Deployment, roof: ClusterRoof, slos) -> Sustained:
    P, D = d.disaggregate
    rp, rd = P // d.replica_gpus, D // d.replica_gpus
    mem = _memory(m, d, hw, w)
    base = dict(model=m.name, hardware=hw.short or hw.name, deployment=d, workload=w, roof=roof.label,
                max_batch=mem.batch, usable_per_gpu=mem.usable)
    if mem.batch < 1:
        return Sustained(**base, fits=False, output_tokens_per_s=0.0, ttft_s=None, tpot_s=None, batch=0,
                         memory_per_gpu=mem.weights, limit="memory", bound="memory")
    O = w.output_tokens
    pool = prefill_pool(m, d, roof, w)
    cache = float(m.kv_cache_bytes(w.input_tokens, d.kv))
    link = _link_rate(m, d, roof)
    transfer = 0.0 if math.isinf(link) else roof.latency_s + cache / d.replica_gpus / link
    link_rate = math.inf if math.isinf(link) else P * link / cache

    def decode_at(b):
        st = step_time(m, d, roof, decode=max(b, _R_MIN), context=w.mean_context)
        return st, d.pp * st.seconds

    def decode_rate(b):  # requests/s the decode pool finishes at b sequences a replica (O - 1 steps each)
        return math.inf if O == 1 else rd * b / ((O - 1) * decode_at(b)[1])

    most, slo_capped = float(mem.batch), False
    if d.max_tokens is not None:  # a decode step's tokens within the step budget too
        most = min(most, float(d.pp * d.max_tokens))
    if slos["tpot_slo"] is not None:
        ok = _largest(lambda b: decode_at(b)[1] <= slos["tpot_slo"], most)
        if ok is None:
            st, tpot = decode_at(1.0)
            return Sustained(**base, fits=True, output_tokens_per_s=0.0, ttft_s=pool.alone + transfer, tpot_s=tpot,
                             batch=0, memory_per_gpu=mem.weights, limit="slo", bound=st.bound, step=st,
                             kv_transfer_s=transfer, notes=("no decode batch meets the TPOT target",))
        slo_capped, most = ok < most, ok
    prefill_cap = rp * pool.peak
    if slos["ttft_slo"] is not None:
        within = slos["ttft_slo"] - transfer
        prefill_cap = rp * pool.rate_within(within)
        if prefill_cap <= 0:
            st, tpot = decode_at(1.0)
            return Sustained(**base, fits=True, output_tokens_per_s=0.0, ttft_s=pool.alone + transfer, tpot_s=tpot,
                             batch=0, memory_per_gpu=mem.weights, limit="slo", bound=st.bound, step=st,
                             kv_transfer_s=transfer,
                             notes=(f"the TTFT target is below one prompt's prefill alone and its cache's trip, "
                                    f"{fmt(pool.alone + transfer, 's')}",))
    caps = {"prefill": prefill_cap, "decode": decode_rate(most), "kv link": link_rate}
    limit = min(caps, key=caps.get)
    if limit == "decode" and slo_capped:
        limit = "slo"
    peak = caps[min(caps, key=caps.get)]

    def at(lam):  # (TTFT, TPOT, decode batch, its step) at lam requests/s
        b = most if O == 1 or lam >= decode_rate(most) else _smallest(lambda x: decode_rate(x) >= lam, most)
        st, tpot = decode_at(b)
        ttft = pool.ttft(lam / rp) + transfer
        if slos["ttft_slo"] is None and not math.isfinite(ttft):  # at the peak itself: half a batch's wait, the batch
            k, t = max(pool.batches, key=lambda kt: kt[0] / kt[1])
            ttft = 1.5 * t + transfer
        return ttft, tpot, b, st

    sustained, notes = True, ()
    if w.load == "offline":
        lam = peak
        ttft, tpot, b, st = at(lam)
        k, t = max(pool.batches, key=lambda kt: kt[0] / kt[1])
        if limit == "prefill" and slos["ttft_slo"] is None:
            ttft = 1.5 * t + transfer  # a batch gathered (half a batch's wait), then prefilled
    elif w.load == "rate":
        lam = w.rate
        if lam > peak * (1 + 1e-9):
            lam, sustained = peak, False
            ttft, tpot, b, st = at(lam)
            ttft = tpot = None
        else:
            ttft, tpot, b, st = at(lam)
            limit = "load"
    else:
        c = w.concurrency

        def in_flight(lam):
            tt, tp, _, _ = at(lam)
            return lam * (tt + (O - 1) * tp)

        top = peak * (1 - 1e-9)
        if in_flight(top) >= c:
            lam = _r_for(in_flight, c, top)
            ttft, tpot, b, st = at(lam)
            limit = "load" if lam < 0.999 * peak else limit
        else:
            ttft, tpot, b, st = at(top)
            wait = c / top - (ttft + (O - 1) * tpot)
            notes = (f"{c - top * (ttft + (O - 1) * tpot):,.0f} clients wait for the pools, {fmt(wait, 's')} each",)
            ttft += wait
        lam = c / (ttft + (O - 1) * tpot)
    batch = b if lam > 0 else 0
    return Sustained(**base, fits=True, output_tokens_per_s=lam * O, ttft_s=ttft, tpot_s=tpot, batch=batch,
                     memory_per_gpu=mem.weights + mem.prefix + batch / d.dp_attention * mem.per_sequence,
                     limit=limit, bound=st.bound, sustained=sustained, step=st, kv_transfer_s=transfer, notes=notes,
                     peak_output_tokens_per_s=peak * O)


class Frontier(NamedTuple):
    """A replica's latency-throughput frontier: at each batch (requests in flight), the output tokens/s per
    GPU, the time per output token and the time to first token (from arrival), in the steady state of
    continuous batching with chunked prefill."""

    batch: np.ndarray
    tokens_per_s_per_gpu: np.ndarray
    tpot_s: np.ndarray
    ttft_s: np.ndarray
    max_batch: int


def frontier(model: Model | str, hardware: Hardware, workload: Workload, deployment: Deployment, roof: ClusterRoof,
             batches: ArrayLike | None = None) -> Frontier:
    """The frontier of one replica of ``deployment`` for ``workload``'s lengths and prefix hit (its load is
    ignored: every batch is one point, ``c`` clients all in flight), at ``batches`` (default: powers of two,
    then the most the replica holds). Batches past what the replica sustains are dropped."""
    hardware = _chip(hardware, roof)
    m = check_deployment(model, deployment, hardware)
    w, d = workload, replace(deployment, replicas=1, disaggregate=None)
    mem = _memory(m, d, hardware, w)
    slots = "max_batch" if d.max_batch is not None and mem.batch == d.max_batch else "memory"
    cap = _capacity(m, d, roof, w, float(mem.batch), slots, {"ttft_slo": None, "tpot_slo": None}) if mem.batch else None
    most = int(cap.point.in_flight) if cap is not None else 0
    if batches is None:
        batches = [b for b in _powers(most)] + ([most] if most >= 1 and most & (most - 1) else [])
    bs = np.array(sorted({int(count("batch", b, maximum=LARGEST_BATCH)) for b in np.atleast_1d(batches)
                          if int(b) <= most}), dtype=float)
    pts = [_point(m, d, roof, w, _r_for(lambda r: _point(m, d, roof, w, r).in_flight, b, cap.r)) for b in bs]
    tpot = np.array([p.tpot for p in pts])
    ttft = np.array([p.ttft for p in pts])
    rate = np.array([b / (p.ttft + (w.output_tokens - 1) * p.tpot) for b, p in zip(bs, pts)])
    return Frontier(bs, rate * w.output_tokens / d.replica_gpus if bs.size else bs, tpot, ttft, most)


# ------------------------------------------------------------------------------------------------ the planner


@dataclass(frozen=True)
class ServingPlanRow:
    """One layout the planner tried: its capacity under the targets (one replica, offline or at the
    targets' largest batch), and, for a workload with a rate, the replicas that carry it."""

    deployment: Deployment
    capacity: Sustained
    replicas: int

    @property
    def meets(self) -> bool:
        """It fits, and some batch meets the targets."""
        return self.capacity.fits and self.capacity.output_tokens_per_s > 0

    @property
    def gpus(self) -> int:
        """GPUs the workload needs on this layout (one replica, or the replicas a rate needs)."""
        return self.replicas * self.deployment.replica_gpus

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.capacity.output_tokens_per_s / self.deployment.replica_gpus


def _powers(most: int) -> list[int]:
    out, k = [], 1
    while k <= most:
        out.append(k)
        k *= 2
    return out


def layouts(model: Model | str, *, max_gpus: int = 8, gpus_per_node: int = 8, **formats) -> list[Deployment]:
    """The replicas the planner tries: tensor degrees in a node that divide the heads, pipeline degrees and,
    for a mixture of experts, attention data parallelism with the experts spread over every attending GPU
    (or not spread), each of those with and without the two-batch overlap of its all-to-alls, powers of two up
    to ``max_gpus`` GPUs a replica."""
    m = load_model(model)
    most = count("max_gpus", max_gpus, maximum=1 << 12)
    out = []
    for tp in _powers(min(most, gpus_per_node)):
        if m.num_heads % tp:
            continue
        for pp in _powers(most // tp):
            if pp > m.num_layers:
                continue
            for a in (_powers(most // (tp * pp)) if m.moe is not None else [1]):
                eps = {1, tp * a} if m.moe is not None else {1}
                for ep in sorted(eps):
                    if m.moe is not None and m.moe.num_experts % ep:
                        continue
                    if m.moe is not None and a > 1 and ep == 1:
                        continue  # attention split by batch with every expert copied: replicas do it better
                    out.append(Deployment(tp=tp, pp=pp, ep=ep, dp_attention=a, gpus_per_node=gpus_per_node, **formats))
                    if m.moe is not None and a > 1 and ep > 1 and "overlap" not in formats:
                        out.append(Deployment(tp=tp, pp=pp, ep=ep, dp_attention=a, gpus_per_node=gpus_per_node,
                                              overlap="two-batch", **formats))
    return out


def plan_serving(model: Model | str, hardware: Hardware, workload: Workload, roof: ClusterRoof, *, max_gpus: int = 8,
                 ttft_slo: float | None = None, tpot_slo: float | None = None, gpus_per_node: int = 8,
                 **formats) -> tuple[ServingPlanRow, ...]:
    """Every layout of :func:`layouts` priced for ``workload`` under ``roof`` and the targets: each replica's
    capacity at the largest batch that meets them (``workload``'s prefix hit, its lengths, no rate), then the
    replicas a rate needs. Ranked: layouts that meet the targets first, by output tokens/s per GPU."""
    m = load_model(model)
    hardware = _chip(hardware, roof)
    w = workload
    probe = Workload(w.input_tokens, w.output_tokens, prefix_hit=w.prefix_hit)
    rows = []
    for d in layouts(m, max_gpus=max_gpus, gpus_per_node=gpus_per_node, **formats):
        cap = sustain(m, hardware, probe, d, roof, ttft_slo=ttft_slo, tpot_slo=tpot_slo)
        if w.load == "rate" and cap.output_tokens_per_s > 0:
            n = max(1, math.ceil(w.rate * w.output_tokens / cap.output_tokens_per_s - 1e-9))
        elif w.load == "concurrency" and cap.batch > 0:
            n = max(1, math.ceil(w.concurrency / cap.batch - 1e-9))
        else:
            n = 1
        rows.append(ServingPlanRow(d, cap, n))
    rows.sort(key=lambda r: (not r.meets, -r.tokens_per_s_per_gpu, r.gpus))
    return tuple(rows)


def smallest_slice(rows) -> ServingPlanRow | None:
    """Of the planner's rows that meet the targets, the one needing the fewest GPUs (the fastest per GPU
    among those); None if none does."""
    ok = [r for r in rows if r.meets]
    return min(ok, key=lambda r: (r.gpus, -r.tokens_per_s_per_gpu)) if ok else None


# --- for chapter 13

# ------------------------------------------------------------------------------------- ceiling and estimate


def ceiling_deployment(deployment: Deployment) -> Deployment:
    """The deployment the ceiling prices: the same layout, its cache growing with the answer into all the
    HBM the weights leave, no cap on the batch or the tokens of a step."""
    return replace(deployment, kv_policy="grow", kv_fraction=1.0, max_batch=None, max_tokens=None)


class ServingPair(NamedTuple):
    """One workload on one deployment: the datasheet ceiling and the calibrated estimate (None where the
    chip has no calibrated roof)."""

    ceiling: Sustained
    estimate: Sustained | None


def serving_pair(model: Model | str, hardware: Hardware | str, workload: Workload, deployment: Deployment, *,
                 ttft_slo: float | None = None, tpot_slo: float | None = None) -> ServingPair:
    """What ``deployment`` sustains for ``workload`` under both roofs (:func:`sustain`), its matmuls in the
    deployment's format: the **ceiling** on :func:`ceiling_deployment` under the datasheet roof, the
    **estimate** on ``deployment`` as given under the chip's calibrated roof (``None`` where it has none)."""
    hw = get_hardware(hardware)
    m = check_deployment(model, deployment, hw)
    math_dtype = deployment.math
    top = sustain(m, hw, workload, ceiling_deployment(deployment), get_roof(hw, "datasheet", math_dtype),
                  ttft_slo=ttft_slo, tpot_slo=tpot_slo)
    est = None
    if roof_kind(hw) == "calibrated":
        est = sustain(m, hw, workload, deployment, get_roof(hw, "calibrated", math_dtype),
                      ttft_slo=ttft_slo, tpot_slo=tpot_slo)
    return ServingPair(top, est)


__all__ += ["ceiling_deployment", "ServingPair", "serving_pair"]


__all__ += ["PUBLISHED_SERVING", "Interference", "interference", "disaggregated_splits", "best_split", "prefix_sweep",
            "PrefixSavings", "prefix_savings", "TPExchange", "tp_exchange", "HandSlice", "slice_by_hand"]

_SGLANG = "The SGLang Team 2025, Deploying DeepSeek with PD Disaggregation and Large-scale Expert Parallelism on 96 H100 GPUs (LMSYS blog)"
PUBLISHED_SERVING = MappingProxyType({
    "sglang_gpus": (96, _SGLANG + ": 12 nodes, each equipped with 8 H100 GPUs"),
    "sglang_nodes": (12, _SGLANG + ": runs on 12 nodes in the Atlas Cloud"),
    "sglang_input_per_node": (52.3e3, _SGLANG + ": 52.3k input tokens per second per node"),
    "sglang_output_per_node": (22.3e3, _SGLANG + ": 22.3k output tokens per second per node"),
    "sglang_prompt": (2000, _SGLANG + ": for 2000-token input sequences"),
    "sglang_vs_tp": (5.0, _SGLANG + ": improves the output throughput by up to 5x over vanilla tensor parallelism"),
})
"""Published figures of large-scale serving chapter 13 quotes beside the package's own: (value, source)."""


class Interference(NamedTuple):
    """A colocated replica's average step at ``batch`` sequences decoding, with the prompt tokens that join
    it (``mixed``), against a step of the same sequences decoding alone (``pure``); ``inflation`` is the
    first's seconds over the second's: how much longer every token waits because prompts share its step."""

    batch: float
    prompt_tokens: float
    mixed: StepTime
    pure: StepTime

    @property
    def inflation(self) -> float:
        return self.mixed.seconds / self.pure.seconds


def interference(model: Model | str, workload: Workload, deployment: Deployment, roof: ClusterRoof,
                 batch: float) -> Interference:
    """Chapter 13: the step of continuous batching with chunked prefill (``B`` decoding, ``B (1 - h) I / O``
    prompt tokens riding along) beside a pure decode step of ``B`` at the same mean context."""
    m = check_deployment(model, deployment)
    b = float(number("batch", batch))
    mixed = _mixed_step(m, deployment, roof, workload, b)
    pure = step_time(m, deployment, roof, decode=b, context=workload.mean_context)
    return Interference(b, b * workload.computed_tokens / workload.output_tokens, mixed, pure)


def disaggregated_splits(model: Model | str, hardware: Hardware, workload: Workload, deployment: Deployment,
                         roof: ClusterRoof, gpus: int, *, ttft_slo: float | None = None,
                         tpot_slo: float | None = None) -> tuple[Sustained, ...]:
    """Chapter 13: every split of ``gpus`` GPUs into a prefill pool and a decode pool, each a whole number of
    ``deployment``'s replicas (at least one each), priced by :func:`sustain` for ``workload``, in order of
    the prefill pool's size."""
    n = count("gpus", gpus, maximum=1 << 16)
    r = deployment.replica_gpus
    out = []
    for p in range(r, n - r + 1, r):
        if (n - p) % r:
            continue
        d = replace(deployment, disaggregate=(p, n - p))
        out.append(sustain(model, hardware, workload, d, roof, ttft_slo=ttft_slo, tpot_slo=tpot_slo))
    if not out:
        raise ValueError(f"gpus {n} cannot hold one prefill and one decode replica of {r} GPUs each")
    return tuple(out)


def best_split(splits) -> Sustained:
    """Of :func:`disaggregated_splits`' results, the one with the most output tokens/s (the smaller prefill
    pool where two tie)."""
    splits = tuple(splits)
    if not splits:
        raise ValueError("no splits to choose from")
    return max(splits, key=lambda s: (s.output_tokens_per_s, -s.deployment.disaggregate[0]))


def prefix_sweep(model: Model | str, hardware: Hardware, workload: Workload, deployment: Deployment, roof: ClusterRoof,
                 hits: Sequence[float], *, ttft_slo: float | None = None, tpot_slo: float | None = None) -> tuple[Sustained, ...]:
    """Chapter 13: :func:`sustain` for ``workload`` at each prefix hit rate of ``hits`` (its own hit ignored)."""
    return tuple(sustain(model, hardware, replace(workload, prefix_hit=float(h)), deployment, roof,
                         ttft_slo=ttft_slo, tpot_slo=tpot_slo) for h in np.atleast_1d(hits))


class PrefixSavings(NamedTuple):
    """What a prefix cache saves one request on one GPU of a replica: the prompt's FLOPs computed without
    and with the cache, the cache bytes its sequence holds without and with it, and the shared copy's bytes
    (held once, whatever the batch)."""

    flops_full: float
    flops_cached: float
    kv_full: float
    kv_cached: float
    shared: float


def prefix_savings(model: Model | str, hardware: Hardware, workload: Workload, deployment: Deployment,
                   roof: ClusterRoof) -> PrefixSavings:
    """Chapter 13: one request's prefill FLOPs (per GPU, under ``roof``) and KV-cache bytes at no prefix hit
    and at ``workload``'s, and the shared prefix's bytes per GPU."""
    hardware = _chip(hardware, roof)
    m = check_deployment(model, deployment, hardware)
    w0 = replace(workload, prefix_hit=0.0)
    full, cached = (_join_step(m, deployment, roof, w, 0.0) for w in (w0, workload))
    mem0, mem1 = _memory(m, deployment, hardware, w0), _memory(m, deployment, hardware, workload)
    return PrefixSavings(full.flops, cached.flops, mem0.per_sequence, mem1.per_sequence, mem1.prefix)


class TPExchange(NamedTuple):
    """One of a decode step's tensor-parallel all-reduces: its buffer (bytes), its seconds, the bus bandwidth
    it runs at, that bandwidth as a share of the roof's best (on the largest buffers), and how many a step
    makes (two a layer: after attention and after the MLP)."""

    tp: int
    message: float
    seconds: float
    bus_bandwidth: float
    share_of_best: float
    per_step: int


def tp_exchange(model: Model | str, roof: ClusterRoof, tp: int, batch: float, gpus_per_node: int = 8, *,
                allreduce: str = ENGINE_ALLREDUCE) -> TPExchange:
    """Chapter 13: one all-reduce of a decode step of ``batch`` sequences over ``tp`` GPUs: ``batch x h``
    activations of :data:`EXCHANGE_BYTES` each, run as ``allreduce`` says (the engines' custom kernels where
    they apply, else NCCL's sweep); the bus bandwidth is nccl-tests' convention for that time,
    ``2 (t-1)/t`` of the buffer over it."""
    m = load_model(model)
    t = count("tp", tp, maximum=1 << 10)
    msg = float(number("batch", batch)) * m.hidden_size * EXCHANGE_BYTES
    k = min(t, gpus_per_node)
    sec = float(roof.all_reduce_time(t, msg, per_node=k, kind=allreduce))
    bw = msg * 2 * (t - 1) / t / sec if t > 1 and sec > 0 else math.inf
    return TPExchange(t, msg, sec, bw, bw / float(roof.nvlink.top) if t > 1 else 1.0, 2 * m.num_layers if t > 1 else 0)


class HandSlice(NamedTuple):
    """Chapter 13's count by hand of the GPUs a target needs: the weights' bytes, the KV cache of ``batch``
    sequences, their sum, the GPUs the sum needs to fit (``total / C``) and to be read within the target
    (``total / (B_HBM TPOT)``), and the smallest power of two at or above both."""

    batch: float
    weights: float
    kv: float
    total: float
    by_memory: float
    by_bandwidth: float
    gpus: int


def slice_by_hand(model: Model | str, hardware: Hardware, workload: Workload, batch: float, tpot_slo: float, *,
                  weights_dtype: str = "bf16", kv_dtype: str | None = None) -> HandSlice:
    """Chapter 13: the first-order count of a slice. The weights and the cache of ``batch`` sequences (each
    holding its prompt, less a shared prefix, and half its answer on average) must fit ``G`` GPUs' usable
    HBM, and one decode step reads all of them once, at ``G`` times the HBM bandwidth, within ``tpot_slo``.
    Ignores compute, the exchanges, the shared prefix's own copy and a cache copied past the KV heads."""
    m = load_model(model)
    b = float(number("batch", batch))
    tau = float(number("tpot_slo", tpot_slo))
    hardware = _chip(hardware)
    weights = float(m.params) * dtype_bytes(weights_dtype)
    kv = b * float(m.kv_cache_bytes(_held_tokens(workload, "grow"), kv_dtype or weights_dtype))
    total = weights + kv
    by_mem, by_bw = total / hardware.usable_capacity, total / (hardware.hbm_bandwidth * tau)
    g = 1
    while g < max(by_mem, by_bw):
        g *= 2
    return HandSlice(b, weights, kv, total, by_mem, by_bw, g)
