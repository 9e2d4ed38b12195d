"""The book's tables: each cell a reader sees, checked against the formula it prints."""

import pytest

import roofline as rl
from roofline.workloads import memory as M
from roofline.core.policies import RECOMPUTES
from roofline.present import tables
from roofline.core.units import fmt
from roofline.core.calibration import measured_roof
from roofline.core.records import load_measurement


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


# --- the Table itself ----------------------------------------------------------------------------------

def test_table_prints_aligned_text_and_html_and_reads_a_column():
    t = tables.Table(("GPU", "ridge"), (("H100 SXM", "295"), ("A100", "153")), "Ridge points")
    assert repr(t).splitlines() == ["Ridge points", "GPU       ridge", "--------  -----", "H100 SXM    295",
                                    "A100        153"]
    html = t._repr_html_()
    assert "<caption>Ridge points</caption>" in html and html.count("<tr>") == 3 and "overflow-y" not in html
    assert t.column("ridge") == ("295", "153")
    with pytest.raises(ValueError, match="every row needs 2 cells, got 1"):
        tables.Table(("a", "b"), (("only one",),))
    # a number and its unit stay on one line; the row's name and the columns named in wrap (words) may wrap
    assert html.count("white-space:nowrap") == 2
    words = tables.Table(("GPU", "ridge", "note"), (("H100 SXM", "295 FLOP/B", "the datasheet's dense peak"),),
                         wrap=("note",))._repr_html_()
    assert words.count("white-space:nowrap") == 1 and "nowrap;\">295 FLOP/B<" in words
    with pytest.raises(ValueError, match="wrap names columns the table lacks: 'notes'"):
        tables.Table(("GPU", "note"), (), wrap=("notes",))
    tall = tables.Table(("n",), tuple((str(i),) for i in range(tables.Table.LONG + 1)))
    assert "max-height:36em;overflow-y:auto" in tall._repr_html_() and "position:sticky" in tall._repr_html_()


# --- every table: the headers a reader sees, one row per input ------------------------------------------

def _moe_pair():
    from roofline.parallel import moe

    return {"MoE": "mixtral-8x7b", "dense": moe.dense_equivalent("mixtral-8x7b")}


HEADERS = {
    "workload_table": (lambda: tables.workload_table({"decode, batch 1": (rl.decode_step("llama-3-8b"), "h100-sxm", 1)}),
                       ("quantity", "decode, batch 1"), 11),
    "breakdown_table": (lambda: tables.breakdown_table({"first-order": rl.decode_step("llama-3-8b"),
                                                        "refined": rl.decode_step("llama-3-8b", accounting="refined")}),
                        ("part", "first-order FLOPs", "first-order bytes", "refined FLOPs", "refined bytes"),
                        len(rl.decode_step("llama-3-8b").parts) + 1),
    "tiers_table": (lambda: tables.tiers_table(rl.bandwidth_tiers("h100-sxm")),
                    ("tier", "per GPU, one way", "slower than HBM3", "source"), 4),
    "hardware_table": (lambda: tables.hardware_table(["a100-sxm-80gb", "h100-sxm", "h200-sxm"]),
                       ("GPU", "year", "dense bf16", "HBM bandwidth", "HBM (sold as)", "HBM usable", "ridge (FLOP/B)"), 3),
    "mfu_table": (lambda: tables.mfu_table("llama-3-8b", "h100-sxm", [0.3, 0.4, 0.5]),
                  ("MFU", "tokens/s per GPU (6N)"), 3),
    "recipes_table": (lambda: tables.recipes_table("llama-3-8b"),
                      ("recipe", "bytes per parameter", "total B/param", "Llama 3 8B"), len(M.RECIPES)),
    "saved_tensors_table": (lambda: tables.saved_tensors_table(M.saved_tensors("llama-3-8b", flash=True), 8192),
                            ("saved tensor", "elements", "bytes each", "one sequence of 8,192"),
                            len(M.saved_tensors("llama-3-8b", flash=True)) + 1),
    "footprint_table": (lambda: tables.footprint_table({"1 GPU": M.training_footprint("llama-3-8b", 4096, 1),
                                                        "ZeRO-3": M.training_footprint("llama-3-8b", 4096, 1, gpus=8,
                                                                                       zero_stage=3)}),
                        ("setup", "total", "H100 SXM", "H200", "model state", "activations", "logits"), 2),
    "kv_capacity_table": (lambda: tables.kv_capacity_table("llama-3-8b", ["h100-sxm", "h200-sxm"], [2048, 8192, 32768]),
                          ("GPU", "KV tokens", "batch at 2,048", "batch at 8,192", "batch at 32,768"), 2),
    "recompute_table": (lambda: tables.recompute_table("llama-3-8b", [4096, 8192], [("none", "none", "flash"),
                                                                                     ("full", "full", "flash")]),
                        ("tokens", "policy", "kept", "working set", "peak", "extra FLOPs"), 4),
    "best_plan_table": (lambda: tables.best_plan_table("llama-3-8b", "h100-sxm", [4096], gpus=8, zero_stage=3,
                                                       achieved=0.5),
                        ("tokens", "fastest policy that fits", "memory per GPU", "step time", "MFU", "HFU"), 1),
    "moe_comparison_table": (lambda: tables.moe_comparison_table(_moe_pair(), "h200", batch=64, context=4096, prompt=4096),
                             ("model", "parameters", "active", "weights (bf16)", "training FLOP per token",
                              "decode, batch 1", "decode, batch 64", "prefill, 4,096 tokens"), 2),
    "moe_memory_table": (lambda: tables.moe_memory_table([("Mixtral 8x7B", "mixtral-8x7b", "bf16", 2),
                                                          ("Mixtral 8x7B", "mixtral-8x7b", "bf16", 8)], "h200"),
                         ("model, weights", "GPUs", "weights per GPU, TP", "weights per GPU, EP", "left for KV, TP",
                          "left for KV, EP"), 2),
}


@pytest.mark.parametrize("name", sorted(HEADERS))
def test_headers_and_one_row_per_input(name):
    build, columns, rows = HEADERS[name]
    t = build()
    assert t.columns == columns
    assert len(t.rows) == rows


# --- chapter 1 -------------------------------------------------------------------------------------------

def test_matmul_intensity_table_is_2mnk_over_the_bytes_read_and_written():
    t = tables.matmul_intensity_table([1, 2, 8, 4096], 4096, 4096, title="Intensity")
    assert t.columns == ("m (rows)", "n × k", "intensity, bf16 (FLOP/B)") and len(t.rows) == 4
    n = k = 4096
    # 2 m n k FLOPs over 2 bytes per element of A (m k), B (k n) and C (m n)
    assert t.column("intensity, bf16 (FLOP/B)") == tuple(f"{2 * m * n * k / (2 * (m * k + k * n + m * n)):,.2f}"
                                                         for m in (1, 2, 8, 4096))
    assert t.rows[0][:2] == ("1", "4,096 × 4,096") and t.rows[3][2] == "1,365.33"  # a square product: n / 3


def test_mfu_calculator_is_6N_tokens_over_the_jobs_peak_and_8N_for_hfu(llama):
    t = tables.mfu_calculator([("llama-3-8b", 8, "h100-sxm", 60_000), ("llama-3.1-405b", 16_384, "h100-sxm", 2_600_000)],
                              title="MFU calculator")
    assert t.columns == ("model", "GPUs", "tokens/s (job)", "MFU", "HFU (full recompute)") and len(t.rows) == 2
    n = llama.params
    assert t.rows[0] == ("Llama 3 8B", "8 × H100 SXM", "60,000", f"{100 * 60_000 * 6 * n / (8 * 989.4e12):.1f}%",
                         f"{100 * 60_000 * 8 * n / (8 * 989.4e12):.1f}%")
    assert t.rows[0][3] == "36.5%"
    big = rl.load_model("llama-3.1-405b").params
    assert t.rows[1][3] == f"{100 * 2_600_000 * 6 * big / (16_384 * 989.4e12):.1f}%"


# --- chapter 2 -------------------------------------------------------------------------------------------

def test_korthikanti_table_matches_the_papers_closed_forms():
    t = tables.korthikanti_table(seq=2048, micro_batch=1, title="Activations per GPT layer")
    assert t.columns == ("GPT layer", *RECOMPUTES, "equals the paper")
    assert t.columns == ("GPT layer", "none", "selective", "full", "equals the paper")
    assert len(t.rows) == len(M.KORTHIKANTI_CONFIGS)
    s, b, h, a = 2048, 1, 6144, 64  # the 22B configuration
    row = dict((r[0], r[1:]) for r in t.rows)["22B"]
    # Korthikanti et al. (2022): s b h (34 + 5 a s / h) bytes per layer; 34 s b h with selective
    # recomputation; 2 s b h (the layer's input) with full recomputation
    assert row == (fmt(s * b * h * (34 + 5 * a * s / h), "B", 4), fmt(34 * s * b * h, "B", 4), fmt(2 * s * b * h, "B", 4),
                   "yes")
    assert set(t.column("equals the paper")) == {"yes"}


# --- chapter 4 -------------------------------------------------------------------------------------------

def test_attention_table_times_each_pass_kernel_by_kernel():
    from roofline.workloads import tiling

    h100 = rl.get_hardware("h100-sxm")
    s, d, heads = 4096, 128, 32
    ex = tiling.explicit_attention(s, d, heads, kv_heads=8)
    fl = tiling.flash_attention(s, d, heads, kv_heads=8, on_chip=h100.shared_memory_per_sm, l2=h100.l2_bytes, training=True)
    t = tables.attention_table({"explicit, forward": ex, "flash, forward (training)": fl}, h100, title="One layer")
    assert t.columns == ("pass", "FLOPs", "HBM bytes", "FLOP/B", "time", "peak", "kept") and len(t.rows) == 2
    row = dict((r[0], r[1:]) for r in t.rows)
    # the explicit pass computes the whole s x s square of scores: 4 s^2 d FLOPs per head, masked afterwards
    assert row["explicit, forward"][0] == fmt(4 * s * s * d * heads, "FLOP")
    assert row["explicit, forward"][3] == fmt(rl.predict(ex.breakdown, h100, timing="kernel").time, "s")
    # it keeps the bf16 probabilities, heads x s x s, for the backward pass
    assert row["explicit, forward"][5] == fmt(heads * s * s * 2, "B")
    assert row["flash, forward (training)"][3] == fmt(float(rl.predict(fl.breakdown, h100, timing="kernel").time), "s")


def test_published_table_turns_flops_into_a_share_of_the_datasheet_peak():
    from roofline.workloads import tiling

    t = tables.published_table(tiling.PUBLISHED, title="Reported throughput")
    assert t.columns == ("kernel", "what was timed", "GPU, format", "reported, up to", "of peak")
    assert len(t.rows) == len(tiling.PUBLISHED)
    fa3 = next(r for r in t.rows if r[0] == "FlashAttention-3" and r[2] == "H100 SXM, fp16")
    # FlashAttention-3's forward: 740 TFLOP/s in fp16 on an H100 SXM, whose dense fp16 peak is 989.4 TFLOP/s
    assert fa3[3:] == ("740 TFLOP/s", f"{100 * 740e12 / 989.4e12:.0f}%") and fa3[4] == "75%"
    speedup = next(r for r in t.rows if r[0] == "FlashAttention")
    assert speedup[2:] == ("—", "3x", "—")  # a speed-up has no GPU and no share of a peak


# --- chapter 5 -------------------------------------------------------------------------------------------

def test_kv_layout_table_spells_what_each_layer_caches():
    t = tables.kv_layout_table(["llama-3-8b", "llama-2-7b", "deepseek-v3"], context=8192, title="KV cache by layout")
    assert t.columns == ("model", "layout", "per layer", "bytes per token", "one sequence") and len(t.rows) == 3
    row = dict((r[0], r[1:]) for r in t.rows)
    # K and V: 2 x 8 KV heads x 128, in bf16, over 32 layers
    assert row["Llama 3 8B"] == ("GQA", "2 × 8 × 128", f"{2 * 8 * 128 * 2 * 32:,}", f"{fmt(8192 * 131_072, 'B')} at 8,192")
    # Llama 2 7B was trained to 4,096 tokens: the sequence stops there
    assert row["Llama 2 7B"] == ("MHA", "2 × 32 × 128", "524,288", f"{fmt(4096 * 524_288, 'B')} at 4,096")
    v3 = t.rows[2]
    # MLA caches a 512-wide latent and a 64-wide rotary key per layer: (512 + 64) x 2 bytes x 61 layers
    assert v3[1:4] == ("MLA", "512 + 64", f"{(512 + 64) * 2 * 61:,}")


def test_serving_table_fills_the_free_memory_with_whole_sequences():
    from roofline.serving import capacity as S

    a100 = rl.get_hardware("a100-sxm-80gb")
    base = S.serving_capacity("llama-2-7b", a100, 3328)
    fp8 = S.serving_capacity("llama-2-7b", a100, 3328, kv_dtype="fp8")
    t = tables.serving_table({"as built": base, "fp8 KV cache": fp8}, title="Llama 2 7B at 3,328 tokens")
    assert t.columns == ("setup", "KV per sequence", "largest batch", "time per output token", "throughput",
                         "compute busy") and len(t.rows) == 2
    per_seq = 3328 * 524_288  # 3,328 tokens is 208 blocks of 16: no waste
    weights = 2 * rl.load_model("llama-2-7b").params
    batch = int((a100.usable_capacity - weights) // per_seq)
    step = rl.predict(rl.decode_step("llama-2-7b", batch, 3328), a100).time
    assert t.rows[0][1:5] == (fmt(per_seq, "B"), f"{batch:,}", fmt(step, "s"), fmt(batch / step, "tokens/s"))
    assert t.rows[1][2] == f"{int((a100.usable_capacity - weights) // (per_seq / 2)):,}"  # fp8 halves each sequence


# --- chapter 6 -------------------------------------------------------------------------------------------

def test_formats_table_bits_range_and_peaks():
    t = tables.formats_table(title="Number formats")
    assert t.columns == ("format", "bits per element", "largest value", "binades", "A100 80GB dense peak",
                         "H100 SXM dense peak", "B200 dense peak")
    assert len(t.rows) == 10
    row = dict((r[0], r[1:]) for r in t.rows)
    # E4M3: no infinities, largest 1.75 x 2^8 = 448; fp16: (2 - 2^-10) x 2^15 = 65,504; E2M1: 1.5 x 2^2 = 6
    assert row["fp8 E4M3"][:2] == ("8", "±448") and row["fp16"][1] == "±65504" and row["fp4 E2M1"][1] == "±6"
    assert row["fp8 E4M3"][4] == fmt(1978.9e12, "FLOP/s", 3) and row["fp8 E4M3"][3] == "—"  # the A100 has no fp8
    # int4 in groups of 128 with a 16-bit scale each: 4 + 16 / 128 bits; with a zero point too, 4 + 32 / 128
    assert row["int4-g128"][0] == f"{4 + 16 / 128:g}" and row["int8"][1] == "±127 steps"
    assert row["bf16"][4] == fmt(989.4e12, "FLOP/s", 3)
    short = tables.formats_table(["bf16", "int8"], catalog=("h100-sxm",))
    assert short.columns[-1] == "H100 SXM dense peak" and len(short.rows) == 2


def test_quality_table_reads_each_paper_against_its_own_baseline():
    from roofline.workloads import quantization as q

    t = tables.quality_table(title="Quality lost")
    assert t.columns == ("method", "what is quantized", "model", "metric", "baseline", "quantized", "quality lost",
                         "source")
    assert len(t.rows) == len(q.PUBLISHED)
    rtn = next(r for r in t.rows if r[0] == "RTN" and r[2] == "OPT-175B")
    # perplexity: worse is higher; 8.34 -> 10.54 on WikiText-2 is 26.4% worse
    assert rtn[4:7] == ("8.34", "10.54", f"{100 * (10.54 / 8.34 - 1):+.1f}%") and rtn[6] == "+26.4%"
    naive = next(r for r in t.rows if r[0] == "W8A8 (naive)")
    # accuracy: worse is lower; 66.9% -> 35.5% is 46.9% of the accuracy lost
    assert naive[4:7] == ("66.9%", "35.5%", f"{100 * (1 - 35.5 / 66.9):+.1f}%")
    # the source as a reader cites it (first author, year), with the paper's table; the words may wrap
    assert rtn[7] == "Frantar 2023, Table 3" and tables.quality_table().wrap == ("what is quantized", "model",
                                                                                   "metric", "source")
    assert {r[7].split(",")[0] for r in t.rows} == {"Dettmers 2022", "Xiao 2023", "Frantar 2023", "Lin 2024",
                                                     "Micikevicius 2022"}


def test_quantized_serving_table_weights_batch_and_steps(llama, h100):
    from roofline.workloads import quantization as q

    t = tables.quantized_serving_table([llama, "llama-3-70b"], h100, 4096, schemes=["bf16", "W4A16 (int4, g128)"],
                                       title="Llama 3 on one H100")
    assert t.columns == ("model", "formats", "weights", "largest batch", "decode step, batch 1",
                         "step ÷ batch, largest batch", "prefill") and len(t.rows) == 2 * 2
    bf16 = t.rows[0]
    batch = int((h100.usable_capacity - 2 * llama.params) // (4096 * 131_072))
    one = rl.predict(rl.decode_step(llama, 1, 4096), h100).time
    assert bf16[:5] == ("Llama 3 8B", "bf16", fmt(2 * llama.params, "B", 3), f"{batch:,}", fmt(one, "s", 3))
    int4 = rl.predict(rl.decode_step(llama, 1, 4096, **q.scheme("W4A16 (int4, g128)")), h100).time
    assert t.rows[1][4] == fmt(int4, "s", 3)
    assert t.rows[2][1:4] == ("bf16", fmt(2 * rl.load_model("llama-3-70b").params, "B", 3), "does not fit")


# --- chapter 7 -------------------------------------------------------------------------------------------

def test_collectives_table_ring_bytes_and_alpha_beta_times(h100):
    from roofline.core.collectives import COLLECTIVES, collective_cost

    groups = [("8 GPUs, one node", 8, 8), ("64 GPUs, 8 nodes", 64, 8)]
    t = tables.collectives_table(h100, 1e9, groups, title="One collective, 1 GB")
    assert t.columns == ("collective", "sent per GPU, 8 GPUs, one node", "time, 8 GPUs, one node",
                         "time, 64 GPUs, 8 nodes") and len(t.rows) == len(COLLECTIVES)
    row = dict((r[0], r[1:]) for r in t.rows)
    # a ring all-reduce sends 2 (n - 1) / n of the buffer; reduce-scatter and all-gather half that
    assert row["all-reduce"][0] == fmt(2 * 7 / 8 * 1e9, "B") and row["all-gather"][0] == fmt(7 / 8 * 1e9, "B")
    assert row["all-reduce"][2] == fmt(collective_cost("all_reduce", 64, 1e9, h100, gpus_per_node=8).time, "s")


def test_data_parallel_table_memory_and_traffic_per_layout(h100):
    from roofline.parallel import data_parallel as dp

    l70 = rl.load_model("llama-3-70b")
    z = {label: dp.data_parallel_step(l70, h100, nodes=8, zero_stage=st, seq=4096, achieved=0.5, recompute="full")
         for label, st in (("DDP", 0), ("ZeRO-3", 3))}
    t = tables.data_parallel_table(z, title="Llama 3 70B on 64 H100s")
    assert t.columns == ("layout", "memory per GPU", "sent over NVLink", "sent over network", "link busy", "exposed",
                         "MFU") and t.column("layout") == ("DDP", "ZeRO-3")
    ddp = M.training_footprint(l70, 4096, 1, recompute="full")
    zero3 = M.training_footprint(l70, 4096, 1, gpus=64, zero_stage=3, recompute="full")
    assert t.column("memory per GPU") == (fmt(float(ddp.total), "B"), fmt(float(zero3.total), "B"))
    # a 70B model's whole state on every GPU does not fit: no exposed time and no MFU, but by how much it is over
    assert t.rows[0][-2:] == ("—", f"does not fit by {fmt(float(ddp.total) - h100.usable_capacity, 'B')}")
    assert t.rows[1][-2:] == (fmt(z["ZeRO-3"].exposed, "s"), f"{100 * z['ZeRO-3'].mfu:.1f}%")


# --- chapter 9 -------------------------------------------------------------------------------------------

def _layout(**kw):
    from roofline.parallel.planner import Layout

    base = dict(tp=8, pp=4, dp=2, micro_batch=1, micro_batches=32, v=2, recompute="full", zero_stage=1, memory=60e9,
                compute=10.0, bubble=0.5, pipeline_comm=0.1, data_comm=0.2, time=10.8, mfu=0.45, tflops=140e12, fits=True)
    return Layout(**{**base, **kw})


def test_plan_table_one_column_per_layout_ranked():
    from roofline.parallel import planner

    # one column per layout, ranked, so that five fit a page's width; one row per quantity
    t = tables.plan_table([_layout(), _layout(v=1, time=11.0)], title="the fastest layouts")
    assert t.columns == ("rank", "1", "2")
    assert [r[0] for r in t.rows] == ["TP x PP x DP", "micro-batch (m)", "schedule", "recompute", "ZeRO",
                                      "memory per GPU", "compute", "bubble", "exposed comm.", "step", "MFU"]
    assert t.column("1") == ("8 x 4 x 2", "1 (32)", "interleaved, v = 2", "full", "1", fmt(60e9, "B"), fmt(10.0, "s"),
                             fmt(0.5, "s"), fmt(0.1 + 0.2, "s"), fmt(10.8, "s"), "45.0%")
    assert t.column("2")[:3] == ("8 x 4 x 2", "1 (32)", "1F1B") and t.column("2")[9] == fmt(11.0, "s")
    p = planner.plan("llama-3-8b", "h100", nodes=1, seq=2048, global_batch=8)
    top = tables.plan_table(p.top(3))
    assert top.columns == ("rank", "1", "2", "3")
    assert dict((r[0], r[1]) for r in top.rows)["step"] == fmt(float(p.grid["time"][p.grid["fits"]].min()), "s")


def test_megatron_table_puts_each_published_run_over_the_planners_bound():
    pub = {"params": 145.6e9, "tp": 8, "pp": 8, "gpus": 1536, "batch": 2304, "tflops": 148e12}
    t = tables.megatron_table([("GPT 146B", pub, _layout(tflops=185e12))], title="Megatron-LM's GPT runs")
    assert t.columns == ("model", "GPUs", "published TP x PP", "published TFLOP/s per GPU", "planner's layout",
                         "planner's bound, TFLOP/s per GPU", "published / bound")
    assert t.rows == (("GPT 146B", "1,536", "8 x 8", "148", "8 x 4 x 2", "185", "80%"),)  # 148 / 185 = 0.8


# --- chapter 11 ------------------------------------------------------------------------------------------

def test_long_context_table_one_row_per_model_and_length(llama):
    t = tables.long_context_table(["llama-3-8b", "llama-3-70b"], [8192, 2**20], "h100-sxm", title="Llama 3")
    assert t.columns == ("model", "tokens", "attention, FLOPs", "attention, time", "activations", "full recompute",
                         "logits", "KV cache") and len(t.rows) == 2 * 2
    assert [r[:2] for r in t.rows] == [("8B", "8k"), ("8B", "1M"), ("70B", "8k"), ("70B", "1M")]  # one family: sizes
    eight = t.rows[0]
    # one sequence of 8,192: fp32 logits over the 128,256-token vocabulary, and 131,072 bytes of KV per token
    assert eight[6:] == (fmt(8192 * 128_256 * 4, "B", 3), fmt(8192 * 131_072, "B", 3))
    mixed = tables.long_context_table(["llama-3-8b", "qwen2-7b"], [8192])
    assert mixed.column("model") == ("Llama 3 8B", "Qwen2 7B")  # two families: full names


# --- appendices: measurements ----------------------------------------------------------------------------

def test_operations_table_one_row_per_kernel(llama):
    h200 = rl.get_hardware("h200-sxm")
    pred = rl.predict(rl.decode_step(llama, 1, 2048, accounting="refined"), h200, timing="kernel")
    t = tables.operations_table(pred)
    assert t.columns == ("kernel", "launches", "FLOPs", "bytes", "FLOP/B", "bound", "time")
    assert len(t.rows) == len(pred.ops) and t.title == "operations, timed under the kernel rule on H200"
    row = dict((r[0], r[1:]) for r in t.rows)
    # the output projection: 32 launches of a (1 x 4096) @ (4096 x 4096) product, memory-bound on its weights
    o_flops, o_bytes = 32 * 2 * 4096 * 4096, 32 * 2 * (4096 * 4096 + 2 * 4096)
    assert row["o"][:5] == ("32", fmt(o_flops, "FLOP"), fmt(o_bytes, "B"), f"{o_flops / o_bytes:,.1f}", "memory")
    assert row["o"][5] == fmt(o_bytes / 4.8e12, "s")  # the H200's 4.8 TB/s
    assert tables.operations_table(pred, title="mine").title == "mine"


def test_comparison_table_marks_broken_bounds_and_estimates_outside_the_band():
    from roofline.measured.compare import Comparison

    floor = [Comparison("decode b1", 4e-3, 5e-3, "memory"), Comparison("prefill 2048", 0.06, 0.05, "compute")]
    est = [Comparison("decode b1", 5.1e-3, 5e-3, "memory"), Comparison("prefill 2048", 0.08, 0.05, "compute")]
    t = tables.comparison_table({"datasheet": floor, "calibrated": est}, estimates=["calibrated"], title="ratios")
    assert t.columns == ("point", "measured", "predicted/measured, datasheet", "predicted/measured, calibrated")
    # 4 / 5 obeys the floor; 0.06 / 0.05 = 1.2 breaks it; the estimate 0.08 / 0.05 = 1.6 is outside 1.25x
    assert t.rows == (("decode b1", fmt(5e-3, "s"), "0.80", "1.02"), ("prefill 2048", fmt(0.05, "s"), "1.20 (!)",
                                                                        "1.60 (!)"))
    k = tables.comparison_table({"datasheet": floor, "calibrated": est}, estimates=["calibrated"], key_first="calibrated")
    assert k.columns == ("point", "ratio, calibrated roof", "ratio, datasheet roof", "measured time")
    assert k.rows[0] == ("decode b1", "1.02", "0.80", fmt(5e-3, "s"))
    with pytest.raises(ValueError, match="do not cover the same points"):
        tables.comparison_table({"datasheet": floor, "calibrated": est[:1]})
    with pytest.raises(ValueError, match="estimates names columns that are not there: 'other'"):
        tables.comparison_table({"datasheet": floor}, estimates=["other"])


def test_ceilings_table_measured_over_the_datasheet():

    sheet, sheet8 = rl.as_roof("h200-sxm"), rl.as_roof("h200-sxm", "fp8")
    rec = load_measurement("h200-2026-11-29")
    roof, roof8 = measured_roof(rec), measured_roof(rec, "fp8")
    t = tables.ceilings_table([sheet, sheet8], [roof, roof8], title="H200: datasheet against measured")
    assert t.columns == ("ceiling", "datasheet", "measured", "measured / datasheet")
    assert t.column("ceiling") == ("HBM bandwidth", "dense bf16 matmul", "ridge point, bf16 (FLOP/B)",
                                   "dense fp8 matmul", "ridge point, fp8 (FLOP/B)")
    assert t.rows[0][1] == fmt(4.8e12, "B/s") and t.rows[0][3] == f"{100 * roof.bandwidth / 4.8e12:.0f}%"
    assert t.rows[1][1] == fmt(989.4e12, "FLOP/s", 4)
    assert t.rows[2][1:3] == (f"{989.4e12 / 4.8e12:,.0f}", f"{roof.peak_flops / roof.bandwidth:,.0f}")
    with pytest.raises(ValueError, match="as many roofs each, got 2 and 1"):
        tables.ceilings_table([sheet, sheet8], roof)


def test_kv_layout_table_names_models_as_their_makers_do():
    t = tables.kv_layout_table(["gpt2", "deepseek-v3", "qwen1.5-moe-a2.7b"], context=1024)
    names = t.column("model")
    assert names[0] == "GPT-2" and names[1] == "DeepSeek-V3"
    assert "A2.7B" in names[2]  # a parameter count in capitals, as in '8B' and '70B'


def test_rule_cell_writes_counts_whole_and_small_values_to_three_figures():
    assert tables.rule_cell(2164.3) == "2,164" and tables.rule_cell(19.97) == "20" and tables.rule_cell(0.5) == "0.5"
    assert tables.rule_cell(1.112) == "1.11" and tables.rule_cell("never") == "never" and tables.rule_cell(None) == ""
    with pytest.raises(ValueError, match="value"):
        tables.rule_cell(float("nan"))


def test_rules_table_sets_each_examples_rule_beside_its_full_model():
    from roofline.parallel import rules
    from roofline.parallel.planner import plan

    small = rules.rules_for("llama-3-8b", "h100-sxm")
    big = rules.rules_for("llama-3-70b", "h100-sxm", nodes=8, seq=8192, global_batch=512)
    t = tables.rules_table({"8B": small, "70B": big}, title="rules")
    assert t.columns == ("rule", "8B", "70B", "after the slash") and len(t.rows) == len(small)
    ridge = dict(zip(t.columns, t.rows[0]))
    assert ridge == {"rule": "ridge point (FLOP/B, chapter 1)", "8B": "295", "70B": "295",
                     "after the slash": ""}  # no second answer, nothing to explain
    # issue 52: every row with a slash says what follows it, and only those rows
    for row in t.rows:
        assert (" / " in row[1] or " / " in row[2]) == bool(row[-1]), row
    assert all(any(r.name.startswith(k) for k in tables.AFTER_THE_SLASH) for r in big if r.model_value is not None)
    said = dict((r[0].split(" (")[0], r[-1]) for r in t.rows)
    assert said["data-parallel tokens per GPU"] == "the example: its own tokens per GPU"
    assert said["attention-MLP crossover"].startswith("the full model")
    assert next(r for r in t.rows if r[0].startswith("tensor"))[0] == "tensor-parallel hiding width at degree 8 (chapter 8)"
    mixed = next(dict(zip(t.columns, r)) for r in t.rows if r[0].startswith("mixed"))
    best = plan("llama-3-70b", "h100-sxm", nodes=8, seq=8192, global_batch=512).best
    assert mixed["70B"] == f"{tables.rule_cell(rules.find_rule(big, 'mixed').value)} / {best.tp}"
    assert mixed["8B"] == tables.rule_cell(rules.find_rule(small, "mixed").value)  # no global batch: no planner
    crossover = next(dict(zip(t.columns, r)) for r in t.rows if r[0].startswith("attention"))
    assert crossover["8B"] == "43,008 / 43,007"
    assert next(r for r in t.rows if r[0].startswith("compute-bound"))[1] == "295 / never"


def test_a_rule_with_a_second_figure_and_no_phrase_is_refused():
    from roofline.parallel.rules import RuleResult

    odd = RuleResult("a new rule", 1.0, "", 1, "", "", model_value=2.0)
    with pytest.raises(KeyError, match="no phrase in AFTER_THE_SLASH"):
        tables.after_the_slash(odd)
    assert tables.after_the_slash(RuleResult("a new rule", 1.0, "", 1, "", "")) == ""


def test_rules_table_refuses_examples_of_different_rules():
    from roofline.parallel import rules

    with pytest.raises(ValueError, match="same rules"):
        tables.rules_table({"a": rules.rules_for("llama-3-8b", "h100", tp=8),
                            "b": rules.rules_for("llama-3-8b", "h100", tp=4)})
    with pytest.raises(TypeError, match="examples"):
        tables.rules_table([])


def test_rule_check_table_sets_each_case_beside_the_full_model_with_the_reason():
    from roofline.parallel import rules
    from roofline.present import tables

    a, b = rules.fsdp_check("llama-3-8b", "h100-sxm"), rules.attention_check("llama-3-8b")
    t = tables.rule_check_table({"FSDP": a, "attention": b}, rule="rule", model="model", title="t")
    assert t.columns == ("case", "rule", "model", "why they part")
    assert t.column("rule") == (tables.rule_cell(a.value), tables.rule_cell(b.value))
    assert t.column("model") == (tables.rule_cell(a.model_value), tables.rule_cell(b.model_value))
    assert t.column("why they part") == (a.reason, b.reason) and "why they part" in t.wrap
    with pytest.raises(TypeError, match="RuleResult"):
        tables.rule_check_table({"x": 3.0})
    with pytest.raises(TypeError, match="map"):
        tables.rule_check_table([])


def test_layer_table_lists_a_layers_pieces_and_adds_them_up():
    from roofline.core.model import layer_components, load_model
    from roofline.present import tables

    t = tables.layer_table(["llama-3-8b", "llama-3-70b"], 8192, title="layer")
    assert t.column("piece")[:7] == ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    assert t.column("piece")[-1] == "layer" and t.rows[-1][1] == "218M"  # Llama 3 8B's layer: 218,103,808 weights
    assert t.column("Llama 3 8B: params")[7] == "8,192"  # two norms of 4,096
    with pytest.raises(ValueError, match="at least one"):
        tables.layer_table([], 8192)
    m = load_model("llama-3-8b")
    assert sum(c.params for c in layer_components(m, 1)) == m.layer_matmul_params + 2 * m.hidden_size


def test_calibrated_rules_table_shows_only_the_rate_bound_rules_datasheet_then_measured():
    from roofline.core.calibration import get_roof
    from roofline.parallel import rules

    roof = get_roof("h100-sxm", "calibrated")
    small = rules.rules_for("llama-3-8b", "h100-sxm", roof=roof)
    t = tables.calibrated_rules_table({"8B": small})
    names = [r[0].split(" (")[0] for r in t.rows]
    assert "KV-bound batch" not in names and "attention-MLP crossover" not in names
    ridge = dict(zip(t.columns, t.rows[0]))
    assert ridge["8B"] == f"295 → {tables.rule_cell(roof.gemm.top / roof.bandwidth)}"
    with pytest.raises(ValueError, match="roof="):
        tables.calibrated_rules_table({"8B": rules.rules_for("llama-3-8b", "h100-sxm")})


def test_keep_table_lists_every_saved_tensor_with_both_verdicts():
    t = tables.keep_table("llama-3-8b", "h100-sxm", 4096)
    rows = {r[0]: dict(zip(t.columns, r)) for r in t.rows}
    assert len(rows) == len(M.saved_tensors("llama-3-8b"))
    assert rows["RMSNorm 1 input"]["rebuild FLOP/B"] == "the layer's input"
    assert rows["up output"]["rebuild FLOP/B"] == "4,096" and rows["up output"]["the ridge"] == "keep"
    assert rows["SiLU output"]["rebuild FLOP/B"] == "2.5" and rows["SiLU output"]["matmul outputs"] == "rebuild"
    assert rows["RMSNorm 1 statistics (fp32)"]["the ridge"] == "keep"
    assert rows["RMSNorm 1 statistics (fp32)"]["matmul outputs"] == "rebuild"


def test_network_threshold_table_sets_chapter_1s_count_beside_chapter_7s(h100):
    # By hand, H100 SXM: 989.4 TFLOP/s; NVLink 450 GB/s and InfiniBand 50 GB/s each way. The first-order
    # threshold sets the ring all-reduce's 2 (G-1)/G * 2N bytes against 6N FLOPs a token: 2 (G-1)/G * 2/6 * P/B.
    # The backward pass alone has 4N FLOPs a token: (G-1)/G * P/B, half as much again.
    t = tables.network_threshold_table("llama-3-8b", h100, [1, 16])
    assert t.column("cluster") == ("8 GPUs, one node (NVLink)", "128 GPUs, 16 nodes (network)")
    nvlink, ib = 989.4e12 / 450e9, 989.4e12 / 50e9
    assert t.rows[0][1:3] == (f"{2 * 7 / 8 * 2 / 6 * nvlink:,.0f}", f"{7 / 8 * nvlink:,.0f}") == ("1,283", "1,924")
    assert t.rows[1][1:3] == (f"{2 * 127 / 128 * 2 / 6 * ib:,.0f}", f"{127 / 128 * ib:,.0f}") == ("13,089", "19,633")
    # one node has one schedule; across nodes each port carries an eighth of the buffer, so about 8 times fewer
    assert t.rows[0][3] == t.rows[0][2]
    flat, scheduled = (float(x.replace(",", "")) for x in t.rows[1][2:])
    assert 7 < flat / scheduled < 10
    with pytest.raises(TypeError, match="nodes must be a sequence"):
        tables.network_threshold_table("llama-3-8b", h100, 4)
