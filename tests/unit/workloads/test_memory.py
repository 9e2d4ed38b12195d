"""Chapter 2's memory accounting: model state, ZeRO, activations against Korthikanti et al."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import roofline as rl
from roofline.workloads import memory as M
from roofline.core.policies import RECOMPUTES

# GPT-3 style configurations of Korthikanti et al., Table 3: (hidden, heads, layers, tensor parallel)
PAPER = M.KORTHIKANTI_CONFIGS


def test_mixed_precision_adam_is_16_bytes_per_parameter(llama):
    state = M.model_state(llama)
    assert dict(state.parts) == {k: v * llama.params for k, v in
                                 {"weights": 2, "gradients": 2, "master": 4, "momentum": 4, "variance": 4}.items()}
    assert round(state.total / 1e9, 1) == 128.5
    assert not state.fits("h100-sxm") and state.fits("h200-sxm")


def test_recipes_by_bytes_per_parameter():
    per_param = {r: M.model_state(1.0, r).total for r in M.RECIPES}
    assert per_param == {"fp32-adam": 16, "mixed-adam": 16, "bf16-adam": 8, "mixed-adam-8bit": 10}
    with pytest.raises(KeyError, match="did you mean 'mixed-adam'"):
        M.model_state(1.0, "mixed-adm")


@given(gpus=st.integers(1, 4096))
def test_zero_stages_follow_the_paper(gpus):
    psi = 1e9
    per_gpu = [M.zero_model_state(psi, gpus, stage).total for stage in range(4)]
    assert per_gpu[0] == pytest.approx(16 * psi)
    assert per_gpu[1] == pytest.approx(4 * psi + 12 * psi / gpus)
    assert per_gpu[2] == pytest.approx(2 * psi + 14 * psi / gpus)
    assert per_gpu[3] == pytest.approx(16 * psi / gpus)
    assert per_gpu == sorted(per_gpu, reverse=True)


@pytest.mark.parametrize("name", PAPER)
@pytest.mark.parametrize("recompute", RECOMPUTES)
@pytest.mark.parametrize("tp, sp", [(1, False), (8, False), (8, True)])
def test_gpt_layer_tensors_reproduce_the_paper(name, recompute, tp, sp):
    h, a, _, _ = PAPER[name]
    tensors = M.saved_tensors(architecture="gpt", hidden=h, heads=a, flash=False)
    for s, b in [(2048, 1), (2048, 4), (8192, 1)]:
        ours = M.activation_bytes(tensors, s, b, recompute=recompute, tp=tp, sequence_parallel=sp)
        paper = M.korthikanti_bytes(s, b, h, a, recompute=recompute, tp=tp, sequence_parallel=sp)
        assert ours == pytest.approx(paper, rel=1e-12)


def test_paper_closed_form_values():
    # sbh(34 + 5as/h) for the 175B model at s = 2048, one sequence: 2.87 GB per layer
    h, a, layers, t = PAPER["175B"]
    assert M.korthikanti_bytes(2048, 1, h, a) == 2048 * h * (34 + 5 * a * 2048 / h)
    # with tensor and sequence parallelism of 8 and selective recompute, 34 sbh / t
    assert M.korthikanti_bytes(2048, 1, h, a, recompute="selective", tp=t, sequence_parallel=True) == 34 * 2048 * h / 8


def test_llama_flash_attention_removes_the_square(llama):
    flash = M.saved_tensors(llama, flash=True)
    plain = M.saved_tensors(llama, flash=False)
    at = {s: M.activation_bytes(plain, s, 1) - M.activation_bytes(flash, s, 1) for s in (1024, 4096)}
    # the explicit form's extra memory grows with s^2 (a*s^2 bf16 scores), the flash form's does not
    assert at[4096] / at[1024] == pytest.approx(16, rel=0.01)
    per_token = M.activation_bytes(flash, 1, 1)
    assert M.activation_bytes(flash, 8192, 1) == pytest.approx(8192 * per_token)


def test_activations_dominate_at_long_sequences(llama):
    fp = M.training_footprint(llama, 8192, 1)
    assert fp["activations"] > fp["weights"]
    full = M.training_footprint(llama, 8192, 1, recompute="full")
    assert full["activations"] == llama.num_layers * 8192 * llama.hidden_size * 2


def test_kv_cache_capacity(llama):
    tokens = M.kv_cache_capacity_tokens(llama, "h100-sxm")
    # an "80 GB" H100 reports 85,045,477,376 bytes; 1 GiB is kept for the CUDA context
    assert tokens == (85_045_477_376 - 2**30 - 2 * llama.params) // 131_072
    assert M.kv_cache_capacity_tokens("llama-3.1-405b", "h100-sxm") is None


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: M.activation_bytes(M.saved_tensors("llama-3-8b"), 4096, -1), "micro_batch must be"),
        (lambda: M.activation_bytes(M.saved_tensors("llama-3-8b"), 4096, 1, recompute="some"), "recompute must be one of"),
        (lambda: M.training_footprint("llama-3-8b", 0, 1), "seq must be"),
        (lambda: M.zero_model_state(1e9, 8, 4), "stage must be"),
        (lambda: M.saved_tensors(architecture="mamba"), "architecture must be"),
    ],
)
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_korthikanti_table_says_yes_for_every_configuration():
    from roofline.present import tables

    t = tables.korthikanti_table()
    assert t.column("equals the paper") == ("yes",) * len(M.KORTHIKANTI_CONFIGS)


# --- verdicts in words (chapter 2 glues them, so they must follow the catalog's capacity) ---------


def test_fit_verdict_states_the_margin_the_capacity_gives(llama):
    h100 = rl.get_hardware("h100-sxm")
    bf16 = M.model_state(llama, "bf16-adam").total
    mixed = M.model_state(llama, "mixed-adam").total
    assert M.fit_verdict(bf16, h100) == f"fits on the H100 SXM with {rl.fmt(h100.usable_capacity - bf16, 'B')} to spare"
    assert M.fit_verdict(mixed, h100) == f"does not fit on the H100 SXM, by {rl.fmt(mixed - h100.usable_capacity, 'B')}"
    # the words follow the capacity: a card one byte too small flips the verdict
    # a card one byte too small for the state: the verdict flips
    assert M.fit_verdict(bf16, h100.with_(hbm_total=bf16 - 1 + h100.reserve)).startswith("does not fit")


def test_fit_summary_is_one_english_clause(llama):
    h100, h200 = rl.get_hardware("h100-sxm"), rl.get_hardware("h200-sxm")
    between = (h100.usable_capacity + h200.usable_capacity) / 2
    assert M.fit_summary(between, [h100, h200]).startswith("fits on the H200, not on the H100 SXM (over the H100 SXM")
    assert M.fit_summary(1e9, [h100, h200]) == "fits on both the H100 SXM and the H200"
    too_big = 2 * h200.usable_capacity
    assert M.fit_summary(too_big, [h100, h200]) == (
        f"fits on neither the H100 SXM nor the H200 (over the largest by {rl.fmt(too_big - h200.usable_capacity, 'B')})")
    with pytest.raises(ValueError, match="nbytes"):
        M.fit_verdict(-1, h100)


# --- recomputation keeps a working set -------------------------------------------------------------


def test_recompute_working_set_is_one_layer_less_what_the_policy_keeps(llama):
    tensors = M.saved_tensors(llama, flash=True)
    whole = M.activation_bytes(tensors, 8192, 1)
    checkpoint = M.activation_bytes(tensors, 8192, 1, recompute="full")
    assert M.recompute_working_set(tensors, 8192, 1) == 0
    assert M.recompute_working_set(tensors, 8192, 1, recompute="selective") == 0  # flash keeps no scores
    assert M.recompute_working_set(tensors, 8192, 1, recompute="full") == whole - checkpoint
    explicit = M.saved_tensors(llama, flash=False)
    scores = sum(t.nbytes(8192, 1) for t in explicit if t.per_score)
    assert M.recompute_working_set(explicit, 8192, 1, recompute="selective") == pytest.approx(scores)


def test_full_recompute_footprint_counts_the_layer_being_recomputed(llama):
    """The case the issue found: ten 8,192-token sequences looked like they fit on eight H100s under
    ZeRO-3 with full recomputation; the recomputed layer's working set does not leave room."""
    fp = M.training_footprint(llama, 8192, 10, gpus=8, zero_stage=3, recompute="full")
    tensors = M.saved_tensors(llama, flash=True)
    assert fp["recompute working set"] == pytest.approx(M.activation_bytes(tensors, 8192, 10)
                                                        - M.activation_bytes(tensors, 8192, 10, recompute="full"))
    assert fp["recompute working set"] > 10e9
    assert M.training_footprint(llama, 8192, 10, gpus=8, zero_stage=3)["recompute working set"] == 0


def test_footprint_table_margins_follow_the_capacity(llama):
    from roofline.present import tables

    h100 = rl.get_hardware("h100-sxm")
    one = M.training_footprint(llama, 4096, 1)
    z3 = M.training_footprint(llama, 4096, 1, gpus=8, zero_stage=3, recompute="full")
    t = tables.footprint_table({"1 GPU": one, "ZeRO-3": z3}, capacities=("h100-sxm",))
    assert t.column("H100 SXM") == (f"{rl.fmt(one.total - h100.usable_capacity, 'B')} over",
                                    f"{rl.fmt(h100.usable_capacity - z3.total, 'B')} spare")
    assert t.column("working set") == (rl.fmt(0.0, "B"), rl.fmt(z3["recompute working set"], "B"))
    state = one.total - one["activations"] - one["logits"] - one["recompute working set"]
    assert t.column("model state")[0] == rl.fmt(state, "B")
# --- formulas a reader can check by hand, in Llama 3 8B's config numbers (the `shape` fixture) ----


def _llama_layer_bytes_per_token(shape, kv_heads=None):
    """One Llama layer's saved tensors for one token, flash attention, no recomputation, bf16."""
    h, i = shape.hidden, shape.intermediate
    q = shape.heads * shape.head_dim  # 4096
    kv = (shape.kv_heads if kv_heads is None else kv_heads) * shape.head_dim  # 8 x 128 = 1024
    return (2 * (h  # RMSNorm 1 input
                 + h  # QKV input
                 + q  # Q after RoPE
                 + 2 * kv  # K after RoPE, and V: the KV heads' width, not the query width
                 + q  # attention output
                 + h  # RMSNorm 2 input
                 + h  # gate/up input
                 + 4 * i)  # gate output, up output, SiLU output, down_proj input
            + 4 * 2  # the two RMSNorms' statistics, fp32, one per token
            + 4 * shape.heads)  # flash attention's log-sum-exp, fp32, one per token and head


def test_llama_layer_saves_k_and_v_at_the_kv_width(llama, shape):
    per_token = _llama_layer_bytes_per_token(shape)
    assert per_token == 168_072
    saved = M.saved_tensors(llama, flash=True)
    assert M.activation_bytes(saved, 1, 1) == per_token
    assert M.activation_bytes(saved, 8192, 2) == 8192 * 2 * per_token
    # the whole model, as the training footprint counts it
    fp = M.training_footprint(llama, 4096, 1)
    assert fp["activations"] == shape.layers * 4096 * per_token


def test_grouped_query_attention_saves_less_than_multi_head_of_the_same_width(llama, shape):
    # a multi-head twin: 32 KV heads instead of 8, everything else the same
    mha = replace(llama, name="llama-3-8b-mha", num_kv_heads=shape.heads)
    s = 4096
    gqa_bytes = M.activation_bytes(M.saved_tensors(llama), s, 1)
    mha_bytes = M.activation_bytes(M.saved_tensors(mha), s, 1)
    # K and V for 24 more heads of 128, in bf16: 12,288 B per token per layer
    assert mha_bytes - gqa_bytes == s * 2 * (shape.heads - shape.kv_heads) * shape.head_dim * 2
    assert mha_bytes == s * _llama_layer_bytes_per_token(shape, kv_heads=shape.heads)


@given(fewer=st.sampled_from([1, 2, 4, 8, 16]), seq=st.integers(1, 32_768), micro_batch=st.integers(1, 16))
def test_fewer_kv_heads_never_save_more(fewer, seq, micro_batch):
    m = rl.load_model("llama-3-8b")
    grouped, full = replace(m, num_kv_heads=fewer), replace(m, num_kv_heads=m.num_heads)
    a = M.activation_bytes(M.saved_tensors(grouped), seq, micro_batch)
    b = M.activation_bytes(M.saved_tensors(full), seq, micro_batch)
    assert b - a == seq * micro_batch * 2 * (m.num_heads - fewer) * m.head_dim * 2 > 0


def test_explicit_attention_adds_the_bf16_scores_and_drops_the_log_sum_exp(llama, shape):
    s = 4096
    flash = M.activation_bytes(M.saved_tensors(llama, flash=True), s, 1)
    plain = M.activation_bytes(M.saved_tensors(llama, flash=False), s, 1)
    # a heads x s x s softmax output in bf16 instead of heads fp32 statistics per token
    assert plain - flash == shape.heads * s * s * 2 - s * shape.heads * 4


def test_full_recompute_keeps_each_layers_bf16_input(llama, shape):
    saved = M.saved_tensors(llama)
    assert M.activation_bytes(saved, 8192, 2, recompute="full") == 8192 * 2 * shape.hidden * 2
    # flash attention has no score-sized tensor: selective recomputation has nothing to drop
    assert M.activation_bytes(saved, 8192, 2, recompute="selective") == 8192 * 2 * _llama_layer_bytes_per_token(shape)


def test_training_footprint_counts_the_logits_in_fp32(llama, shape):
    # the loss reads the last layer's logits in fp32: tokens x vocabulary x 4 B (4,096 tokens: 2.10 GB)
    for s, b in [(4096, 1), (8192, 4)]:
        fp = M.training_footprint(llama, s, b)
        assert fp["logits"] == s * b * shape.vocab * 4
    assert M.training_footprint(llama, 4096, 1)["logits"] == pytest.approx(2.10e9, rel=2e-3)


def test_training_footprint_is_sharded_state_plus_activations_plus_logits(llama, shape):
    n, s = llama.params, 4096
    acts = shape.layers * s * _llama_layer_bytes_per_token(shape)
    logits = s * shape.vocab * 4
    one = M.training_footprint(llama, s, 1)
    assert one.total == 16 * n + acts + logits
    z3 = M.training_footprint(llama, s, 1, gpus=8, zero_stage=3)
    assert z3.total == pytest.approx(16 * n / 8 + acts + logits)
    z1 = M.training_footprint(llama, s, 1, gpus=8, zero_stage=1)
    assert z1.total == pytest.approx((2 + 2) * n + 12 * n / 8 + acts + logits)
    full = M.training_footprint(llama, s, 1, gpus=8, zero_stage=3, recompute="full")
    assert full["activations"] == shape.layers * s * shape.hidden * 2


def test_kv_cache_capacity_follows_the_caches_format_not_the_weights(llama, shape):
    h200 = rl.get_hardware("h200-sxm")
    free_bf16 = h200.usable_capacity - 2 * llama.params  # bf16 weights resident in the usable HBM
    free_fp8 = h200.usable_capacity - 1 * llama.params  # fp8 weights resident
    token_bf16 = 2 * shape.layers * shape.kv_heads * shape.head_dim * 2  # 131,072 B
    token_fp8 = token_bf16 / 2
    assert M.kv_cache_capacity_tokens(llama, h200) == free_bf16 // token_bf16
    assert M.kv_cache_capacity_tokens(llama, h200, kv_dtype="fp8") == free_bf16 // token_fp8
    assert M.kv_cache_capacity_tokens(llama, h200, dtype="fp8") == free_fp8 // token_fp8
    assert M.kv_cache_capacity_tokens(llama, h200, dtype="fp8", kv_dtype="bf16") == free_fp8 // token_bf16
    assert M.kv_cache_capacity_tokens(llama, h200, reserve=10e9) == (free_bf16 - 10e9) // token_bf16


@given(gpu=st.sampled_from(["h100-sxm", "h200-sxm", "a100-sxm-80gb", "b200", "mi300x"]),
       weights=st.sampled_from(["bf16", "fp8"]), reserve=st.floats(0, 40e9))
def test_in_the_same_free_memory_an_fp8_cache_holds_twice_the_tokens_of_bf16(gpu, weights, reserve):
    bf16 = M.kv_cache_capacity_tokens("llama-3-8b", gpu, dtype=weights, kv_dtype="bf16", reserve=reserve)
    fp8 = M.kv_cache_capacity_tokens("llama-3-8b", gpu, dtype=weights, kv_dtype="fp8", reserve=reserve)
    assert (bf16 is None) == (fp8 is None)
    if bf16 is not None:
        assert fp8 in (2 * bf16, 2 * bf16 + 1)  # floor(2x) is 2 floor(x) or one more


def test_fits_sweeps_micro_batches_against_the_gpus_capacity(llama, shape):
    # ZeRO-3 over 8 GPUs, 8,192-token sequences: a fixed 16N/8 of state, then per sequence its
    # activations (flash attention) and its fp32 logits
    h100 = rl.get_hardware("h100-sxm")
    mb = np.arange(1, 65)
    s = 8192
    per_sequence = shape.layers * s * _llama_layer_bytes_per_token(shape) + s * shape.vocab * 4  # 48.3 GB
    need = 16 * llama.params / 8 + mb * per_sequence
    fp = M.training_footprint(llama, s, mb, gpus=8, zero_stage=3)
    assert np.allclose(fp.total, need, rtol=1e-12)
    assert (fp.fits(h100) == (need <= h100.hbm_capacity)).all()
    assert mb[fp.fits(h100)].max() == 1  # 64.3 GB fits an H100, 112.6 GB does not


# ---- chapter 3's per-layer numbers, moved out of the notebook -----------------------------------------------

def test_per_layer_checkpoint_and_activations_of_llama_3_8b_by_hand():
    from roofline.workloads import memory

    c, A = memory.per_layer_activations("llama-3-8b", 4096, 1)
    assert c == 4096 * 4096 * 2  # full recomputation keeps each layer's bf16 input: s x h x 2 bytes
    assert A == 4096 * 168_072  # a layer without recomputation (flash): 168,072 bytes per token
    assert memory.kept_bytes_per_token_layer("llama-3-8b", 4096, recompute="full") == 2 * 4096
    assert memory.kept_bytes_per_token_layer("llama-3-8b", 4096) == 168_072
    with pytest.raises(ValueError, match="seq"):
        memory.kept_bytes_per_token_layer("llama-3-8b", 0)


def test_activation_peak_is_kept_plus_the_working_set():
    from roofline.workloads import memory

    kept, work = memory.layer_activations("llama-3-8b", 4096, 1)
    assert work == 0 and memory.activation_peak("llama-3-8b", 4096) == kept  # nothing rebuilt, nothing extra
    full = memory.activation_peak("llama-3-8b", 4096, recompute="full")
    c, A = memory.per_layer_activations("llama-3-8b", 4096, 1)
    # 32 checkpoints plus one layer rebuilt on top of its own checkpoint: 32 c + (A - c)
    assert full == pytest.approx(32 * c + A - c)
    with pytest.raises(ValueError, match="recompute"):
        memory.activation_peak("llama-3-8b", 4096, recompute="most")


def test_continuous_checkpoint_spacing_is_sqrt_of_L_when_a_checkpoint_costs_a_layer():
    from roofline.workloads import memory

    assert memory.continuous_checkpoint_spacing(16, 1.0, 1.0) == 4
    assert memory.continuous_checkpoint_spacing(32, 1.0, 32.0) == 1  # sqrt(32 / 32)
    with pytest.raises(ValueError, match="layers"):
        memory.continuous_checkpoint_spacing(2.5, 1.0, 1.0)


def test_footprint_without_parts():
    from roofline.workloads.memory import Footprint

    f = Footprint({"weights": 4.0, "activations": 2.0, "logits": 1.0})
    assert f.without("activations", "logits") == 4.0 and f.without() == 7.0
    with pytest.raises(KeyError, match="unknown part"):
        f.without("optimizer")


# ---- chapter 2's quoted figures, moved out of the notebook --------------------------------------------------

def test_recipe_bytes_and_shares_by_hand():
    from roofline.workloads import memory

    assert memory.recipe_bytes_per_param("mixed-adam") == 16  # 2 + 2 + 4 + 4 + 4
    assert memory.recipe_bytes_per_param("fp32-adam") == 16
    state = memory.model_state("llama-3-8b", "mixed-adam")
    assert state.share("master", "momentum", "variance") == pytest.approx(12 / 16)  # the optimizer's three fp32 copies
    assert state.subtotal("weights", "gradients") == pytest.approx(4 * 8_030_261_248)
    with pytest.raises(KeyError, match="unknown recipe"):
        memory.recipe_bytes_per_param("adamw")
    with pytest.raises(KeyError, match="unknown part"):
        state.share("optimizer")


def test_binary_capacity_and_gpus_to_hold_by_hand():
    from roofline.workloads import memory

    h100 = rl.get_hardware("h100-sxm")
    assert memory.binary_capacity(h100) == pytest.approx(80 * 2**30)  # "80 GB" of DRAM are 80 GiB
    assert memory.gpus_to_hold(h100.usable_capacity, h100) == 1
    assert memory.gpus_to_hold(h100.usable_capacity + 1, h100) == 2
    assert memory.gpus_to_hold(0, h100) == 0
    with pytest.raises(ValueError, match="nbytes"):
        memory.gpus_to_hold(-1, h100)


def test_activation_budget_logits_embedding_by_hand():
    from roofline.workloads import memory

    h100 = rl.get_hardware("h100-sxm")
    # 168,072 bytes per token and layer with flash attention, 32 layers
    assert memory.activation_token_budget("llama-3-8b", h100) == pytest.approx(h100.usable_capacity / (32 * 168_072))
    assert memory.logits_bytes_per_token("llama-3-8b") == 4 * 128_256
    assert memory.embedding_bytes("llama-3-8b") == 2 * 128_256 * 4096
    assert memory.embedding_bytes("llama-3-8b", "fp8") == 128_256 * 4096


def test_selective_saving_is_the_score_tensors_and_nothing_with_flash():
    from roofline.workloads import memory

    # explicit attention keeps one bf16 score-sized tensor per head that selective recomputation drops:
    # 32 layers x 32 heads x 16,384^2 x 2 bytes
    assert memory.selective_saving("llama-3-8b", 16384) == 32 * 32 * 16384**2 * 2
    assert memory.selective_saving("llama-3-8b", 16384, flash=True) == 0


def test_kv_cache_capacity_sequences_rounds_down():
    from roofline.workloads import memory

    h100 = rl.get_hardware("h100-sxm")
    tokens = memory.kv_cache_capacity_tokens("llama-3-8b", h100)
    assert memory.kv_cache_capacity_sequences("llama-3-8b", h100, 32768) == tokens // 32768
    with pytest.raises(ValueError, match="context"):
        memory.kv_cache_capacity_sequences("llama-3-8b", h100, 0)
# --- one home for the weights a server holds, and for "fits" ------------------------------------------------

def test_weight_bytes_counts_every_parameter_in_its_format(shape):
    """Llama 3 8B from its config's numbers: bf16 is two bytes a parameter; int4 in groups of 128 is half a
    byte plus a 2-byte scale per 128 (0.515625 B) for the linear layers, with the embedding table, the head
    and the norms left in bf16 when the embeddings are asked for in bf16."""
    embed = shape.vocab * shape.hidden  # untied: once in, once out
    norms = (2 * shape.layers + 1) * shape.hidden
    attention = shape.hidden * (shape.heads + 2 * shape.kv_heads) * shape.head_dim + shape.heads * shape.head_dim * shape.hidden
    linear = shape.layers * (attention + 3 * shape.hidden * shape.intermediate)
    total = 2 * embed + norms + linear
    assert M.weight_bytes("llama-3-8b") == 2 * total
    assert M.weight_bytes("llama-3-8b", weights_dtype="int4-g128", embeddings_dtype="bf16") == pytest.approx(
        linear * (0.5 + 2 / 128) + 2 * (2 * embed + norms), rel=1e-12)


def test_weight_bytes_holds_every_expert_of_a_mixture():
    """A server holds all of Mixtral's experts, though a decode step at batch 1 reads only two per layer."""
    mixtral = rl.load_model("mixtral-8x7b")
    held = M.weight_bytes(mixtral)
    assert held == 2 * mixtral.params
    assert rl.decode_step(mixtral, 1, 0).bytes < 0.3 * held


def test_inference_footprint_and_the_largest_batch_count_the_same_weights(llama):
    from roofline.workloads.kv_cache import largest_batch

    h200 = rl.get_hardware("h200-sxm")
    weights = M.weight_bytes(llama)
    assert M.inference_footprint(llama, 1, 8192)["weights"] == weights
    per_sequence = llama.kv_cache_bytes(8192)  # 8,192 tokens fill 512 whole blocks: no paging waste
    assert largest_batch(llama, h200, 8192) == int((h200.usable_capacity - weights) // per_sequence) == 123


def test_fits_in_hbm_compares_with_the_usable_capacity_not_the_sold_one(h100):
    usable = h100.usable_capacity
    assert usable > h100.hbm_capacity  # sold as 80 GB (GiB on the datasheet): 84.0 GB usable
    assert M.fits_in_hbm(usable, h100) is True and M.fits_in_hbm(usable + 1, h100) is False
    assert M.fits_in_hbm([80e9, 85e9], h100).tolist() == [True, False]
    assert M.Footprint({"weights": 85e9}).fits(h100) == M.fits_in_hbm(85e9, h100)
    with pytest.raises(ValueError, match="nbytes"):
        M.fits_in_hbm(-1, h100)


def test_an_inference_footprint_keeps_the_embeddings_in_their_own_format():
    """int4-g128 layers (4 bits and one fp16 scale per 128 weights: 0.515625 B a weight) beside a bf16 embedding table, output head and norms (chapter 6)."""
    m = rl.load_model("llama-3-8b")
    other = 2 * 128256 * 4096 + (2 * 32 + 1) * 4096  # embedding, untied head, norms
    fp = M.inference_footprint(m, 1, 0, dtype="int4-g128", embeddings_dtype="bf16")
    assert fp["weights"] == (m.params - other) * 0.515625 + other * 2  # 5.70 GB
    assert fp["weights"] == pytest.approx(5.7006e9, rel=1e-4)
    assert M.inference_footprint(m, dtype="int4-g128", embeddings_dtype="int4-g128")["weights"] == m.params * 0.515625


def test_an_inference_footprint_holds_every_expert():
    """A mixture of experts keeps all its experts resident, whatever a step reads (Mixtral: 46.7 B parameters)."""
    m = rl.load_model("mixtral-8x7b")
    fp = M.inference_footprint(m, 1, 0, dtype="int4-g128", embeddings_dtype="bf16")
    other = m.embedding_params + m.lm_head_params + m.norm_params
    assert fp["weights"] == (46_702_792_704 - other) * 0.515625 + other * 2  # 24.5 GB, not the 7 GB one step reads


def test_a_new_token_grows_the_cache_of_every_layer_until_the_window_is_full():
    # Gemma 2 9B: 42 layers of 8 KV heads of 256, K and V in bf16, 8,192 B a layer; 21 of them slide over 4,096
    assert M.kv_bytes_per_new_token("gemma-2-9b", 4095) == 42 * 8192 == 344_064
    assert M.kv_bytes_per_new_token("gemma-2-9b", 4096) == 21 * 8192 == 172_032
    assert list(M.kv_bytes_per_new_token("gemma-2-9b", [0, 10_000])) == [344_064, 172_032]
    assert M.kv_bytes_per_new_token("llama-3-8b", 100_000, "fp8") == 32 * 8 * 128 * 2  # no window: 65,536 B


def test_the_model_state_of_a_training_footprint_is_sixteen_bytes_a_parameter():
    m = rl.load_model("llama-3-8b")
    assert M.training_footprint(m, 4096, 1).model_state == 16 * m.params  # mixed Adam, 128 GB
    sharded = M.training_footprint(m, 4096, 1, gpus=8, zero_stage=3)
    assert sharded.model_state == pytest.approx(16 * m.params / 8)
    assert sharded.total - sharded.model_state == pytest.approx(
        sharded["activations"] + sharded["recompute working set"] + sharded["logits"])
    assert M.inference_footprint(m, 1, 1024).model_state == 2 * m.params  # weights only; the cache is not state


@pytest.mark.parametrize("call, error, message", [
    (lambda: M.per_layer_activations("llama-3-8b", 0), ValueError, "seq must be a whole number"),
    (lambda: M.binary_capacity("h300"), KeyError, "unknown hardware"),
    (lambda: M.activation_token_budget("llama-3-8b", "h300"), KeyError, "unknown hardware"),
    (lambda: M.logits_bytes_per_token("llama-3-9b"), KeyError, "unknown model"),
    (lambda: M.embedding_bytes("llama-3-8b", "fp7"), KeyError, "unknown dtype 'fp7'"),
    (lambda: M.selective_saving("llama-3-8b", 0), ValueError, "seq must be a whole number"),
])
def test_chapter_1_to_3_memory_helpers_refuse_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()


# ---- host memory: offloading's budget (chapter 3) --------------------------------------------------------

def test_dgx_hopper_hosts_give_each_gpu_a_quarter_terabyte():
    for key in ("h100-sxm", "h200-sxm"):
        h = rl.get_hardware(key)
        assert h.host_memory == 250e9  # 2 TB of system memory for eight GPUs
        assert "2 TB" in h.source("host_memory").note
    assert rl.get_hardware("mi300x").host_memory is None  # not in the catalog: unchecked


def test_offloading_parks_the_kept_activations_in_host_memory_and_must_fit_there():
    m = rl.load_model("llama-3-8b")
    kept, _ = M.layer_activations(m, 65536, 1)
    fp = M.training_footprint(m, 65536, 1, gpus=8, zero_stage=3, offload=True)
    assert fp.host == pytest.approx(kept) and 350e9 < fp.host < 355e9  # 352 GB per GPU, 2.8 TB per node
    assert M.fits_in_hbm(fp.total, "h200-sxm") and not M.fits_in_host(fp.host, "h200-sxm")
    assert not fp.fits("h200-sxm")  # the HBM holds it, the host does not
    assert M.training_footprint(m, 65536, 1, gpus=8, zero_stage=3).host == 0
    half = M.training_footprint(m, 32768, 1, gpus=8, zero_stage=3, offload=True)
    assert half.fits("h200-sxm") and half.host == pytest.approx(fp.host / 2)
    assert M.fits_in_host(1e15, "mi300x") and M.fits_in_host(0, "h100-sxm")
    assert list(M.fits_in_host(np.array([100e9, 300e9]), "h100-sxm")) == [True, False]


def test_fit_verdict_and_summary_name_the_host_when_it_is_over():
    h = rl.get_hardware("h200-sxm")
    assert M.fit_verdict(40e9, h, host=352.5e9) == \
        "does not fit on the H200: 352 GB in host memory, over the 250 GB per GPU by 102 GB"
    assert M.fit_verdict(40e9, h, host=176e9).startswith("fits on the H200 with ")
    assert M.fit_verdict(40e9, h, host=176e9).endswith(", and 176 GB in host memory, of 250 GB per GPU")
    assert M.fit_verdict(40e9, h) == M.fit_verdict(40e9, h, host=0)  # nothing parked, nothing said
    assert M.fit_summary(127e9, ["h100-sxm", "h200-sxm"], host=705e9) == \
        "does not fit on the H100 SXM or the H200: 705 GB in host memory, over the 250 GB per GPU by 455 GB"
    assert M.fit_summary(44e9, ["h100-sxm", "h200-sxm"], host=176e9) == "fits on both the H100 SXM and the H200"
    with pytest.raises(ValueError, match="host"):
        M.fit_verdict(40e9, h, host=-1)


def test_state_bytes_groups_a_recipe_the_way_zero_shards_it():
    assert dict(M.state_bytes()) == {"weights": 2.0, "gradients": 2.0, "optimizer": 12.0}  # chapter 2's 16 B
    assert sum(M.state_bytes("fp32-adam").values()) == 16 and M.state_bytes("fp32-adam")["optimizer"] == 8
    assert M.state_bytes("mixed-adam-8bit")["optimizer"] == 6  # a 4-byte master copy and two 1-byte moments
    with pytest.raises(KeyError, match="unknown recipe 'adam'"):
        M.state_bytes("adam")
