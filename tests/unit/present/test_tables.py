"""The book's tables: each cell a reader sees, checked against the formula it prints."""

import pytest

import roofline as rl
from roofline.workloads import memory as M
from roofline.present import tables
from roofline.core.units import fmt


def test_workload_table_prints_time_per_token_and_utilization(llama, h100):
    step, pre = rl.decode_step(llama), rl.prefill(llama, 2048)
    t = tables.workload_table({"decode": (step, h100, 1), "prefill": (pre, h100, 2048)})
    dec, pf = rl.predict(step, h100), rl.predict(pre, h100)
    row = dict((r[0], r[1:]) for r in t.rows)
    # decode: memory-bound, its time is the weights' read time; prefill: compute-bound, 34 TFLOP at peak
    assert row["predicted time"] == (fmt(2 * llama.params / 3.35e12, "s"), fmt(pre.flops / 989.4e12, "s"))
    assert row["time per token"] == (fmt(dec.time, "s"), fmt(pf.time / 2048, "s"))
    assert row["utilization of peak"] == (f"{100 * (2 * llama.params / 989.4e12) / dec.time:.3g}%", "100%")
    assert row["ridge point (FLOP/B)"] == ("295", "295")
    assert row["intensity (FLOP/B)"] == ("1", f"{pre.flops / pre.bytes:,.4g}")
    assert row["bound"] == ("memory", "compute")


def test_breakdown_table_has_each_part_and_the_total(llama):
    t = tables.breakdown_table({"text": rl.decode_step(llama, 1, 2048)})
    row = dict((r[0], r[1:]) for r in t.rows)
    assert row["attention"] == (fmt(4 * 2048 * 4096 * 32, "FLOP", 4), "0")
    assert row["kv_cache"] == ("0", fmt(2048 * 131_072, "B", 4))
    assert row["total"] == (fmt(2 * llama.params + 4 * 2048 * 4096 * 32, "FLOP", 4),
                            fmt(2 * llama.params + 2048 * 131_072, "B", 4))


def test_mfu_table_is_tokens_per_second_per_gpu(llama, h100):
    n = llama.params
    t = tables.mfu_table(llama, h100, [0.4], attention_context=8192)
    assert t.rows == ((
        "40%", f"{0.4 * 989.4e12 / (6 * n):,.0f}", f"{0.4 * 989.4e12 / (6 * n + 6 * 8192 * 4096 * 32):,.0f}"),)


def test_mfu_table_takes_each_report_at_its_own_sequence_length(h100):
    # Llama 3 405B's Table 4: 43% at 8,192 tokens, 38% at 131,072 (context parallelism 16). Attention's
    # training FLOPs per token are 6 s d L (half the causal square, three passes) on top of 6N.
    big = rl.load_model("llama-3.1-405b")
    n, d, layers = big.params, big.num_heads * big.head_dim, big.num_layers
    t = tables.mfu_table(big, h100, [0.43, 0.38], attention_context=[8192, 131072])
    assert t.columns == ("MFU", "sequence", "6N only", "with attention")
    assert t.rows == (
        ("43%", "8,192", f"{0.43 * 989.4e12 / (6 * n):,.0f}", f"{0.43 * 989.4e12 / (6 * n + 6 * 8192 * d * layers):,.0f}"),
        ("38%", "131,072", f"{0.38 * 989.4e12 / (6 * n):,.0f}",
         f"{0.38 * 989.4e12 / (6 * n + 6 * 131072 * d * layers):,.0f}"))
    assert t.rows[1][2:] == ("154", "93")  # the long-context stage: 93 tokens/s per GPU with attention, not 154
    with pytest.raises(ValueError, match="attention_context must be one sequence length, or one per MFU"):
        tables.mfu_table(big, h100, [0.43, 0.38], attention_context=[8192])


def test_recipes_table_spells_the_bytes_per_parameter(llama):
    t = tables.recipes_table(llama)
    row = dict((r[0], r[1:]) for r in t.rows)
    assert row["mixed-adam"] == ("2 weights + 2 gradients + 4 master + 4 momentum + 4 variance", "16",
                                 fmt(16 * llama.params, "B", 4))
    assert row["mixed-adam-8bit"][1:] == ("10", fmt(10 * llama.params, "B", 4))


def test_saved_tensors_table_rows_sum_to_the_layers_activations(llama):
    saved = M.saved_tensors(llama)
    t = tables.saved_tensors_table(saved, 8192)
    row = dict((r[0], r[1:]) for r in t.rows)
    assert row["K after RoPE and V"] == ("2,048 per token", "2", fmt(8192 * 2048 * 2, "B", 3))
    assert row["softmax statistics (fp32)"] == ("32 per token", "4", fmt(8192 * 32 * 4, "B", 3))
    assert row["total"][-1] == fmt(M.activation_bytes(saved, 8192, 1), "B", 4)


def test_footprint_table_says_what_fits_where(llama):
    h100, h200 = rl.get_hardware("h100-sxm"), rl.get_hardware("h200-sxm")
    state = M.model_state(llama)  # 128.5 GB: more than an H100 can use, less than an H200
    assert h100.usable_capacity < 16 * llama.params < h200.usable_capacity
    t = tables.footprint_table({"state": state})
    # the total, then each GPU's margin against its usable capacity
    assert t.rows[0][1:4] == (fmt(16 * llama.params, "B", 3), fmt(16 * llama.params - h100.usable_capacity, "B", 3) + " over",
                              fmt(h200.usable_capacity - 16 * llama.params, "B", 3) + " spare")


def test_kv_capacity_table_divides_the_free_tokens_by_the_context(llama):
    t = tables.kv_capacity_table(llama, ["h100-sxm", "h200-sxm"], [2048, 8192])
    for row, gpu in zip(t.rows, ("h100-sxm", "h200-sxm")):
        tokens = int((rl.get_hardware(gpu).usable_capacity - 2 * llama.params) // 131_072)
        assert row[1:] == (f"{tokens:,}", f"{tokens // 2048:,}", f"{tokens // 8192:,}")
    fp8 = tables.kv_capacity_table(llama, ["h200-sxm"], [2048], kv_dtype="fp8")
    tokens = int((rl.get_hardware("h200-sxm").usable_capacity - 2 * llama.params) // 65_536)
    assert fp8.rows[0][1:] == (f"{tokens:,}", f"{tokens // 2048:,}")
    big = tables.kv_capacity_table("llama-3.1-405b", ["h100-sxm"], [2048])
    assert big.rows[0][1:] == ("weights do not fit", "0")


def test_hardware_table_ridge_is_peak_over_bandwidth():
    t = tables.hardware_table(["h100-sxm", "a100-sxm-80gb"])
    assert t.column("ridge (FLOP/B)") == (f"{989.4e12 / 3.35e12:,.0f}", f"{312e12 / 2.039e12:,.0f}")
