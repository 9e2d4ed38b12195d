"""Chapter 2's memory accounting: model state, ZeRO, activations against Korthikanti et al."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

import roofline as rl
from roofline import memory as M

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
@pytest.mark.parametrize("recompute", M.RECOMPUTE_POLICIES)
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
    from roofline import tables

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
    from roofline import tables

    h100 = rl.get_hardware("h100-sxm")
    one = M.training_footprint(llama, 4096, 1)
    z3 = M.training_footprint(llama, 4096, 1, gpus=8, zero_stage=3, recompute="full")
    t = tables.footprint_table({"1 GPU": one, "ZeRO-3": z3}, capacities=("h100-sxm",))
    assert t.column("H100 SXM") == (f"{rl.fmt(one.total - h100.usable_capacity, 'B')} over",
                                    f"{rl.fmt(h100.usable_capacity - z3.total, 'B')} spare")
    assert t.column("working set") == (rl.fmt(0.0, "B"), rl.fmt(z3["recompute working set"], "B"))
    state = one.total - one["activations"] - one["logits"] - one["recompute working set"]
    assert t.column("model state")[0] == rl.fmt(state, "B")
