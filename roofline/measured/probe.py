"""Measure the reader's own machine: memory bandwidth and matmul throughput (appendix "The roofline
meets a real GPU").

:func:`cpu_record` times numpy on the CPU; :func:`gpu_record` times PyTorch on a CUDA GPU when one is
present (torch is imported only there and is never a dependency of the package). Both return a dict
in the format of the shipped H200 file (``roofline/data/measured/README.md``), so
:func:`roofline.measured.parse_measurement`, :func:`~roofline.measured.measured_roof` and the plots
take either. :func:`measure` does both steps and returns the typed record.

Method, on both paths: random data (never zeros, which some hardware moves or multiplies faster),
buffers several times the last-level cache so that bytes come from memory rather than cache, weights
rotated over several copies for the same reason, warm-up calls first, then the median of the timed
calls (the best is kept beside it). Sizes are parameters; ``progress`` receives one line per step
(``print`` by default, ``None`` for silence).
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from roofline.core.checks import number
from roofline.core.records import decode_attention_bytes, parse_measurement

__all__ = ["cpu_record", "gpu_record", "measure", "gpu_available", "last_level_cache_bytes", "blas_info",
           "decode_attention_sweep", "DEFAULT_SHAPES", "DEFAULT_DECODE_ATTENTION", "DEFAULT_ATTENTION_HEADS"]

# (m, n, k): a matrix-vector product up to square products, n = k as in the H200 sweep
DEFAULT_SHAPES = tuple((m, 1024, 1024) for m in (1, 4, 16, 64, 256, 1024))
# (batch, context) of the decode attention sweep: the shipped H200 record's decode steps span these
DEFAULT_DECODE_ATTENTION = tuple((b, c) for b in (1, 2, 4, 8, 16, 32, 64, 128, 256)
                                 for c in (512, 2048, 8192, 32768, 131072))
# (query heads, KV heads, head dimension) of that sweep: Llama 3 8B's attention
DEFAULT_ATTENTION_HEADS = (32, 8, 128)

Progress = Callable[[str], None] | None


def _say(progress: Progress, text: str) -> None:
    if progress is not None:
        progress(text)


def _print(text: str) -> None:
    print(text, flush=True)


def last_level_cache_bytes() -> int | None:
    """The largest CPU cache Linux reports (``/sys/devices/system/cpu/cpu0/cache``), or None."""
    folder = Path("/sys/devices/system/cpu/cpu0/cache")
    sizes = []
    for index in folder.glob("index*"):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:].upper(), 1)
        digits = text[:-1] if text[-1:].isalpha() else text
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes) if sizes else None


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def blas_info() -> str:
    """The BLAS numpy was built against, from ``numpy.show_config``."""
    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg.get("Build Dependencies", {}).get("blas", {})
        return " ".join(str(blas.get(k, "")) for k in ("name", "version")).strip() or "unknown"
    except Exception:  # older numpy prints instead of returning
        return "unknown"


def _env_common() -> dict:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def _time(fn, repeats: int, warmup: int, clock=time.perf_counter) -> tuple[float, float]:
    """Median and best seconds of ``fn`` over ``repeats`` timed calls after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return statistics.median(times), min(times)


def _check_sizes(buffer_bytes, shapes, repeats, warmup):
    buffer_bytes = int(number("buffer_bytes", buffer_bytes, integer=True))
    repeats = int(number("repeats", repeats, integer=True))
    warmup = int(number("warmup", warmup, integer=True, strict=False))
    shapes = [tuple(s) for s in shapes]
    if not shapes:
        raise ValueError("shapes must name at least one (m, n, k) product")
    for s in shapes:
        if len(s) != 3:
            raise ValueError(f"shapes must be (m, n, k) triples, got {s!r}")
        for name, v in zip("mnk", s):
            number(f"shapes {name}", v, integer=True)
    return buffer_bytes, [tuple(map(int, s)) for s in shapes], repeats, warmup


def _gemm_entry(m, n, k, bytes_per, seconds, best, dtype, out_bytes=None):
    flops = 2 * m * n * k
    min_bytes = bytes_per * (m * k + k * n) + (out_bytes or bytes_per) * m * n
    return {"m": m, "n": n, "k": k, "dtype": dtype, "flops": flops, "min_bytes": min_bytes,
            "intensity": flops / min_bytes, "seconds": seconds, "flops_per_s": flops / seconds,
            "best_flops_per_s": flops / best}


def cpu_record(*, buffer_bytes: int | None = None, shapes: Sequence[tuple[int, int, int]] = DEFAULT_SHAPES,
               repeats: int = 5, warmup: int = 2, dtype: str = "fp32", seed: int = 0,
               progress: Progress = _print) -> dict:
    """Measure this CPU with numpy: copy, read and write bandwidth, then one matmul per shape.

    ``buffer_bytes`` defaults to four times the last-level cache (64 MiB if it cannot be read). Each
    matmul's weights are rotated over enough copies to fill ``buffer_bytes``, so small products read
    their weights from memory, not from cache. ``read`` is a BLAS matrix-vector product over the
    buffer (every thread reads) or ``numpy.sum``, whichever is faster; ``copy`` counts bytes read plus bytes written.
    """
    np_dtype = {"fp32": np.float32, "fp64": np.float64}.get(dtype)
    if np_dtype is None:
        raise ValueError(f"dtype must be 'fp32' or 'fp64' on the CPU, got {dtype!r}")
    llc = last_level_cache_bytes()
    if buffer_bytes is None:
        buffer_bytes = 4 * llc if llc else 64 * 2**20
    buffer_bytes, shapes, repeats, warmup = _check_sizes(buffer_bytes, shapes, repeats, warmup)
    rng = np.random.default_rng(seed)
    item = np.dtype(np_dtype).itemsize
    started = time.perf_counter()
    record = {
        "about": "Measured with roofline.measured.probe.cpu_record (numpy on the CPU): medians after warm-up, "
                 "random data, buffers and rotated weights several times the last-level cache.",
        "env": {**_env_common(), "cpu": _cpu_name(), "threads": os.cpu_count(), "numpy": np.__version__,
                "blas": blas_info(), "llc_bytes": llc, "buffer_bytes": buffer_bytes},
        "notes": {"read": "the faster of a BLAS matrix-vector product over the buffer (all threads) and numpy.sum",
                  "copy": "numpy.copyto between two buffers; bytes = read + written",
                  "gemm_per_call": "one numpy matmul per timed call, weights rotated over the buffer size"},
    }
    cols = 1024
    rows = max(1, buffer_bytes // (item * cols))
    src = rng.standard_normal((rows, cols), dtype=np_dtype)
    dst = np.empty_like(src)
    vec = rng.standard_normal(cols, dtype=np_dtype)
    nbytes = src.nbytes
    _say(progress, f"probe: bandwidth over {nbytes / 2**20:,.0f} MiB buffers")
    bw = {}
    for name, fns, moved in (("copy", [lambda: np.copyto(dst, src)], 2 * nbytes),
                             ("read", [lambda: src @ vec, src.sum], nbytes),
                             ("write", [lambda: dst.fill(1.5)], nbytes)):
        med, best = min(_time(fn, repeats, warmup) for fn in fns)
        bw[name] = {"bytes": moved, "seconds": med, "bytes_per_s": moved / med, "best_bytes_per_s": moved / best}
        _say(progress, f"probe: {name} {moved / med / 1e9:,.1f} GB/s")
    record["bandwidth"] = bw
    del dst
    gemms = []
    for i, (m, n, k) in enumerate(shapes, 1):
        weight_bytes = k * n * item
        copies = max(1, min(64, math.ceil(buffer_bytes / weight_bytes)))
        weights = [rng.standard_normal((k, n), dtype=np_dtype) for _ in range(copies)]
        a = rng.standard_normal((m, k), dtype=np_dtype)
        out = np.empty((m, n), dtype=np_dtype)
        turn = iter(range(1 << 62))

        def call():
            np.matmul(a, weights[next(turn) % copies], out=out)

        med, best = _time(call, repeats, warmup)
        gemms.append(_gemm_entry(m, n, k, item, med, best, dtype))
        _say(progress, f"probe: matmul {i}/{len(shapes)} m={m} n={n} k={k}: {2 * m * n * k / med / 1e9:,.1f} GFLOP/s")
        del weights
    record["gemm_per_call"] = gemms
    record["env"]["seconds_measuring"] = time.perf_counter() - started
    return record


def _check_decode_grid(grid, heads):
    grid = [tuple(g) for g in grid]
    for g in grid:
        if len(g) != 2:
            raise ValueError(f"decode_attention must be (batch, context) pairs, got {g!r}")
        for name, v in zip(("batch", "context"), g):
            number(f"decode_attention {name}", v, integer=True)
    heads = tuple(heads)
    if len(heads) != 3:
        raise ValueError(f"attention_heads must be (query heads, KV heads, head dimension), got {heads!r}")
    for name, v in zip(("query heads", "KV heads", "head dimension"), heads):
        number(f"attention_heads {name}", v, integer=True)
    if heads[0] % heads[1]:
        raise ValueError(f"attention_heads: {heads[0]} query heads do not share {heads[1]} KV heads evenly")
    return [tuple(map(int, g)) for g in grid], tuple(map(int, heads))


def decode_attention_sweep(torch, device, timed, *, grid=DEFAULT_DECODE_ATTENTION, heads=DEFAULT_ATTENTION_HEADS,
                           cache_bytes: int = 0, memory_limit: float = math.inf, calls: int = 16, seed: int = 0,
                           progress: Progress = _print) -> list[dict]:
    """Time the attention kernel of a decode step alone, for each ``(batch, context)`` of ``grid``:
    ``batch`` sequences of one query each, ``heads = (query heads, KV heads, head dim)``, through PyTorch's
    ``scaled_dot_product_attention`` with grouped queries (the kernel a PyTorch decode step runs).

    The keys and values are rotated over copies filling at least ``cache_bytes`` (four times the L2 on
    a GPU), so that every call reads them from memory; ``timed(fn)`` returns the median and best seconds
    of ``fn``, which runs ``calls`` kernels back to back (the per-kernel time is the median over
    ``calls``, launches queued behind the running kernel). Shapes whose copies would pass
    ``memory_limit`` bytes are left out, and said so. Returns the entries of a record's
    ``decode_attention`` table.
    """
    grid, (h, hkv, d) = _check_decode_grid(grid, heads)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    gen = torch.Generator(device=device).manual_seed(seed)
    out = []
    for i, (b, c) in enumerate(grid, 1):
        kv_bytes = 2 * 2 * b * hkv * c * d
        copies = max(1, min(64, math.ceil(cache_bytes / kv_bytes)))
        if copies * kv_bytes > memory_limit:
            _say(progress, f"probe: decode attention {i}/{len(grid)} batch={b} context={c}: left out "
                           f"({copies * kv_bytes / 1e9:,.1f} GB of keys and values exceed the memory limit)")
            continue
        new = lambda *shape: torch.randn(*shape, device=device, dtype=torch.bfloat16, generator=gen)  # noqa: E731
        q = [new(b, h, 1, d) for _ in range(copies)]
        kv = [(new(b, hkv, c, d), new(b, hkv, c, d)) for _ in range(copies)]

        def run():
            for j in range(calls):
                k, v = kv[j % copies]
                sdpa(q[j % copies], k, v, enable_gqa=True)

        med, best = timed(run)
        nbytes = decode_attention_bytes(b, c, h, hkv, d)
        out.append({"batch": b, "context": c, "heads": h, "kv_heads": hkv, "head_dim": d, "bytes": nbytes,
                    "seconds": med / calls, "best_seconds": best / calls, "bytes_per_s": nbytes * calls / med})
        _say(progress, f"probe: decode attention {i}/{len(grid)} batch={b} context={c}: "
                       f"{nbytes * calls / med / 1e9:,.1f} GB/s")
        del q, kv
    return out


def gpu_available() -> bool:
    """True when PyTorch is installed and sees a CUDA GPU."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def gpu_record(*, buffer_bytes: int | None = None, shapes: Sequence[tuple[int, int, int]] = DEFAULT_SHAPES,
               decode_attention: Sequence[tuple[int, int]] = DEFAULT_DECODE_ATTENTION,
               attention_heads: tuple[int, int, int] = DEFAULT_ATTENTION_HEADS,
               repeats: int = 20, warmup: int = 5, seed: int = 0, progress: Progress = _print) -> dict:
    """Measure the first CUDA GPU with PyTorch: bandwidth, bf16 matmuls, then the decode attention
    kernel (:func:`decode_attention_sweep`, skipped when ``decode_attention`` is empty), timed with CUDA
    events.

    ``buffer_bytes`` defaults to eight times the L2 cache. Weights, keys and values are rotated over
    copies filling at least four times the L2, so each kernel reads them from HBM; attention shapes are
    kept to half the free memory. Needs ``torch`` with CUDA.
    """
    decode_attention, attention_heads = _check_decode_grid(decode_attention, attention_heads)
    try:
        import torch
    except ImportError:
        raise RuntimeError("measuring a GPU needs PyTorch (pip install torch); roofline does not depend on it") from None
    if not torch.cuda.is_available():
        raise RuntimeError("PyTorch sees no CUDA GPU (torch.cuda.is_available() is False)")
    props = torch.cuda.get_device_properties(0)
    l2 = int(getattr(props, "L2_cache_size", 0)) or 50 * 2**20
    if buffer_bytes is None:
        buffer_bytes = 8 * l2
    buffer_bytes, shapes, repeats, warmup = _check_sizes(buffer_bytes, shapes, repeats, warmup)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    dev = torch.device("cuda")

    def timed(fn):
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        return statistics.median(times), min(times)

    started = time.perf_counter()
    record = {
        "about": "Measured with roofline.measured.probe.gpu_record (PyTorch, CUDA events): medians after warm-up, "
                 "random bf16 data, weights rotated over at least 4x the L2.",
        "env": {**_env_common(), "gpu": torch.cuda.get_device_name(0), "sm_count": props.multi_processor_count,
                "memory_bytes": props.total_memory, "l2_bytes": l2, "torch": torch.__version__,
                "cuda": torch.version.cuda, "buffer_bytes": buffer_bytes},
        "notes": {"gemm_per_call": "one torch.matmul per timed call (launch overhead included for small products)"},
    }
    n_el = buffer_bytes // 2
    src = torch.randn(n_el, device=dev, dtype=torch.bfloat16, generator=gen)
    dst = torch.empty_like(src)
    nbytes = src.numel() * 2
    _say(progress, f"probe: bandwidth over {nbytes / 2**20:,.0f} MiB buffers")
    bw = {}
    for name, fn, moved in (("copy", lambda: dst.copy_(src), 2 * nbytes), ("read", lambda: src.sum(), nbytes),
                            ("write", lambda: dst.fill_(1.5), nbytes)):
        med, best = timed(fn)
        bw[name] = {"bytes": moved, "seconds": med, "bytes_per_s": moved / med, "best_bytes_per_s": moved / best}
        _say(progress, f"probe: {name} {moved / med / 1e12:,.2f} TB/s")
    record["bandwidth"] = bw
    del src, dst
    gemms = []
    for i, (m, n, k) in enumerate(shapes, 1):
        copies = max(2, min(64, math.ceil(4 * l2 / (k * n * 2))))
        weights = [torch.randn(k, n, device=dev, dtype=torch.bfloat16, generator=gen) for _ in range(copies)]
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16, generator=gen)
        turn = iter(range(1 << 62))
        med, best = timed(lambda: torch.matmul(a, weights[next(turn) % copies]))
        gemms.append(_gemm_entry(m, n, k, 2, med, best, "bf16"))
        _say(progress, f"probe: matmul {i}/{len(shapes)} m={m} n={n} k={k}: {2 * m * n * k / med / 1e12:,.1f} TFLOP/s")
        del weights
    record["gemm_per_call"] = gemms
    if decode_attention:
        record["decode_attention"] = decode_attention_sweep(
            torch, dev, timed, grid=decode_attention, heads=attention_heads, cache_bytes=4 * l2,
            memory_limit=torch.cuda.mem_get_info()[0] / 2, seed=seed, progress=progress)
        record["notes"]["decode_attention"] = (
            "torch.nn.functional.scaled_dot_product_attention(enable_gqa=True), one query per sequence, 16 calls "
            "back to back per timed call, keys and values rotated over at least 4x the L2")
    record["env"]["seconds_measuring"] = time.perf_counter() - started
    return record


def measure(device: str = "cpu", **sizes):
    """Measure and parse in one step: a :class:`~roofline.measured.Measurement` of the CPU
    (``device='cpu'``) or the GPU (``'gpu'``). ``sizes`` go to :func:`cpu_record` or :func:`gpu_record`."""
    if device == "cpu":
        return parse_measurement(cpu_record(**sizes), "this machine (CPU)")
    if device == "gpu":
        return parse_measurement(gpu_record(**sizes), "this machine (GPU)")
    raise ValueError(f"device must be 'cpu' or 'gpu', got {device!r}")


if __name__ == "__main__":  # python -m roofline.measured.probe > mine.json
    import json

    rec = gpu_record(progress=lambda s: print(s, file=sys.stderr)) if gpu_available() else \
        cpu_record(progress=lambda s: print(s, file=sys.stderr))
    json.dump(rec, sys.stdout, indent=1)


def page_buffer_bytes(llc: int | None) -> int:
    """Appendix A's probe of the machine that builds the page: a read buffer of four times the last-level
    cache ``llc`` (bytes), and at least 64 MiB; 64 MiB when the cache size is unknown (None)."""
    floor = 64 * 2**20
    if llc is None:
        return floor
    return max(4 * int(number("llc", llc, integer=True)), floor)


__all__ += ["page_buffer_bytes"]
