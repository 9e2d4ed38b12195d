"""Tiling: how a kernel changes the bytes it moves and not the FLOPs it does (chapter 4).

Arithmetic intensity counts the bytes that cross the HBM boundary. A kernel that holds part of its
operands on chip (shared memory, registers, the L2) and reuses them there does the same FLOPs and
moves fewer bytes. This module counts those bytes, as functions of the tile the on-chip memory holds:

- a tiled matmul (:func:`tiled_matmul`), the largest square tile a memory holds (:func:`square_tile`)
  and the tile a matmul needs to reach a given intensity (:func:`tile_for_intensity`);
- attention computed explicitly, with every score written to HBM and read back
  (:func:`explicit_attention`), and fused into one flash kernel that keeps the scores on chip
  (:func:`flash_attention`, Dao et al. 2022; the loop order of FlashAttention-2), forward and backward,
  each as its kernels (:class:`~roofline.core.ops.Op`) with the peak memory it allocates;
- Dao et al.'s Algorithm 1 counted access by access (:func:`dao_forward_accesses`), the object of
  their IO theorem, Theta(N^2 d^2 / M) against Theta(N d + N^2) for the explicit form;
- decode attention, one query per sequence against a long KV cache (:func:`decode_attention`).

Sizes: ``seq`` tokens (queries and keys alike, a prefill or a training sequence), ``head_dim``,
``heads`` query heads and ``kv_heads`` key/value heads (grouped-query attention when fewer), ``batch``
sequences. ``on_chip`` is in bytes. Counts are HBM traffic with no help from caches other than the
on-chip memory named: a kernel whose working set fits in the L2 moves fewer bytes than counted with a
shared-memory-sized ``on_chip``, which is the reason to pass the L2 as ``on_chip`` too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from roofline.core.checks import broadcast, number
from roofline.core.cost import Breakdown, Cost
from roofline.core.model import Model, load_model
from roofline.core.ops import Op
from roofline.core.units import dtype_bytes

__all__ = [
    "tiled_matmul", "square_tile", "tile_for_intensity", "AttentionIO", "explicit_attention", "flash_attention",
    "flash_block", "causal_block_pairs", "dao_forward_accesses", "decode_attention", "score_parity_tokens",
    "online_attention", "Reported", "PUBLISHED", "DIRECTIONS",
]

DIRECTIONS = ("forward", "backward")

# The statistics a flash kernel keeps per query row (the running maximum, the sum, or their log-sum-exp)
# are fp32, whatever the format of Q, K and V.
_STAT_BYTES = 4


def _ceil_div(a, b):
    return np.ceil(np.asarray(a, dtype=float) / np.asarray(b, dtype=float))


def _out(x):
    """A numpy scalar back to a float; arrays stay arrays."""
    return float(x) if np.ndim(x) == 0 else x


# ---------------------------------------------------------------------------------------------
# Tiled matrix multiplication


def tiled_matmul(m: ArrayLike, n: ArrayLike, k: ArrayLike, tile_m: ArrayLike, tile_n: ArrayLike=None, dtype: str = "bf16") -> Cost:
    """``(m x k) @ (k x n)`` computed one ``tile_m x tile_n`` output tile at a time (chapter 4).

    Each output tile is accumulated on chip while the kernel streams its panel of A (``tile_m x k``)
    and its panel of B (``k x tile_n``) from HBM, and is written once. So A is read once per column of
    tiles and B once per row of tiles:

    ``bytes = b (m k ceil(n / tile_n) + k n ceil(m / tile_m) + m n)``,

    for ``b`` bytes per element, and the FLOPs are ``2 m n k`` whatever the tile. A tile larger than
    the matrix is clipped to it, so a tile that covers the whole output gives the minimum traffic of
    :func:`roofline.core.ops.matmul` (each operand read once), and with ``m = 1`` (a decode step) no tile
    brings the intensity above one FLOP per byte: B is read in full once whatever happens.
    ``tile_n`` defaults to ``tile_m`` (a square tile). Broadcasts.
    """
    m = number("m", m, integer=True)
    n = number("n", n, integer=True)
    k = number("k", k, integer=True)
    tile_m = number("tile_m", tile_m, integer=True)
    tile_n = tile_m if tile_n is None else number("tile_n", tile_n, integer=True)
    broadcast(m=m, n=n, k=k, tile_m=tile_m, tile_n=tile_n)
    b = dtype_bytes(dtype)
    tm, tn = np.minimum(tile_m, m), np.minimum(tile_n, n)
    reads = b * (m * k * _ceil_div(n, tn) + k * n * _ceil_div(m, tm))
    return Cost(_out(2.0 * m * n * k + 0 * tm * tn), _out(reads + b * m * n))


def square_tile(on_chip, dtype: str = "bf16"):
    """The largest square tile ``T`` for which a ``T x T`` block of A, one of B and one of C fit in
    ``on_chip`` bytes: ``3 T^2 b <= on_chip`` (the classic blocked matmul, every block in ``dtype``).

    An H100's 228 KiB of shared memory per SM gives 197 in bf16; its 50 MiB L2, 2,956. Real kernels
    keep the accumulator in registers and stream thin slices of A and B through shared memory, so
    their tiles differ; the scaling (traffic falls as one over the tile) is the same.
    """
    on_chip = number("on_chip", on_chip)
    t = np.floor(np.sqrt(on_chip / (3 * dtype_bytes(dtype))))
    return _out(t)


def tile_for_intensity(m, n, k, intensity, dtype: str = "bf16"):
    """The smallest square tile with which :func:`tiled_matmul` reaches ``intensity`` FLOP per byte,
    or None if no tile does (the untiled minimum traffic is not enough: a matrix-vector product).

    A 4096^3 bf16 product crosses an H100's datasheet ridge at a tile of 683 (4096 is then cut into
    six tiles a side; about 2.8 MB on chip under :func:`square_tile`'s rule: more than one SM's shared
    memory, far less than the L2).
    """
    for name, v in (("m", m), ("n", n), ("k", k)):
        if np.ndim(v):
            raise TypeError(f"tile_for_intensity takes one shape; {name} must be a single number, got an array")
    m = int(number("m", m, integer=True))
    n = int(number("n", n, integer=True))
    k = int(number("k", k, integer=True))
    target = number("intensity", intensity)
    if np.ndim(target):
        raise TypeError("tile_for_intensity takes one target; intensity must be a single number, got an array")
    tiles = np.arange(1, max(m, n) + 1, dtype=float)
    reached = np.asarray(tiled_matmul(m, n, k, tiles, dtype=dtype).intensity) >= target
    hits = np.flatnonzero(reached)
    return int(tiles[hits[0]]) if hits.size else None


# ---------------------------------------------------------------------------------------------
# Attention, explicit and flash


@dataclass(frozen=True)
class AttentionIO:
    """The kernels of one attention pass with what they allocate (chapter 4).

    ``ops``: the kernels, each an :class:`~roofline.core.ops.Op` with FLOPs and HBM bytes split by part
    (``attention`` FLOPs; ``activations`` for Q, K, V, O and their gradients; ``scores`` for traffic
    of the score-sized tensors; ``statistics`` for the fp32 per-row statistics). ``peak_bytes``: the
    most HBM the pass allocates at once beyond its inputs. ``saved_bytes``: what a forward pass keeps
    for the backward pass (zero for inference). ``block``: a flash kernel's block of rows (None for
    the explicit form).
    """

    name: str
    ops: tuple
    peak_bytes: float | np.ndarray
    saved_bytes: float | np.ndarray = 0.0
    block: float | np.ndarray | None = None

    @property
    def flops(self):
        return sum(op.flops for op in self.ops)

    @property
    def reads(self):
        return sum(op.reads for op in self.ops)

    @property
    def writes(self):
        return sum(op.writes for op in self.ops)

    @property
    def bytes(self):
        return self.reads + self.writes

    @property
    def cost(self) -> Cost:
        return Cost(self.flops, self.bytes)

    @property
    def intensity(self):
        return self.cost.intensity

    def part(self, part: str) -> Cost:
        """FLOPs and bytes of one part over all kernels (a part no kernel has costs nothing)."""
        return self.breakdown[part] if part in self.breakdown.parts else Cost(0.0, 0.0)

    @property
    def breakdown(self) -> Breakdown:
        """The kernels grouped by part, ready for :func:`roofline.predict` (which times kernel by kernel)."""
        return Breakdown.from_ops(self.name, self.ops)


def _shape(seq, head_dim, heads, kv_heads, batch):
    seq = number("seq", seq, integer=True)
    head_dim = number("head_dim", head_dim, integer=True)
    heads = number("heads", heads, integer=True)
    kv_heads = heads if kv_heads is None else number("kv_heads", kv_heads, integer=True)
    batch = number("batch", batch, integer=True)
    broadcast(seq=seq, head_dim=head_dim, heads=heads, kv_heads=kv_heads, batch=batch)
    if np.any(np.asarray(heads) % np.asarray(kv_heads)):
        raise ValueError(f"heads must be a multiple of kv_heads (each KV head serves a whole group of query heads); "
                         f"got heads {heads!r} and kv_heads {kv_heads!r}")
    return seq, head_dim, heads, kv_heads, batch


def _direction(direction: str) -> None:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be 'forward' or 'backward', got {direction!r}")


def explicit_attention(seq, head_dim, heads, *, kv_heads=None, batch=1, dtype: str = "bf16", causal: bool = True,
                       direction: str = "forward", live_scores: int = 2) -> AttentionIO:
    """Attention as separate kernels, every score-sized tensor written to HBM and read back (chapter 4).

    Forward (Dao et al.'s Algorithm 0, the standard implementation): ``scores`` (S = Q K^T, scaled,
    written), under ``causal`` a ``mask`` kernel (reads S and a one-byte mask of ``seq x seq``, writes
    the masked scores), ``softmax`` (reads them, writes P) and ``pv`` (reads P and V, writes O). The
    whole square is computed and the masked half thrown away, so the FLOPs are ``4 seq^2 head_dim``
    per head, causal or not. Without the mask that is ``4 N d + 4 N^2`` elements per head, Dao et al.'s
    Theta(N d + N^2).

    Backward (their Algorithm 3), from the P the forward pass saved: ``dv`` (P^T dO), ``dp`` (dO V^T,
    written), ``softmax_bwd`` (reads P and dP, writes dS), ``dq`` (dS K) and ``dk`` (dS^T Q): seven
    score-sized passes and ``8 seq^2 head_dim`` FLOPs per head.

    ``peak_bytes``: the forward pass holds ``live_scores`` score-sized tensors at once (two is the least
    an unfused chain can do: an elementwise kernel's input and its output; an eager framework may hold
    more) and the mask; the backward pass holds P, dP and dS with dV. ``saved_bytes``: P, kept for the
    backward pass. K and V are read once per KV head (grouped-query attention shares them).
    """
    seq, d, h, hkv, batch = _shape(seq, head_dim, heads, kv_heads, batch)
    _direction(direction)
    live = number("live_scores", live_scores, integer=True)
    b = dtype_bytes(dtype)
    q = batch * h * seq * d * b  # Q, O, dQ, dO, each
    kv = batch * hkv * seq * d * b  # K or V, dK or dV, each
    s = batch * h * seq * seq * b  # one score-sized tensor
    mask = seq * seq * 1.0 if causal else 0.0  # a boolean seq x seq mask, broadcast over heads
    mm = 2.0 * batch * h * seq * seq * d  # one of the score-sized matmuls
    shape = dict(count=1, math=dtype)
    if direction == "forward":
        ops = [Op.build("scores", "matmul", flops={"attention": mm}, reads={"activations": q + kv},
                        writes={"scores": s}, m=seq, n=seq, k=d, **shape)]
        if causal:
            ops.append(Op.build("mask", "elementwise", reads={"scores": s + mask}, writes={"scores": s}, **shape))
        ops += [Op.build("softmax", "elementwise", reads={"scores": s}, writes={"scores": s}, **shape),
                Op.build("pv", "matmul", flops={"attention": mm}, reads={"scores": s, "activations": kv},
                         writes={"activations": q}, m=seq, n=d, k=seq, **shape)]
        return AttentionIO("explicit attention, forward", tuple(ops), _out(live * s + mask), _out(s))
    ops = [Op.build("dv", "matmul", flops={"attention": mm}, reads={"scores": s, "activations": q},
                    writes={"activations": kv}, m=seq, n=d, k=seq, **shape),
           Op.build("dp", "matmul", flops={"attention": mm}, reads={"activations": q + kv}, writes={"scores": s},
                    m=seq, n=seq, k=d, **shape),
           Op.build("softmax_bwd", "elementwise", reads={"scores": 2 * s}, writes={"scores": s}, **shape),
           Op.build("dq", "matmul", flops={"attention": mm}, reads={"scores": s, "activations": kv},
                    writes={"activations": q}, m=seq, n=d, k=seq, **shape),
           Op.build("dk", "matmul", flops={"attention": mm}, reads={"scores": s, "activations": q},
                    writes={"activations": kv}, m=seq, n=d, k=seq, **shape)]
    # at the softmax's backward P, dP and dS are alive, and dV is already written
    return AttentionIO("explicit attention, backward", tuple(ops), _out(3 * s + kv), 0.0)


def flash_block(on_chip, head_dim, dtype: str = "bf16"):
    """Rows per block of a flash kernel whose on-chip memory holds a block of Q, of the output
    accumulator, of K and of V, each ``block x head_dim``: ``floor(on_chip / (4 head_dim b))``.

    Dao et al. size their key blocks the same way, ``ceil(M / 4d)`` for ``M`` elements of SRAM. With
    an H100's 228 KiB and a head of 128 in bf16: 228 rows. An error if not even one row fits.
    """
    on_chip = number("on_chip", on_chip)
    d = number("head_dim", head_dim, integer=True)
    block = np.floor(on_chip / (4 * d * dtype_bytes(dtype)))
    if np.any(block < 1):
        raise ValueError(f"on_chip {on_chip!r} bytes cannot hold one row of Q, O, K and V at head_dim {d!r} "
                         f"({4 * d * dtype_bytes(dtype):g} bytes); give at least that much")
    return _out(block)


def causal_block_pairs(seq: ArrayLike, block: ArrayLike):
    """(query row, key) pairs a causal flash kernel computes when it skips the blocks above the
    diagonal: square blocks of ``block`` rows, every block on the diagonal computed whole.

    With ``T = ceil(seq / block)`` blocks, the first ``T - 1`` rows of blocks see ``block^2 T (T-1)/2``
    pairs and the last (perhaps partial) one sees every key: ``(seq - (T-1) block) seq``. The exact
    triangle is ``seq (seq + 1) / 2``; the excess is the upper half of the diagonal blocks.
    """
    seq = number("seq", seq, integer=True)
    block = number("block", block, integer=True)
    broadcast(seq=seq, block=block)
    bl = np.minimum(block, seq)
    t = _ceil_div(seq, bl)
    return _out(bl * bl * t * (t - 1) / 2 + (seq - (t - 1) * bl) * seq)


def flash_attention(seq, head_dim, heads, *, on_chip, kv_heads=None, batch=1, dtype: str = "bf16",
                    causal: bool = True, direction: str = "forward", training: bool = False, l2=None) -> AttentionIO:
    """Attention fused into one kernel that never writes a score to HBM (chapter 4; Dao et al. 2022).

    The loop order of FlashAttention-2 (Dao 2023): each block of :func:`flash_block` query rows is
    loaded once, the keys and values stream past it block by block while an online softmax keeps a
    running maximum and sum per row, and the output is written once. So Q is read once, O written once,
    and K and V read once per block of queries: ``ceil(seq / block)`` times for each query head, as
    Dao et al. count it. ``l2``, the bytes of a cache the thread blocks share, changes that: when one
    KV head's keys and values fit in it, the blocks working on that head (and on the query heads of its
    GQA group) find them there, and they cross the HBM boundary once per KV head. Under ``causal`` the
    blocks above the diagonal are skipped, which skips their FLOPs and their K and V traffic
    (:func:`causal_block_pairs`).

    Forward: ``4 d`` FLOPs per computed (query, key) pair per head. ``training`` writes the fp32
    log-sum-exp of every row and keeps it with O for the backward pass (``saved_bytes``); inference
    writes neither. ``peak_bytes`` is O (and the log-sum-exp); backward, the gradients with the fp32 dQ.

    Backward (FlashAttention-2's Algorithm 2): a small kernel forms ``D = rowsum(dO * O)``; the main
    kernel loops over blocks of keys, loads K, V once, streams Q, dO, the log-sum-exp and D block by
    block, recomputes the scores and probabilities from them (the forward pass stored none), and adds
    into an fp32 dQ in HBM (read and written per block); a last kernel converts dQ to ``dtype``. That
    is ``10 d`` FLOPs per computed pair per head (the forward's score product done again, and four
    products of the backward) against the explicit backward's ``8 d``.
    """
    seq, d, h, hkv, batch = _shape(seq, head_dim, heads, kv_heads, batch)
    _direction(direction)
    b = dtype_bytes(dtype)
    block = flash_block(on_chip, d, dtype)
    bl = np.minimum(block, seq)
    blocks = _ceil_div(seq, bl)  # blocks of rows (and of keys) per head
    pairs = causal_block_pairs(seq, bl) if causal else seq * seq  # pairs computed per head
    # key blocks visited per block of rows, on average: the K and V traffic scales with it
    visited = pairs / (bl * seq) if causal else blocks
    q = batch * h * seq * d * b  # Q, O, dQ, dO, each
    kv = batch * hkv * seq * d * b  # K or V, dK or dV, each
    kv_stream = batch * h * visited * seq * d * b  # K (or V) as the query blocks stream it, per query head
    if l2 is not None:
        l2 = number("l2", l2)
        kv_stream = np.where(2 * seq * d * b <= l2, kv, kv_stream)  # one head's K and V stay in the L2
    stat = batch * h * seq * _STAT_BYTES  # one fp32 number per row and head
    shape = dict(count=1, math=dtype, queries=seq, keys=seq)
    if direction == "forward":
        lse = stat if training else 0.0
        op = Op.build("flash", "attention", flops={"attention": 4.0 * batch * h * pairs * d},
                      reads={"activations": q + 2 * kv_stream},
                      writes={"activations": q, **({"statistics": lse} if training else {})}, **shape)
        return AttentionIO(f"flash attention, forward ({'training' if training else 'inference'})", (op,),
                           _out(q + lse + 0 * bl), _out(q + lse + 0 * bl if training else 0 * q * bl), _out(bl))
    dq32 = batch * h * seq * d * _STAT_BYTES  # dQ accumulated in fp32
    # the query side streams past every key block it meets: the transpose of the forward's count
    passes = visited
    if l2 is not None:  # one head's Q, dO, fp32 dQ, log-sum-exp and D stay in the L2: each crosses once
        passes = np.where(seq * d * (2 * b + _STAT_BYTES) + 2 * seq * _STAT_BYTES <= l2, 1.0, visited)
    q_stream = batch * h * passes * seq * d * b
    stat_stream = batch * h * passes * seq * _STAT_BYTES
    dq_stream = batch * h * passes * seq * d * _STAT_BYTES
    ops = (Op.build("flash_bwd_pre", "elementwise", reads={"activations": 2 * q}, writes={"statistics": stat},
                    count=1, math=dtype),
           Op.build("flash_bwd", "attention", flops={"attention": 10.0 * batch * h * pairs * d},
                    reads={"activations": 2 * kv * h / hkv + 2 * q_stream, "statistics": 2 * stat_stream + dq_stream},
                    writes={"activations": 2 * kv * h / hkv, "statistics": dq_stream}, **shape),
           Op.build("flash_bwd_post", "elementwise", reads={"statistics": dq32}, writes={"activations": q},
                    count=1, math=dtype))
    # per query head, dK and dV are written before a GQA group's are summed (counted in the kernel above)
    # at the end: the fp32 dQ, D, and the gradients dQ, dK and dV themselves
    return AttentionIO("flash attention, backward", ops, _out(dq32 + stat + q + 2 * kv + 0 * bl), 0.0, _out(bl))


def dao_forward_accesses(seq, head_dim, sram):
    """HBM accesses (elements read plus written) of Dao et al.'s Algorithm 1 for one head, non-causal.

    ``sram`` is the paper's ``M``, in elements. Blocks of ``B_c = ceil(M / 4d)`` keys and
    ``B_r = min(B_c, d)`` queries; O, l and m are initialised in HBM (``N d + 2N`` writes); the outer
    loop reads each block of K and V once (``2 N d`` in all); for each of the ``T_c = ceil(N / B_c)``
    key blocks the inner loop reads every block of Q, O, l and m and writes O, l and m back
    (``3 N d + 4 N``). Total ``3 N d + 2 N + T_c (3 N d + 4 N)``, which is Theta(N^2 d^2 / M) for
    ``d <= M <= N d``: their Theorem 2.
    """
    n = number("seq", seq, integer=True)
    d = number("head_dim", head_dim, integer=True)
    m = number("sram", sram, integer=True)
    broadcast(seq=n, head_dim=d, sram=m)
    if np.any(np.asarray(m) < np.asarray(d)):
        raise ValueError(f"sram must be at least head_dim elements (the theorem asks d <= M <= N d); "
                         f"got sram {m!r} and head_dim {d!r}")
    bc = _ceil_div(m, 4 * np.asarray(d))
    tc = _ceil_div(n, bc)
    return _out(3 * n * d + 2 * n + tc * (3 * n * d + 4 * n))


# ---------------------------------------------------------------------------------------------
# Decode and the explicit form's crossing with the weights


def decode_attention(context, head_dim, heads, *, kv_heads=None, batch: ArrayLike=1, dtype: str = "bf16",
                     kv_dtype: str | None = None, splits: int = 1) -> AttentionIO:
    """One new token per sequence attending to ``context`` cached tokens (chapter 4; chapter 5 on).

    The kernel reads every cached key and value once (``2 context kv_heads head_dim`` numbers per
    sequence) and does ``4 context head_dim`` FLOPs per query head: the intensity is about the GQA
    group size ``heads / kv_heads`` in bf16, whatever the tiling, because no cached number is used by
    more than the group's queries. ``splits`` > 1 is flash-decoding: the keys are cut into that many
    chunks processed in parallel, each writing a partial output and log-sum-exp in fp32 that a small
    kernel combines; it adds a little traffic and buys parallelism, not intensity.
    """
    ctx = number("context", context, integer=True)
    _, d, h, hkv, batch = _shape(1, head_dim, heads, kv_heads, batch)
    broadcast(context=ctx, batch=batch)
    splits = number("splits", splits, integer=True)
    b, kvb = dtype_bytes(dtype), dtype_bytes(kv_dtype or dtype)
    cache = 2 * batch * hkv * ctx * d * kvb
    q = batch * h * d * b
    partial = batch * h * splits * (d + 1) * _STAT_BYTES if splits > 1 else 0.0
    ops = [Op.build("decode_attention", "attention", flops={"attention": 4.0 * batch * h * ctx * d},
                    reads={"kv_cache": cache, "activations": q},
                    writes={"statistics": partial} if splits > 1 else {"activations": q},
                    count=1, math=dtype, queries=1, keys=ctx)]
    if splits > 1:
        ops.append(Op.build("combine", "elementwise", reads={"statistics": partial}, writes={"activations": q},
                            count=1, math=dtype))
    return AttentionIO(f"decode attention ({int(splits)} split{'s' if splits > 1 else ''})", tuple(ops),
                       _out(q + partial), 0.0)


def score_parity_tokens(model: Model | str, *, causal: bool = True, dtype: str = "bf16") -> float:
    """Sequence length at which explicit attention's score traffic in a prefill, over every layer,
    equals the traffic of reading the weights once (chapter 4).

    Score traffic is ``p h b S^2`` per layer for ``p`` score-sized passes (four without the mask, six
    with it, :func:`explicit_attention`), and the weights are ``b N``: ``S_mem* = sqrt(N / (p h L))``.
    For Llama 3 8B with the causal mask, about 1,100 tokens.
    """
    m = load_model(model)
    per_layer = explicit_attention(1, m.head_dim, m.num_heads, kv_heads=m.num_kv_heads, dtype=dtype,
                                   causal=causal).part("scores").bytes
    mask = 1.0 if causal else 0.0  # the one-byte mask is read once, not per head: not a score pass
    coefficient = (per_layer - mask) * m.num_layers
    return float(np.sqrt(dtype_bytes(dtype) * m.params / coefficient))


# ---------------------------------------------------------------------------------------------
# Online softmax, as a reference a reader can run


def online_attention(q, k, v, block: int):
    """Attention of one head computed the way a flash kernel does: keys and values in blocks of
    ``block``, a running maximum ``m`` and sum ``l`` per query row, the partial output rescaled by
    ``exp(m_old - m_new)`` whenever the maximum grows (Milakov and Gimelshein's online softmax), and
    divided by ``l`` at the end. Never forms the full score matrix. numpy arrays ``(S, d)``; returns
    ``softmax(q k^T / sqrt(d)) v`` (no mask). For reading and testing, not for speed.
    """
    q, k, v = (np.asarray(x, dtype=float) for x in (q, k, v))
    if q.ndim != 2 or k.shape != v.shape or k.ndim != 2 or q.shape[1] != k.shape[1]:
        raise ValueError(f"q, k and v must be 2-d arrays (tokens x head_dim) with one head_dim and k, v of one shape; "
                         f"got q {q.shape}, k {k.shape}, v {v.shape}")
    block = int(number("block", block, integer=True))
    m = np.full(q.shape[0], -np.inf)
    l = np.zeros(q.shape[0])
    o = np.zeros((q.shape[0], v.shape[1]))
    scale = 1 / np.sqrt(q.shape[1])
    for j in range(0, k.shape[0], block):
        s = (q @ k[j:j + block].T) * scale  # one block of scores, on chip
        m_new = np.maximum(m, s.max(axis=1))
        correction = np.exp(m - m_new)  # how much the old partial sums shrink under the new maximum
        p = np.exp(s - m_new[:, None])
        l = l * correction + p.sum(axis=1)
        o = o * correction[:, None] + p @ v[j:j + block]
        m = m_new
    return o / l[:, None]


# ---------------------------------------------------------------------------------------------
# What the kernels' authors reported, kept with their sources so the chapter can check them


class Reported(NamedTuple):
    """A published figure: ``value`` (and ``high`` for a range) in ``unit`` ('FLOP/s', 'of peak' for
    a fraction of the GPU's peak, 'x' for a speedup), measured on catalog GPU ``hardware`` in
    ``dtype``; ``source`` is a key of the book's references.bib and ``what`` says what was timed."""

    kernel: str
    what: str
    value: float
    unit: str
    source: str
    hardware: str | None = None
    dtype: str = "bf16"
    high: float | None = None


PUBLISHED = (
    Reported("FlashAttention", "GPT-2 training, 1k tokens", 3.0, "x",
             "dao2022flashattention"),
    Reported("online softmax", "softmax alone", 1.3, "x", "milakov2018online"),
    Reported("FlashAttention-2", "attention, forward and backward", 0.50, "of peak", "dao2023flashattention2",
             "a100-sxm-80gb", "fp16", high=0.73),
    Reported("FlashAttention-2", "GPT training, end to end", 225e12, "FLOP/s", "dao2023flashattention2",
             "a100-sxm-80gb", "bf16"),
    Reported("FlashAttention-2", "attention, per FlashAttention-3", 0.35, "of peak", "shah2024flashattention3", "h100-sxm", "fp16"),
    Reported("FlashAttention-3", "attention forward", 740e12, "FLOP/s", "shah2024flashattention3", "h100-sxm",
             "fp16"),
    Reported("FlashAttention-3", "attention forward", 1.2e15, "FLOP/s", "shah2024flashattention3", "h100-sxm",
             "fp8"),
    Reported("Flash-Decoding", "long-context generation", 8.0, "x", "dao2023flashdecoding"),
)
"""The throughput the kernels' papers and posts report, best cases ("up to"), each checked against its
abstract or post; a range where the paper gives one."""


# ---------------------------------------------------------------------------------------------
# Chapter 4's quoted figures, as functions (the notebook only calls, picks and glues)


def tile_bytes(tile, dtype: str = "bf16"):
    """On-chip bytes of a square-tiled matmul's working set (chapter 4): a ``tile x tile`` block of A, of B
    and of the output, ``3 t^2 b``."""
    t = number("tile", tile)
    return _out(3 * t**2 * dtype_bytes(dtype))


__all__ += ["tile_bytes"]


def score_bytes(seq, heads, *, batch=1, dtype: str = "bf16"):
    """Bytes of one score-sized tensor of attention (chapter 4): ``batch x heads x seq^2 x b``."""
    seq, heads = number("seq", seq, integer=True), number("heads", heads, integer=True)
    return _out(number("batch", batch, integer=True) * heads * seq * seq * dtype_bytes(dtype))


__all__ += ["score_bytes"]


def kv_head_bytes(seq, head_dim, dtype: str = "bf16"):
    """Bytes of one KV head's keys and values over ``seq`` tokens (chapter 4): ``2 seq d b``."""
    seq, d = number("seq", seq, integer=True), number("head_dim", head_dim, integer=True)
    return _out(2 * seq * d * dtype_bytes(dtype))


__all__ += ["kv_head_bytes"]


def on_chip_elements(on_chip, dtype: str = "bf16"):
    """Numbers of ``dtype`` an on-chip memory of ``on_chip`` bytes holds (chapter 4: Dao et al.'s ``M``)."""
    return _out(number("on_chip", on_chip) / dtype_bytes(dtype))


__all__ += ["on_chip_elements"]


def dao_factor(head_dim, on_chip, dtype: str = "bf16"):
    """``d^2 / M`` (chapter 4): by how much Dao et al.'s flash traffic ``N^2 d^2 / M`` falls short of the
    explicit form's ``N^2`` (less than 1: flash moves fewer bytes)."""
    d = number("head_dim", head_dim, integer=True)
    return _out(d**2 / on_chip_elements(on_chip, dtype))


__all__ += ["dao_factor"]


def dao_crossover_on_chip(head_dim, dtype: str = "bf16"):
    """The on-chip bytes below which a causal flash kernel moves more than the explicit chain at long
    sequences (chapter 4's exercise): per head flash reads K and V about ``S / (2 B_r)`` times with
    ``B_r = M / (4 d b)``, ``4 S^2 d^2 b^2 / M`` bytes, against the explicit chain's six score passes,
    ``6 S^2 b``; they meet at ``M = (2/3) d^2 b``."""
    d = number("head_dim", head_dim, integer=True)
    return _out(2 / 3 * d**2 * dtype_bytes(dtype))


__all__ += ["dao_crossover_on_chip"]


def query_blocks(seq, block):
    """Blocks of ``block`` query rows a flash kernel cuts ``seq`` tokens into (chapter 4): ``ceil(seq / block)``."""
    seq, block = number("seq", seq, integer=True), number("block", block, integer=True)
    return _out(_ceil_div(seq, block))


__all__ += ["query_blocks"]


def causal_block_excess(seq, block):
    """The pairs a causal flash kernel computes beyond the exact triangle, as a fraction of it (chapter 4):
    :func:`causal_block_pairs` over ``seq (seq + 1) / 2``, less one."""
    seq = number("seq", seq, integer=True)
    return _out(causal_block_pairs(seq, block) / (seq * (seq + 1) / 2) - 1)


__all__ += ["causal_block_excess"]


def flash_on_chip_bytes(rows, head_dim, dtype: str = "bf16"):
    """On-chip bytes a flash kernel needs for blocks of ``rows`` rows of Q, O, K and V (chapter 4), the
    inverse of :func:`flash_block`: ``4 rows d b``."""
    rows, d = number("rows", rows, integer=True), number("head_dim", head_dim, integer=True)
    return _out(4 * rows * d * dtype_bytes(dtype))


__all__ += ["flash_on_chip_bytes"]


def reference_attention(q, k, v):
    """Softmax attention of one head computed the plain way (chapter 4), the whole score matrix at
    once: ``softmax(q k^T / sqrt(d)) v``, the maximum subtracted per row; what :func:`online_attention`
    is checked against."""
    q, k, v = (np.asarray(x, dtype=float) for x in (q, k, v))
    if q.ndim != 2 or k.shape != v.shape or k.ndim != 2 or q.shape[1] != k.shape[1]:
        raise ValueError(f"q, k and v must be 2-d arrays (tokens x head_dim) with one head_dim and k, v of one shape; "
                         f"got q {q.shape}, k {k.shape}, v {v.shape}")
    s = q @ k.T / np.sqrt(q.shape[1])
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v


__all__ += ["reference_attention"]


def agreement_digits(result: ArrayLike, exact: ArrayLike) -> float:
    """Decimal digits two arrays agree to (chapter 4): ``-log10(max |result - exact| / max |exact|)``."""
    result, exact = np.asarray(result, dtype=float), np.asarray(exact, dtype=float)
    if result.shape != exact.shape:
        raise ValueError(f"result and exact must have one shape, got {result.shape} and {exact.shape}")
    return float(-np.log10(np.abs(result - exact).max() / np.abs(exact).max()))


__all__ += ["agreement_digits"]


def attention_pass(kind: str, seq, head_dim, heads, hardware, *, kv_heads=None, live_scores: int = 3) -> AttentionIO:
    """A forward attention pass as chapter 4 times it on ``hardware``: ``'flash'`` with the SM's shared
    memory on chip and the L2 shared between blocks, or ``'explicit'`` holding ``live_scores`` score
    tensors at once (three: what an eager framework's chain holds)."""
    from roofline.core.hardware import get_hardware

    h = get_hardware(hardware)
    if kind == "flash":
        return flash_attention(seq, head_dim, heads, kv_heads=kv_heads, on_chip=h.shared_memory_per_sm, l2=h.l2_bytes)
    if kind == "explicit":
        return explicit_attention(seq, head_dim, heads, kv_heads=kv_heads, live_scores=live_scores)
    raise ValueError(f"kind must be 'flash' or 'explicit', got {kind!r}")


__all__ += ["attention_pass"]


def attention_sweep(seqs, head_dim, heads, hardware) -> dict:
    """Chapter 4's measured sweep, predicted: for ``'explicit'`` and ``'flash'`` (:func:`attention_pass`),
    lists over ``seqs`` of the HBM ``bytes``, the ``peak`` bytes allocated, the kernel-rule ``time``
    on ``hardware`` and the ``intensity``."""
    from roofline.core.roof import predict

    out = {}
    for kind in ("explicit", "flash"):
        rows = {"bytes": [], "peak": [], "time": [], "intensity": []}
        for n in seqs:
            io = attention_pass(kind, n, head_dim, heads, hardware)
            rows["bytes"].append(io.bytes)
            rows["peak"].append(io.peak_bytes)
            rows["time"].append(predict(io.breakdown, hardware, timing="kernel").time)
            rows["intensity"].append(io.intensity)
        out[kind] = rows
    return out


__all__ += ["attention_sweep"]


def measured_flops_per_s(io: AttentionIO, seconds: float) -> float:
    """FLOP/s a measured pass sustained (chapter 4): the pass's counted FLOPs over its measured ``seconds``."""
    if not isinstance(io, AttentionIO):
        raise TypeError(f"io must be an AttentionIO, got {type(io).__name__}")
    return io.flops / number("seconds", seconds)


__all__ += ["measured_flops_per_s"]


def score_passes(io: AttentionIO, seq, heads, *, batch=1, dtype: str = "bf16") -> float:
    """Score-sized passes over HBM an attention pass counts (chapter 4): its ``scores`` traffic, the
    one-byte causal mask (``seq^2`` bytes, when there) left out, over one score tensor's bytes."""
    if not isinstance(io, AttentionIO):
        raise TypeError(f"io must be an AttentionIO, got {type(io).__name__}")
    seq = number("seq", seq, integer=True)
    mask = seq * seq if any(op.name == "mask" for op in io.ops) else 0.0
    return (io.part("scores").bytes - mask) / score_bytes(seq, heads, batch=batch, dtype=dtype)


__all__ += ["score_passes"]


def implied_score_passes(seconds, bandwidth, seq, heads, *, batch=1, dtype: str = "bf16") -> float:
    """How many score-sized passes over HBM ``seconds`` allow at ``bandwidth`` (chapter 4: the measured
    explicit chain's time read as traffic)."""
    return number("seconds", seconds) * number("bandwidth", bandwidth) / score_bytes(seq, heads, batch=batch, dtype=dtype)


__all__ += ["implied_score_passes"]


def params_per_head_layer(model: Model | str) -> float:
    """Parameters per attention head and layer, ``N / (h L)`` (chapter 4): the square of
    :func:`score_parity_tokens` grows with it."""
    m = load_model(model)
    return m.params / (m.num_heads * m.num_layers)


__all__ += ["params_per_head_layer"]


def decode_work_items(kv_heads, *, splits: int = 1, batch=1):
    """Independent pieces of work a decode-attention kernel has (chapter 4): one per KV head, sequence and
    split of the keys, ``batch x kv_heads x splits``."""
    kv_heads = number("kv_heads", kv_heads, integer=True)
    return _out(number("batch", batch, integer=True) * kv_heads * number("splits", splits, integer=True))


__all__ += ["decode_work_items"]


def smallest_winning_on_chip(seq, head_dim, heads, *, kv_heads=None, sizes: ArrayLike=None) -> float:
    """The smallest on-chip memory (bytes, from ``sizes``: 8 KiB to 1 MiB in steps of 1 KiB by default) at
    which a flash forward pass moves fewer HBM bytes than the explicit one (chapter 4's exercise);
    None if none of them does."""
    explicit = explicit_attention(seq, head_dim, heads, kv_heads=kv_heads).bytes
    sizes = np.arange(8, 1025) * 2**10 if sizes is None else np.asarray(sizes)
    for m in sizes:
        if flash_attention(seq, head_dim, heads, kv_heads=kv_heads, on_chip=float(m)).bytes < explicit:
            return float(m)
    return None


__all__ += ["smallest_winning_on_chip"]


class DecodeAttentionShare(NamedTuple):
    """Decode attention against the weights at one batch and context (chapter 4's exercise)."""

    attention_time: float  # seconds, every layer, kernel rule
    weights_time: float  # seconds to stream the bf16 weights once
    share: float  # attention_time / weights_time
    crossover_batch: int  # the batch from which attention takes longer than the weights


def decode_attention_share(model: Model | str, hardware, context, batch) -> DecodeAttentionShare:
    """Decode attention of ``batch`` sequences of ``context`` tokens, every layer, timed by the kernel rule
    on ``hardware``, against streaming the bf16 weights once at HBM bandwidth (chapter 4): the two times,
    their ratio, and the batch (rounded up) at which one sequence's attention time, times the batch,
    reaches the weights' time."""
    from roofline.core.hardware import get_hardware
    from roofline.core.roof import predict

    m, h = load_model(model), get_hardware(hardware)
    times = [m.num_layers * predict(decode_attention(context, m.head_dim, m.num_heads, kv_heads=m.num_kv_heads,
                                                     batch=b).breakdown, h, timing="kernel").time
             for b in (batch, 1)]
    weights = 2 * m.params / h.hbm_bandwidth
    return DecodeAttentionShare(times[0], weights, times[0] / weights, int(np.ceil(weights / times[1])))


__all__ += ["DecodeAttentionShare", "decode_attention_share"]
