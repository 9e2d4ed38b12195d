"""roofline.measured.probe: the record a reader's own machine gives, in the H200 record's format."""

from __future__ import annotations

import json
import math
import numpy as np
import pytest
import roofline as rl
from roofline.measured import probe
from roofline.core.calibration import measured_roof
from roofline.core.records import decode_attention_bytes, parse_measurement

TINY = dict(buffer_bytes=2 * 2**20, shapes=[(1, 128, 128), (16, 128, 128), (128, 128, 128)], repeats=3, warmup=1)


@pytest.fixture(scope="module")
def cpu():
    return probe.cpu_record(progress=None, **TINY)


def test_cpu_record_is_finite_positive_and_in_the_h200_format(cpu):
    rec = parse_measurement(json.loads(json.dumps(cpu)), "cpu")
    assert rec.env.details["threads"] >= 1 and rec.env.details["blas"]
    assert set(rec.bandwidth) == {"copy", "read", "write"}
    for b in rec.bandwidth.values():
        assert math.isfinite(b.bytes_per_s) and b.bytes_per_s > 0 and b.best_bytes_per_s >= b.bytes_per_s
    assert [(g.m, g.n, g.k) for g in rec.gemm_per_call] == TINY["shapes"]
    for g in rec.gemm_per_call:
        assert g.dtype == "fp32" and math.isfinite(g.flops_per_s) and g.flops_per_s > 0
        assert g.min_bytes == 4 * (g.m * g.k + g.k * g.n + g.m * g.n)


def test_cpu_products_obey_their_own_roof(cpu):
    rec = parse_measurement(cpu, "cpu")
    roof = measured_roof(rec)
    assert roof.kind == "measured" and roof.dtype == "fp32"
    for g in rec.gemm_per_call:
        # compute side: the roof's peak is the best product's best run, so no median exceeds it
        assert g.flops_per_s <= roof.peak_flops
    # memory side: medians against the best bandwidth run, on tiny cache-resident sizes and a shared
    # machine; a product may beat the benchmark by noise, never by an order of magnitude
    attainable = np.array([rl.attainable_flops(g.intensity, roof) for g in rec.gemm_per_call])
    assert (np.array([g.flops_per_s for g in rec.gemm_per_call]) <= 10 * attainable).all()


def test_progress_lines_and_bad_sizes():
    lines = []
    probe.cpu_record(progress=lines.append, **{**TINY, "shapes": [(2, 64, 64)]})
    assert lines[0].startswith("probe: bandwidth over") and "matmul 1/1 m=2 n=64 k=64" in lines[-1]
    with pytest.raises(ValueError, match="buffer_bytes must be a whole number > 0"):
        probe.cpu_record(progress=None, buffer_bytes=-1)
    with pytest.raises(ValueError, match=r"shapes must be \(m, n, k\) triples"):
        probe.cpu_record(progress=None, buffer_bytes=2**20, shapes=[(1, 2)])
    with pytest.raises(ValueError, match="dtype must be 'fp32' or 'fp64'"):
        probe.cpu_record(progress=None, dtype="bf16")
    with pytest.raises(ValueError, match="device must be 'cpu' or 'gpu'"):
        probe.measure("tpu")


def test_gpu_record():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    rec = probe.measure("gpu", buffer_bytes=256 * 2**20, shapes=[(1, 4096, 4096), (4096, 4096, 4096)],
                          repeats=5, warmup=2, progress=None)
    roof = measured_roof(rec)
    assert roof.dtype == "bf16" and roof.bandwidth > 0 and roof.peak_flops > 0
    assert all(g.flops_per_s <= roof.peak_flops for g in rec.gemm_per_call)


def test_decode_attention_sweep_runs_on_any_torch_device():
    """The GPU path's decode attention sweep, run on the CPU where PyTorch is installed (skipped otherwise):
    its entries read back as a record's ``decode_attention`` table."""
    torch = pytest.importorskip("torch")
    lines = []
    timer = lambda fn: probe._time(fn, repeats=2, warmup=1)  # noqa: E731
    runs = probe.decode_attention_sweep(torch, "cpu", timer, grid=[(1, 64), (2, 256), (4, 4096)], heads=(4, 2, 16),
                                        cache_bytes=2**20, memory_limit=2**20, calls=2, progress=lines.append)
    assert [(r["batch"], r["context"]) for r in runs] == [(1, 64), (2, 256)]  # the third passes the memory limit
    assert "left out" in lines[-1] and "batch=4 context=4096" in lines[-1]
    raw = {"env": {"cpu": "test", "date_utc": "2026-11-30", "python": "3", "platform": "p"},
           "bandwidth": {"read": {"bytes": 1e6, "seconds": 1e-4}},
           "gemm_per_call": [], "decode_attention": runs}
    raw["gemm_per_call"] = [probe._gemm_entry(2, 8, 8, 4, 1e-6, 1e-6, "fp32")]
    parsed = parse_measurement(raw, "cpu sweep").decode_attention
    assert [r.groups for r in parsed] == [2, 4]
    assert all(r.bytes == decode_attention_bytes(r.batch, r.context, 4, 2, 16) for r in parsed)
    with pytest.raises(ValueError, match="do not share 3 KV heads evenly"):
        probe.decode_attention_sweep(torch, "cpu", timer, heads=(4, 3, 16), progress=None)
    with pytest.raises(ValueError, match=r"decode_attention must be \(batch, context\) pairs"):
        probe.decode_attention_sweep(torch, "cpu", timer, grid=[(1, 2, 3)], progress=None)


def test_page_buffer_bytes():
    assert probe.page_buffer_bytes(None) == 64 * 2**20
    assert probe.page_buffer_bytes(32 * 2**20) == 128 * 2**20  # four times the cache
    assert probe.page_buffer_bytes(2**20) == 64 * 2**20  # at least 64 MiB
