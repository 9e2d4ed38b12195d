"""roofline.core.records: our H200 record read and validated (every bad file names its key), and the published
microbenchmarks read with the records the project added."""

from __future__ import annotations

import pytest
from roofline.core.records import (MeasurementError, load_layers, load_measurement, measurement_names,
                                   microbenchmarks, parse_measurement)
import copy
import json
import roofline as rl
from roofline import measured as M


def test_the_added_records_are_read_with_the_shared_ones():
    ids = microbenchmarks()
    added = [i for i in ids if i.startswith("mbx")]
    vllm = [i for i in added if i <= "mbx099"]
    assert len(vllm) == 8 and all(ids[i]["source"]["url"].endswith("/pull/49363") for i in vllm)
    assert all(f"{ids[i]['value']:.6f}" in ids[i]["quote"] for i in vllm)
    # every added record: its value in its quote, a source with a URL and a location
    for i in added:
        r = ids[i]
        # as written, or in the source's unit where the record converted it (ms in the source, us here)
        shown = {f"{r['value'] * k:{fmt}}" for k in (1, 1e-3, 1e3) for fmt in ("", ".6f", ".2f", ".4f", "g")}
        assert any(text in r["quote"] for text in shown), i
        assert r["source"]["url"].startswith("https://") and r["source"]["location"], i


def test_a_correction_mends_a_shared_record_and_says_why():
    """mb0160, DeepGEMM's 4,096 x 4,096 x 7,168 fp8 matmul on the H800 at 1,410 TFLOP/s, was transcribed with the
    quote of another row (64 x 4,096 x 7,168 at 287); the correction puts its own row's quote and place."""
    r = microbenchmarks()["mb0160"]
    cells = [c.strip() for c in r["quote"].strip("| ").split("|")]
    assert [int(c) for c in cells[:3]] == r["shape_mnk"] == [4096, 4096, 7168]
    assert cells[3] == f"{r['value']} TFLOPS" == "1410 TFLOPS"
    assert r["corrected"]["fields"] == ["quote", "source"] and "wrong row" not in r["quote"]
    assert "4096" in r["source"]["location"] and r["source"]["commit"] in r["source"]["url"]
    # the records the correction did not name are as shared
    assert "corrected" not in microbenchmarks()["mb0159"]


def test_a_correction_names_a_record_the_fields_and_why():
    from roofline.core.records import apply_corrections

    recs = {"mb1": {"id": "mb1", "value": 1, "quote": "x"}}
    fixed = apply_corrections(recs, [{"id": "mb1", "fields": {"quote": "y"}, "why": "copied from the wrong row"}])
    assert fixed["mb1"]["quote"] == "y" and fixed["mb1"]["value"] == 1 and recs["mb1"]["quote"] == "x"
    with pytest.raises(KeyError, match="corrected microbenchmark record .mb2.; did you mean .mb1."):
        apply_corrections(recs, [{"id": "mb2", "fields": {"quote": "y"}, "why": "z"}])
    with pytest.raises(ValueError, match="other than its id"):
        apply_corrections(recs, [{"id": "mb1", "fields": {"id": "mb3"}, "why": "z"}])
    with pytest.raises(ValueError, match="must say why"):
        apply_corrections(recs, [{"id": "mb1", "fields": {"quote": "y"}, "why": " "}])


def test_the_custom_all_reduce_records_quote_their_row_in_milliseconds():
    """SGLang's pull request #2904 gives one row per buffer, 'tp size 2/4/8 | data size | three latencies in ms';
    each record is one latency of that row, in us, at the row's place for its group size."""
    ids = microbenchmarks()
    custom = [i for i in ids if ids[i].get("operation") == "custom all_reduce"]
    assert len(custom) == 18 and all(i.startswith("mbx2") for i in custom)
    for i in custom:
        r = ids[i]
        cells = [c.strip() for c in r["quote"].strip("| ").split("|")]
        assert cells[0] == "2/4/8" and int(cells[1]) * 4 == r["message_size_bytes"]
        ms = float(cells[2].split("/")[(2, 4, 8).index(r["n_gpus"])])
        assert r["value"] == pytest.approx(ms * 1000)
        assert r["source"]["url"].endswith("/pull/2904")


def test_shipped_files_and_headlines(rec):
    assert measurement_names() == ["h200-2026-11-29", "h200-2026-11-29-layers"]
    assert rec.env.device == "NVIDIA H200"
    assert len(rec.gemm_graph) == len(rec.gemm_per_call) == 30 and len(rec.gemm_fp8_per_call) == 11
    # the README's headlines: copy 4.26 TB/s, read 4.08 TB/s, batch-1 decode 4.96 ms (201 tokens/s)
    assert rec.bandwidth["copy"].bytes_per_s == pytest.approx(4.26e12, rel=1e-3)
    assert rec.bandwidth["read"].bytes_per_s == pytest.approx(4.08e12, rel=1e-3)
    first = rec.decode[0]
    assert (first.batch, first.context) == (1, 2048)
    assert first.seconds_graph == pytest.approx(4.96e-3, rel=1e-3) and first.tokens_per_s == pytest.approx(201.5, abs=0.1)
    assert rec.launch_overhead.eager_s_per_kernel == pytest.approx(11.5e-6, rel=1e-2)


def test_layers_file_loads_with_the_out_of_memory_point():
    layers = load_layers()
    assert [v.query_tokens for v in layers.verify][:2] == [1, 2]
    oom = [a for a in layers.attention if a.explicit_seconds is None]
    assert [a.tokens for a in oom] == [32768] and "out of memory" in oom[0].explicit_error
    assert {t.checkpoint for t in layers.train} == {True, False}


def test_records_agree_with_the_package_formulas(rec):
    for g in rec.gemm_graph:
        c = rl.matmul(g.m, g.n, g.k)
        assert (c.flops, c.bytes) == (g.flops, g.min_bytes)
    m = M.model_of(rec)
    assert m.num_layers * m.layer_matmul_params + m.embedding_params + m.lm_head_params == rec.model["params"]
    # the decode runs' KV bytes are the package's KV-cache bytes
    for r in rec.decode:
        assert rl.kv_cache_bytes(r.context, m.kv_bytes_per_token(), r.batch) == r.kv_bytes


def _broken(raw, edit):
    bad = copy.deepcopy(raw)
    edit(bad)
    return bad


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.pop("env"), r"bad\.json: missing 'env'"),
    (lambda d: d["env"].pop("gpu"), r"env: missing 'gpu' or 'cpu'"),
    (lambda d: d.pop("bandwidth"), r"missing 'bandwidth'"),
    (lambda d: d["gemm_graph"][3].pop("seconds"), r"gemm_graph\[3\]: missing 'seconds'"),
    (lambda d: d["gemm_graph"][0].update(seconds=-1e-5), r"gemm_graph\[0\] field 'seconds': a time must be a finite number > 0, got -1e-05"),
    (lambda d: d["decode"][2].update(seconds_graph="fast"), r"decode\[2\] field 'seconds_graph': must be a number"),
    (lambda d: d["gemm_per_call"][1].update(flops=1.0), r"gemm_per_call\[1\] field 'flops': expected 2mnk"),
    (lambda d: d["prefill"][0].update(tokens=12.5), r"prefill\[0\] field 'tokens': must be a whole number"),
    (lambda d: d["bandwidth"]["copy"].update(seconds=0), r"bandwidth\.copy field 'seconds': a time must be"),
    (lambda d: d.pop("model"), r"has decode or prefill runs but no 'model'"),
    (lambda d: [d.pop("gemm_graph"), d.pop("gemm_per_call")], r"missing 'gemm_graph' or 'gemm_per_call'"),
    (lambda d: d.update(decode={"batch": 1}), r"field 'decode': expected list"),
])
def test_bad_files_name_the_key(raw, edit, message):
    with pytest.raises(MeasurementError, match=message):
        parse_measurement(_broken(raw, edit), "bad.json")


def test_bad_paths_and_json(tmp_path):
    with pytest.raises(KeyError, match="unknown measurement 'h200-2026-11-30'; did you mean"):
        load_measurement("h200-2026-11-30")
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    with pytest.raises(MeasurementError, match="x.json: not valid JSON"):
        load_measurement(bad)
    with pytest.raises(TypeError, match="measurement must be a name"):
        load_measurement(42)


def test_a_saved_file_round_trips(raw, tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(raw))
    assert load_measurement(path).decode == load_measurement().decode


