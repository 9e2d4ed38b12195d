"""Training FLOPs, MFU and HFU; the bandwidth tiers and ZeRO traffic."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

import roofline as rl
import roofline.workloads.training
from roofline.workloads import memory, training


def test_six_n_and_recompute(llama):
    assert rl.training_flops_per_token(llama) == 6 * llama.params
    assert rl.training_flops_per_token(llama, recompute="full") == 8 * llama.params
    assert rl.training_flops_per_token(1e9) == 6e9
    with pytest.raises(ValueError, match="recompute must be one of"):
        rl.training_flops_per_token(llama, recompute="selective-ish")


def test_attention_term_is_added_on_request(llama):
    extra = rl.training_flops_per_token(llama, attention_context=8192) - rl.training_flops_per_token(llama)
    # forward 2 * S * width * layers per token (causal half), times 3 for forward and backward
    assert extra == pytest.approx(6 * 8192 * llama.attention_width * llama.num_layers)
    with pytest.raises(TypeError, match="needs the model's shape"):
        rl.training_flops_per_token(8e9, attention_context=8192)


@given(share=st.floats(1e-6, 0.75), gpus=st.integers(1, 100_000))
def test_hfu_is_never_below_mfu_and_mfu_round_trips(share, gpus):
    tps = share * rl.tokens_per_s_at_mfu(1.0, "llama-3-8b", "h100-sxm", gpus=gpus)
    m = rl.mfu(tps, "llama-3-8b", gpus, "h100-sxm")
    assert rl.hfu(tps, "llama-3-8b", gpus, "h100-sxm") >= m
    assert rl.tokens_per_s_at_mfu(m, "llama-3-8b", "h100-sxm", gpus=gpus) == pytest.approx(tps)


def test_mfu_input_checks():
    with pytest.raises(ValueError, match="gpus must be"):
        rl.mfu(1000, "llama-3-8b", 0, "h100-sxm")
    with pytest.raises(ValueError, match="cannot exceed 1"):
        rl.tokens_per_s_at_mfu(1.2, "llama-3-8b", "h100-sxm")
    with pytest.raises(ValueError, match="tokens_per_s must be"):
        rl.mfu(-3, "llama-3-8b", 8, "h100-sxm")


def test_model_state_is_16_bytes_per_parameter(llama):
    assert rl.model_state_bytes(llama) == 16 * llama.params
    with pytest.raises(KeyError, match="unknown recipe 'fp4-magic'"):
        rl.model_state_bytes(llama, "fp4-magic")


def test_tiers_descend_and_cite_sources(h100):
    tiers = rl.bandwidth_tiers(h100)
    assert [t.level for t in tiers] == ["HBM", "scale_up", "host", "network"]
    rates = [t.each_way for t in tiers]
    assert rates == sorted(rates, reverse=True)
    assert all(t.figure.source.url for t in tiers)
    assert tiers[0].time(3.35e12) == pytest.approx(1.0)


def test_zero3_moves_one_and_a_half_times_the_traffic(llama):
    dp = rl.data_parallel_bytes(llama.params, 64)
    assert rl.data_parallel_bytes(llama.params, 64, zero_stage=3) == pytest.approx(1.5 * dp)
    assert rl.data_parallel_bytes(llama.params, 64, zero_stage=2) == dp
    assert rl.data_parallel_bytes(llama.params, 1) == 0
    with pytest.raises(ValueError, match="zero_stage must be"):
        rl.data_parallel_bytes(llama.params, 8, zero_stage=4)


def test_mfu_calculator_rows_follow_the_package():
    from roofline.present import tables

    t = tables.mfu_calculator([("llama-3-8b", 8, "h100-sxm", 60_000)])
    assert t.column("MFU") == (f"{100 * rl.mfu(60_000, 'llama-3-8b', 8, 'h100-sxm'):.1f}%",)
    assert t.column("GPUs") == ("8 × H100 SXM",)
    with pytest.raises(KeyError, match="did you mean"):
        tables.mfu_calculator([("llama-3-8b", 8, "h100-smx", 60_000)])


def test_one_recompute_table_for_memory_and_compute(llama, h100):
    from roofline.workloads import memory
    from roofline.core import policies

    assert policies.RECOMPUTES == tuple(policies.RECOMPUTE) == ("none", "selective", "full")
    # selective recomputation redoes the attention core only: no parameter FLOPs, one more attention forward
    ctx = 8192
    fwd_attn = 2 * ctx * llama.attention_width * llama.num_layers  # causal, per token
    none = rl.training_flops_per_token(llama, attention_context=ctx)
    sel = rl.training_flops_per_token(llama, recompute="selective", attention_context=ctx)
    full = rl.training_flops_per_token(llama, recompute="full", attention_context=ctx)
    assert none == 6 * llama.params + 3 * fwd_attn
    assert sel == 6 * llama.params + 4 * fwd_attn
    assert full == 8 * llama.params + 4 * fwd_attn
    tps = 1e4
    assert rl.mfu(tps, llama, 8, h100, attention_context=ctx) < rl.hfu(tps, llama, 8, h100, recompute="selective",
                                                                      attention_context=ctx) < rl.hfu(
        tps, llama, 8, h100, recompute="full", attention_context=ctx)
    with pytest.raises(ValueError, match="recompute must be one of 'none', 'selective', 'full'"):
        rl.hfu(tps, llama, 8, h100, recompute="some")


def test_one_zero_table_for_memory_and_network(llama):
    from roofline.workloads import memory
    from roofline.core import policies

    for stage, z in policies.ZERO_STAGES.items():
        state = memory.zero_model_state(llama, 8, stage)
        full = memory.model_state(llama)
        for part in full.parts:
            assert state[part] == (full[part] / 8 if part in z.shards else full[part])
        assert rl.data_parallel_bytes(llama.params, 8, zero_stage=stage) == z.traffic * 7 / 8 * 2 * llama.params
def test_mfu_and_hfu_above_one_are_refused_as_tokens_per_s_at_mfu_refuses_them():
    # 1e9 tokens/s of Llama 3 8B on one H100 would be about 48,700 times its peak
    with pytest.raises(ValueError, match=r"implies an MFU of 4.87e\+04, above 1"):
        rl.mfu(1e9, "llama-3-8b", 1, "h100-sxm")
    top = rl.tokens_per_s_at_mfu(1.0, "llama-3-8b", "h100-sxm")
    assert rl.mfu(top, "llama-3-8b", 1, "h100-sxm") == pytest.approx(1.0)
    with pytest.raises(ValueError, match="HFU"):  # full recomputation runs 8N per token, not 6N
        rl.hfu(0.9 * top, "llama-3-8b", 1, "h100-sxm")
# --- chapter 1's network roofline: the data-parallel gradient exchange against the step's arithmetic ---


def test_gradient_sync_threshold_is_where_compute_equals_communication(llama, h100):
    gpus = 64
    t = rl.workloads.training.gradient_sync_tokens(llama, h100, gpus, "network")
    compute = rl.training_flops_per_token(llama) * t / h100.peak_flops()
    comm = rl.data_parallel_bytes(llama.params, gpus) / h100.interconnect["network"].each_way
    assert compute == pytest.approx(comm)
    # N cancels: the threshold belongs to the chip and the link, not the model
    assert rl.workloads.training.gradient_sync_tokens("llama-3.1-405b", h100, gpus, "network") == pytest.approx(t)
    # the closed form 2 (G-1)/G * 2 P / (6 B)
    assert t == pytest.approx(2 * (gpus - 1) / gpus * 2 * h100.peak_flops() / (6 * h100.interconnect["network"].each_way))


def test_nvlink_needs_fewer_tokens_than_infiniband_by_the_ratio_of_the_links(llama, h100):
    nv = rl.workloads.training.gradient_sync_tokens(llama, h100, 8, "scale_up")
    ib = rl.workloads.training.gradient_sync_tokens(llama, h100, 8, "network")
    ratio = h100.interconnect["scale_up"].each_way / h100.interconnect["network"].each_way
    assert ib / nv == pytest.approx(ratio)
    assert rl.workloads.training.gradient_sync_tokens(llama, h100, 8, "network", zero_stage=3) == pytest.approx(1.5 * ib)
    with pytest.raises(ValueError, match="link must be one of"):
        rl.workloads.training.gradient_sync_tokens(llama, h100, 8, "nvlink")


def test_matmul_intensity_table_follows_the_package():
    from roofline.present import tables

    t = tables.matmul_intensity_table([1, 4096], 4096, 4096)
    assert t.column("intensity, bf16 (FLOP/B)") == tuple(
        f"{rl.matmul(m, 4096, 4096).intensity:,.2f}" for m in (1, 4096))
# --- formulas a reader can check by hand, in Llama 3 8B's config numbers (the `shape` fixture) ----

H100_BF16 = 989.4e12  # dense bf16 FLOP/s of the H100 SXM datasheet (test_text_numbers checks the catalog says so)


def test_attention_term_under_full_recompute_is_four_forward_passes(llama, shape):
    # causal attention's forward pass per token at context S: half of 4 S width layers
    s = 8192
    forward = 2 * s * shape.heads * shape.head_dim * shape.layers  # 2.1 GFLOP per token
    n = llama.params
    # no recomputation: forward + backward (twice the forward) = 3 forwards, as 6N = 3 x 2N
    assert rl.training_flops_per_token(llama, attention_context=s) == pytest.approx(6 * n + 3 * forward, rel=1e-15)
    # full recomputation runs the forward once more: 4 forwards, as 8N = 4 x 2N
    assert rl.training_flops_per_token(llama, recompute="full", attention_context=s) == pytest.approx(
        8 * n + 4 * forward, rel=1e-15)


@given(context=st.integers(1, 1 << 20))
def test_full_recompute_adds_exactly_one_forward_pass(context):
    m = rl.load_model("llama-3-8b")
    none = rl.training_flops_per_token(m, attention_context=context)
    full = rl.training_flops_per_token(m, recompute="full", attention_context=context)
    forward = 2 * m.params + 2 * context * m.attention_width * m.num_layers
    assert full - none == pytest.approx(forward, rel=1e-12)
    assert full / none == pytest.approx(4 / 3, rel=1e-12)


def test_mfu_and_hfu_by_hand(llama, h100):
    n = llama.params
    assert h100.peak_flops("bf16") == pytest.approx(H100_BF16)
    # 400,000 tokens/s on 64 H100s: 400e3 x 6 x 8.03e9 / (64 x 989.4 TFLOP/s) = 30.4%
    assert rl.mfu(400_000, llama, 64, h100) == pytest.approx(400_000 * 6 * n / (64 * H100_BF16))
    assert rl.mfu(400_000, llama, 64, h100) == pytest.approx(0.304, abs=5e-4)
    assert rl.hfu(400_000, llama, 64, h100) == pytest.approx(400_000 * 8 * n / (64 * H100_BF16))
    assert rl.hfu(400_000, llama, 64, h100, recompute="none") == pytest.approx(rl.mfu(400_000, llama, 64, h100))
    attention = 6 * 8192 * 4096 * 32
    assert rl.mfu(400_000, llama, 64, h100, attention_context=8192) == pytest.approx(
        400_000 * (6 * n + attention) / (64 * H100_BF16))
    fp8 = h100.peak_flops("fp8")
    assert rl.mfu(400_000, llama, 64, h100, dtype="fp8") == pytest.approx(400_000 * 6 * n / (64 * fp8))


def test_tokens_per_s_at_mfu_backs_out_6n(llama, h100):
    big = rl.load_model("llama-3.1-405b")
    # 40% of 16,384 H100s on a 405B model: 0.4 x 16,384 x 989.4e12 / (6 x 405.85e9)
    assert rl.tokens_per_s_at_mfu(0.4, big, h100, gpus=16_384) == pytest.approx(
        0.4 * 16_384 * H100_BF16 / (6 * 405_853_388_800))
    assert rl.tokens_per_s_at_mfu(0.4, big, h100) == pytest.approx(0.4 * H100_BF16 / (6 * big.params))
    with_attention = 6 * big.params + 6 * 8192 * big.attention_width * big.num_layers
    assert rl.tokens_per_s_at_mfu(0.4, big, h100, attention_context=8192) == pytest.approx(
        0.4 * H100_BF16 / with_attention)


def test_ring_all_reduce_sends_2_g_minus_1_over_g_of_the_gradients(llama):
    psi = 2 * llama.params  # bf16 gradients
    for g in (2, 8, 64):
        assert rl.data_parallel_bytes(llama.params, g) == pytest.approx(2 * (g - 1) / g * psi)
        assert rl.data_parallel_bytes(llama.params, g, zero_stage=3) == pytest.approx(3 * (g - 1) / g * psi)
        assert rl.data_parallel_bytes(llama.params, g, bytes_per_param=4) == pytest.approx(2 * (g - 1) / g * 2 * psi)


def test_links_one_way_and_the_tiers_table_steps(h100):
    links = h100.interconnect
    # NVLink 4 is quoted as 900 GB/s both ways together: 450 GB/s each way
    assert links["scale_up"].direction == "bidirectional"
    assert links["scale_up"].each_way == links["scale_up"].bytes_per_s / 2
    from roofline.present import tables

    tiers = rl.bandwidth_tiers(h100)
    t = tables.tiers_table(tiers)
    hbm, nvlink, pcie, ib = 3.35e12, 450e9, 64e9, 50e9
    # every tier measured against HBM, as chapter 1's prose states it
    assert t.column(f"slower than {tiers[0].name}") == ("1.0×", rl.fmt(hbm / nvlink, "×", 2), rl.fmt(hbm / pcie, "×", 2),
                                                        rl.fmt(hbm / ib, "×", 2))
    assert t.column("per GPU, one way") == ("3.35 TB/s", "450 GB/s", "64.0 GB/s", "50.0 GB/s")
    assert tiers[1].time(450e9) == pytest.approx(1.0)


# ---- chapter 3's quoted ratios, moved out of the notebook ---------------------------------------------------

def test_recompute_overhead_and_the_mfu_ceiling_it_sets():
    from roofline.workloads import training as T

    none = T.training_step("llama-3-8b", 4096)
    full = T.training_step("llama-3-8b", 4096, recompute="full")
    assert T.recompute_overhead(none) == 0
    r = T.recompute_overhead(full)
    # rerunning every layer's forward, not the output head: a bit under the law's third
    assert 0.29 < r < T.full_recompute_extra() == pytest.approx(1 / 3)
    assert T.mfu_ceiling(full) == pytest.approx(1 / (1 + r))  # (F + B) / (F + B + R)
    assert T.mfu_ceiling(none) == 1
    with pytest.raises(TypeError, match="step must be a training_step Breakdown"):
        T.recompute_overhead(rl.decode_step("llama-3-8b", 1))
    with pytest.raises(TypeError, match="step must be a training_step Breakdown"):
        T.mfu_ceiling(3.0)


def test_lm_head_share_of_the_forward_by_hand():
    from roofline.workloads import training as T

    step = T.training_step("llama-3-8b", 4096)
    # 2 x 4,096 x 128,256 FLOPs per token for the head, of 16.08 GFLOP per token forward
    assert T.forward_share(step, "lm_head") == pytest.approx(2 * 4096 * 128_256 * 4096 / step["forward"].flops)
    assert 0.065 < T.forward_share(step, "lm_head") < 0.066
    with pytest.raises(KeyError, match="lm_hed"):
        T.forward_share(step, "lm_hed")


def test_layer_forward_terms_and_offload_intensity_by_hand():
    from roofline.workloads import training as T

    f0, f1 = T.layer_forward_flops_terms("llama-3-8b")
    # 218,103,808 matmul weights per layer (q, o: 4096^2; k, v: 4096 x 1024; MLP 3 x 4096 x 14336)
    assert (f0, f1) == (2 * (2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336), 2 * 4096)
    assert T.layer_forward_flops("llama-3-8b", 4096) == pytest.approx(f0 + f1 * 4096)
    # full recomputation keeps 8,192 bytes per token and layer
    assert T.offload_intensity("llama-3-8b", 4096, recompute="full") == pytest.approx((f0 + f1 * 4096) / 8192)
    assert T.offload_intensity("llama-3-8b", 4096) == pytest.approx((f0 + f1 * 4096) / 168_072)


def test_micro_batches_to_hide_and_flops_by_micro_batch():
    import math
    from types import SimpleNamespace

    import numpy as np

    from roofline.workloads import training as T

    plan = T.plan_training("llama-3-70b", "h100-sxm", seq=2048, gpus=64, zero_stage=3, recompute="full")
    assert T.micro_batches_to_hide(plan) == math.ceil(plan.network_time / plan.compute_time)
    with pytest.raises(TypeError, match="plan must be a TrainingPlan"):
        T.micro_batches_to_hide(None)
    plans = [SimpleNamespace(micro_batch=1, mfu=0.5, hfu=0.6, peak=10.0),
             SimpleNamespace(micro_batch=3, mfu=0.4, hfu=0.5, peak=10.0)]
    y = T.flops_by_micro_batch(plans, "mfu", 4)
    assert y[0] == 5.0 and y[2] == 4.0 and np.isnan(y[1]) and np.isnan(y[3])
    assert T.flops_by_micro_batch(plans, "hfu", 4)[0] == 6.0
    with pytest.raises(ValueError, match="what must be 'mfu' or 'hfu'"):
        T.flops_by_micro_batch(plans, "tps")
    with pytest.raises(ValueError, match="outside 1 to max_micro_batch=2"):
        T.flops_by_micro_batch(plans, "mfu", 2)


# ---- chapter 1's training figures -----------------------------------------------------------------------------

def test_sequence_compute_time_and_the_embedding_overcount_by_hand():
    from roofline.workloads import training as T

    h100 = rl.get_hardware("h100-sxm")
    per_token = T.training_flops_per_token("llama-3-8b")
    assert T.sequence_compute_time("llama-3-8b", h100, 8192) == pytest.approx(per_token * 8192 / 989.4e12)
    # Llama 3 8B: 8,030,261,248 parameters, of them 128,256 x 4,096 in the embedding table
    assert T.non_embedding_params("llama-3-8b") == 8_030_261_248 - 128_256 * 4096
    assert T.embedding_overcount("llama-3-8b") == pytest.approx(128_256 * 4096 / (8_030_261_248 - 128_256 * 4096))
    with pytest.raises(ValueError, match="tokens"):
        T.sequence_compute_time("llama-3-8b", h100, -1)


@pytest.mark.parametrize("call, error, message", [
    (lambda: roofline.workloads.training.layer_forward_flops_terms("llama-3-9b"), KeyError, "unknown model"),
    (lambda: roofline.workloads.training.offload_intensity("llama-3-8b", 0), ValueError, "seq must be a whole number"),
    (lambda: roofline.workloads.training.non_embedding_params(3), TypeError, "model must be a name"),
    (lambda: roofline.workloads.training.embedding_overcount("llama-3-9b"), KeyError, "unknown model"),
    (lambda: roofline.workloads.training.forward_share(3.0, "lm_head"), TypeError, "step must be a training_step"),
])
def test_chapter_1_and_3_training_helpers_refuse_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()


# ---- one definition of model FLOPs (chapter 1, used everywhere) ----------------------------------------

def test_model_flops_count_causal_attention_whatever_the_kernel():
    flash = training.training_step("llama-3-8b", 4096)
    explicit = training.training_step("llama-3-8b", 4096, attention="explicit")
    model = lambda s: s["forward"].flops + s["backward"].flops
    # 197.6 TFLOP of model FLOPs both ways; explicit attention runs the masked half of the square on top
    assert model(flash) == pytest.approx(197.63e12, rel=1e-4)
    assert model(explicit) == pytest.approx(model(flash))
    assert explicit.flops == pytest.approx(210.82e12, rel=1e-4)
    assert explicit["masked"].flops == pytest.approx(explicit.flops - model(explicit))
    assert "masked" not in flash.parts and flash.flops == pytest.approx(model(flash))
    # the masked half is a little under half the square's products: the causal triangle keeps the diagonal
    square = 3 * sum(o.flops for o in rl.prefill("llama-3-8b", 4096, accounting="refined", attention="explicit").ops
                     if o.name in ("scores", "pv"))
    assert explicit["masked"].flops == pytest.approx(square * (1 - 4097 / 8192), rel=1e-9)
    # so MFU is the same for both kernels at the same step time, and only HFU sees the masked work
    assert training.mfu_ceiling(explicit) == pytest.approx(model(flash) / explicit.flops)
    assert training.mfu_ceiling(flash) == 1


def test_selective_recomputation_with_explicit_attention_reruns_the_whole_square():
    sel = training.training_step("llama-3-8b", 4096, recompute="selective", attention="explicit")
    none = training.training_step("llama-3-8b", 4096, attention="explicit")
    assert sel["forward"].flops + sel["backward"].flops == pytest.approx(none["forward"].flops + none["backward"].flops)
    assert sel["recompute"].flops == pytest.approx(sum(o.flops for o in rl.prefill(
        "llama-3-8b", 4096, accounting="refined", attention="explicit").ops if o.name in ("scores", "pv")))


def test_frontier_charges_explicit_attention_its_masked_half_and_flash_nothing():
    pts = {p.label: p for p in training.frontier("llama-3-8b", 4096, 1, spacings=[1])}
    explicit = training.training_step("llama-3-8b", 4096, attention="explicit")
    model = explicit["forward"].flops + explicit["backward"].flops
    assert pts["no recompute, explicit attention"].extra_flops == pytest.approx(explicit["masked"].flops / model)
    assert 0.06 < pts["no recompute, explicit attention"].extra_flops < 0.07  # 6.7% at 4,096 tokens
    assert pts["no recompute, flash"].extra_flops == 0 and pts["offload, no recompute"].extra_flops == 0
    assert pts["full (every layer)"].extra_flops == pytest.approx(training.recompute_overhead(training.training_step(
        "llama-3-8b", 4096, recompute="full")))
    assert pts["offload, no recompute"].host_bytes == pytest.approx(
        float(memory.training_footprint("llama-3-8b", 4096, 1, offload=True).host))


def test_step_tokens_counts_a_global_batch_and_refuses_a_count_past_exact():
    from roofline.workloads.training import step_tokens

    assert step_tokens(512, 8192) == 4_194_304  # Llama 3 70B's step in chapter 9
    with pytest.raises(ValueError, match="at most 2\\*\\*53 tokens a step"):
        step_tokens(2**40, 2**20)
    with pytest.raises(ValueError, match="seq"):
        step_tokens(512, 0)
