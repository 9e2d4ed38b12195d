"""Chapter 3: recompute policies (every-K checkpoints, Chen's square root), the training step kernel by
kernel, offloading over the host link, and the plan the `roofline train` command prints."""

import math

import pytest
from hypothesis import given, settings, strategies as st

import roofline as rl
from roofline.workloads import memory, training
from roofline.core.model import NotModelledError
from roofline.core.policies import recompute_policy

LLAMA = rl.load_model("llama-3-8b")


# --- policies ------------------------------------------------------------------------------------

def test_every_k_is_parsed_and_every_1_is_full():
    p = recompute_policy("every-4")
    assert (p.name, p.every, p.param_flops, p.attention_passes) == ("every-4", 4, 8, 4)
    assert recompute_policy("full").every == 1
    full = memory.training_footprint(LLAMA, 4096, 2, recompute="full")
    every1 = memory.training_footprint(LLAMA, 4096, 2, recompute="every-1")
    assert dict(full.parts) == dict(every1.parts)
    assert training.training_step(LLAMA, 4096, recompute="every-1").flops == training.training_step(
        LLAMA, 4096, recompute="full").flops


@pytest.mark.parametrize("bad", ["every-0", "every-x", "every-", "sometimes", "Full", 3, None])
def test_a_bad_policy_names_the_argument_and_the_choices(bad):
    with pytest.raises(ValueError, match=r"recompute must be one of 'none', 'selective', 'full', 'matmul-outputs' or 'every-K'"):
        recompute_policy(bad)


# --- Chen's square-root rule -------------------------------------------------------------------------

@pytest.mark.parametrize("layers", [16, 64, 100, 400])
def test_chen_optimum_is_near_sqrt_L_when_a_checkpoint_costs_a_layer(layers):
    k = memory.optimal_checkpoint_spacing(layers, 1.0, 1.0)
    assert abs(k - math.sqrt(layers)) <= 1
    best = memory.checkpoint_memory(layers, k, 1.0, 1.0)
    # O(sqrt L): about 2 sqrt(L) layers' worth, far below the L of keeping everything
    assert best == pytest.approx(2 * math.sqrt(layers) - 1, rel=0.1)
    assert best < layers / 2


@pytest.mark.parametrize("layers, c, a, k, worked", [
    # ceil(L/k) c + k A - c, worked by hand from checkpoint_memory's docstring
    (16, 1.0, 1.0, 4, 7.0),  # k = 3: 6 + 3 - 1 = 8; k = 4: 4 + 4 - 1 = 7; k = 5: 4 + 5 - 1 = 8
    (100, 1.0, 1.0, 10, 19.0),  # k = 9: 12 + 9 - 1 = 20; k = 10: 10 + 10 - 1 = 19; k = 11: 10 + 11 - 1 = 20
    (32, 1.0, 8.0, 2, 31.0),  # sqrt(32 / 8) = 2: k = 1: 32 + 8 - 1 = 39; k = 2: 16 + 16 - 1 = 31; k = 3: 11 + 24 - 1 = 34
    (6, 1.0, 1.0, 2, 4.0),  # a tie: k = 2: 3 + 2 - 1 = 4 and k = 3: 2 + 3 - 1 = 4; the smaller k wins
    (1, 5.0, 1.0, 1, 1.0),  # one layer: one segment, whatever a checkpoint costs
])
def test_optimal_spacing_matches_the_count_worked_by_hand(layers, c, a, k, worked):
    assert memory.optimal_checkpoint_spacing(layers, c, a) == k
    assert memory.checkpoint_memory(layers, k, c, a) == pytest.approx(worked)


@given(layers=st.integers(1, 200), c=st.floats(0.01, 10), a=st.floats(0.01, 10))
@settings(max_examples=200, deadline=None)
def test_optimal_spacing_is_the_minimum_of_the_docstrings_count_and_near_the_continuous_one(layers, c, a):
    k = memory.optimal_checkpoint_spacing(layers, c, a)
    # the count written out again in plain Python from the docstring, not through checkpoint_memory
    count = [math.ceil(layers / j) * c + j * a - c for j in range(1, layers + 1)]
    best = min(count)
    assert count[k - 1] == pytest.approx(best, rel=1e-12)
    # (ties in floating point are a matter of rounding here; the exact tie is worked by hand above)
    continuous = min(max(math.sqrt(layers * c / a), 1), layers)
    # the ceiling makes the integer optimum wander, but never far from sqrt(L c / A) in ratio
    assert 1 <= k <= layers
    assert k <= 2 * continuous + 1 and continuous <= 2 * k + 1


def test_a_transformer_layer_keeps_so_much_more_than_its_input_that_the_best_spacing_is_small():
    kept, _ = memory.layer_activations(LLAMA, 4096, 1, recompute="full")
    whole, _ = memory.layer_activations(LLAMA, 4096, 1)
    c, a = kept / LLAMA.num_layers, whole / LLAMA.num_layers
    assert a / c > 10
    k = memory.optimal_checkpoint_spacing(LLAMA.num_layers, c, a)
    assert k < math.sqrt(LLAMA.num_layers) / 2
    # and layer_activations agrees with the formula for every spacing
    for every in (1, 2, 3, 5, 32, 40):
        kept_k, working_k = memory.layer_activations(LLAMA, 4096, 1, recompute=f"every-{every}")
        assert kept_k + working_k == pytest.approx(memory.checkpoint_memory(LLAMA.num_layers, every, c, a))


# --- FLOPs: 6N, 8N, selective ---------------------------------------------------------------------------

def test_full_recomputation_costs_8N_against_6N():
    assert training.training_flops_per_token(LLAMA, recompute="full") / training.training_flops_per_token(LLAMA) \
        == pytest.approx(8 / 6)
    assert training.training_flops_per_token(LLAMA, recompute="every-3") == training.training_flops_per_token(
        LLAMA, recompute="full")


@pytest.mark.parametrize("seq", [1024, 4096, 16384])
def test_the_step_is_forward_then_twice_that_backward_then_the_recomputed_layers(seq):
    step = training.training_step(LLAMA, seq, 2, recompute="full")
    fwd, bwd, again = (step[p].flops for p in training.PHASES)
    assert bwd == pytest.approx(2 * fwd)
    assert again == pytest.approx(fwd - step.op("lm_head").flops)  # every layer again, not the logits
    # the matmul FLOPs are 2 x matmul weights x tokens per pass (the 2N of 6N, less the embedding lookup)
    tokens = 2 * seq
    matmuls = sum(o.flops for o in step.ops if o.kind == "matmul" and "(" not in o.name)
    assert matmuls == pytest.approx(2 * (LLAMA.decoder_matmul_params + LLAMA.vocab_size * LLAMA.hidden_size) * tokens)
    assert training.training_step(LLAMA, seq)["recompute"].flops == 0


def test_selective_recomputes_the_attention_core_forward_only():
    step = training.training_step(LLAMA, 8192, 1, recompute="selective")
    core = rl.attention_flops(8192, 8192, LLAMA.attention_width, LLAMA.num_layers, causal="exact")
    assert step["recompute"].flops == pytest.approx(core)
    explicit = training.training_step(LLAMA, 8192, 1, recompute="selective", attention="explicit")
    assert {o.name for o in explicit.ops if o.name.endswith("(recompute)")} == {
        "scores (recompute)", "softmax (recompute)", "pv (recompute)"}


def test_selective_memory_is_korthikantis_closed_form_for_a_gpt_layer():
    # the paper's selective form drops exactly the 5as/h term; the tensor count gives the same
    h, a, L = memory.KORTHIKANTI_CONFIGS["175B"][:3]
    gpt = memory.saved_tensors(architecture="gpt", hidden=h, heads=a, flash=False)
    for s in (2048, 8192):
        assert memory.activation_bytes(gpt, s, 1, recompute="selective") == memory.korthikanti_bytes(
            s, 1, h, a, recompute="selective")
        assert memory.activation_bytes(gpt, s, 1) - memory.activation_bytes(gpt, s, 1, recompute="selective") == \
            pytest.approx(5 * a * s * s)


# --- memory -------------------------------------------------------------------------------------------

POLICIES = ["none", "selective", "full", "every-2", "every-5"]


@given(policy=st.sampled_from(POLICIES), seq=st.integers(1, 65536), mb=st.integers(1, 16), flash=st.booleans(),
       offload=st.booleans())
@settings(max_examples=150, deadline=None)
def test_memory_grows_with_sequence_and_micro_batch(policy, seq, mb, flash, offload):
    def total(s, b):
        return memory.training_footprint(LLAMA, s, b, recompute=policy, flash=flash, offload=offload).total
    assert total(seq + 1, mb) > total(seq, mb)
    assert total(seq, mb + 1) > total(seq, mb)


def test_chapter_2_footprints_are_unchanged():
    """The three policies chapter 2 prices keep their bytes: every layer's kept tensors plus one working set."""
    saved = memory.saved_tensors(LLAMA, flash=False)
    for policy in ("none", "selective", "full"):
        fp = memory.training_footprint(LLAMA, 8192, 2, gpus=8, zero_stage=3, recompute=policy, flash=False)
        assert fp["activations"] == LLAMA.num_layers * memory.activation_bytes(saved, 8192, 2, recompute=policy)
        assert fp["recompute working set"] == memory.recompute_working_set(saved, 8192, 2, recompute=policy)


def test_offloading_keeps_two_layers_on_the_gpu():
    on = memory.training_footprint(LLAMA, 4096, 1, offload=True)
    off = memory.training_footprint(LLAMA, 4096, 1)
    assert on["activations"] == pytest.approx(off["activations"] * 2 / LLAMA.num_layers)
    assert on["logits"] == off["logits"]
    # under every-K, two checkpoints (layer inputs) in flight, the segment's working set on the GPU
    checkpoint = memory.activation_bytes(memory.saved_tensors(LLAMA), 4096, 1, recompute="full")
    seg = memory.training_footprint(LLAMA, 4096, 1, recompute="every-4", offload=True)
    assert seg["activations"] == pytest.approx(2 * checkpoint)
    assert seg["recompute working set"] == memory.training_footprint(LLAMA, 4096, 1, recompute="every-4")[
        "recompute working set"]


# --- offloading time ----------------------------------------------------------------------------------

def test_offload_time_is_bytes_over_the_host_link():
    h100 = rl.get_hardware("h100-sxm")
    plan = training.plan_training(LLAMA, h100, seq=4096, recompute="none", offload=True, achieved=0.5)
    kept, _ = memory.layer_activations(LLAMA, 4096, 1)
    assert plan.offload_bytes == pytest.approx(kept)
    assert plan.offload_time == pytest.approx(kept / h100.interconnect["host"].each_way)
    # twice the link's rate, half the transfer time
    assert 0 < plan.offload_exposed < plan.offload_time * 2


def test_the_hiding_length_is_where_the_plan_stops_exposing_the_transfer():
    s = training.offload_hiding_seq(LLAMA, "h100-sxm", achieved=0.5)
    assert 1 < s < math.inf
    before = training.plan_training(LLAMA, "h100-sxm", seq=s - 64, offload=True, achieved=0.5)
    after = training.plan_training(LLAMA, "h100-sxm", seq=s, offload=True, achieved=0.5)
    assert before.offload_exposed > 0 and after.offload_exposed == 0
    # a slower GPU hides more easily: the length falls with the achieved fraction of peak
    assert training.offload_hiding_seq(LLAMA, "h100-sxm", achieved=0.25) < s
    # a checkpoint per layer is small enough to hide at any length; explicit scores never hide
    assert training.offload_hiding_seq(LLAMA, "h100-sxm", recompute="full", achieved=0.5) == 1
    assert training.offload_hiding_seq(LLAMA, "h100-sxm", flash=False, achieved=0.5) == math.inf


# --- the plan -------------------------------------------------------------------------------------------

def test_plan_utilizations():
    none = training.plan_training(LLAMA, "h100-sxm", seq=4096, gpus=8, zero_stage=3, achieved=0.5)
    full = training.plan_training(LLAMA, "h100-sxm", seq=4096, gpus=8, zero_stage=3, achieved=0.5, recompute="full")
    assert none.hfu == pytest.approx(0.5) and none.mfu == pytest.approx(0.5)
    assert full.hfu == pytest.approx(0.5)
    assert full.mfu == pytest.approx(0.5 * full.model_flops / full.hardware_flops)
    assert 0.74 < full.mfu / full.hfu < 0.78  # a little above 3/4: the logits are not recomputed
    assert full.footprint.total < none.footprint.total
    # the floor: compute-bound, every FLOP at peak
    floor = training.plan_training(LLAMA, "h100-sxm", seq=4096, recompute="full")
    assert floor.hfu == pytest.approx(1) and floor.time == pytest.approx(floor.hardware_flops / 989.4e12)


def test_plan_network_time_is_the_data_parallel_traffic_over_the_link():
    h = rl.get_hardware("h100-sxm")
    p = training.plan_training(LLAMA, h, seq=4096, gpus=64, zero_stage=3, achieved=0.5)
    assert p.network_link == "network"
    assert p.network_time == pytest.approx(rl.data_parallel_bytes(LLAMA.params, 64, zero_stage=3)
                                           / h.interconnect["network"].each_way)
    assert training.plan_training(LLAMA, h, seq=4096).network_time == 0


def test_plan_bad_input():
    with pytest.raises(ValueError, match="achieved"):
        training.plan_training(LLAMA, "h100-sxm", seq=4096, achieved=1.5)
    with pytest.raises(ValueError, match="seq"):
        training.plan_training(LLAMA, "h100-sxm", seq=0)
    with pytest.raises(ValueError, match="stage"):
        training.plan_training(LLAMA, "h100-sxm", seq=4096, zero_stage=4)
    with pytest.raises(TypeError, match="offload"):
        training.plan_training(LLAMA, "h100-sxm", seq=4096, offload="yes")
    with pytest.raises(NotModelledError, match="experts"):
        training.plan_training("mixtral-8x7b", "h100-sxm", seq=4096)


def test_layer_forward_flops_is_a_layers_share_of_the_forward_pass():
    step = training.training_step(LLAMA, 4096, 2)
    layers = sum(o.flops for o in step.ops if o.name in ("qkv", "attention", "o", "gate_up", "down"))
    assert training.layer_forward_flops(LLAMA, 4096) * 4096 * 2 * LLAMA.num_layers == pytest.approx(layers, rel=2e-4)


def test_fitting_plans_stop_at_the_largest_micro_batch_that_fits():
    plans = training.fitting_plans(LLAMA, "h100-sxm", seq=4096, gpus=8, zero_stage=3)
    assert [p.micro_batch for p in plans] == list(range(1, len(plans) + 1))
    assert all(p.fits for p in plans)
    assert not training.plan_training(LLAMA, "h100-sxm", seq=4096, micro_batch=len(plans) + 1, gpus=8,
                                      zero_stage=3).fits
    assert training.fitting_plans(LLAMA, "h100-sxm", seq=4096) == []  # 16 bytes a parameter alone do not fit


def test_matmul_outputs_runs_no_matmul_twice_and_rebuilds_the_elementwise_kernels():
    step = training.training_step(LLAMA, 4096, recompute="matmul-outputs")
    assert training.recompute_overhead(step) == 0.0
    rebuilt = {op.name for op in step.ops if op.name.endswith("(recompute)")}
    assert rebuilt == {"attn_norm (recompute)", "rope (recompute)", "mlp_norm (recompute)", "act (recompute)"}
    none = training.training_step(LLAMA, 4096)
    assert float(step.bytes - none.bytes) == float(step["recompute"].bytes) > 0
    # with explicit attention the softmax output is not a matmul's: the core runs again, as under 'selective'
    explicit = training.training_step(LLAMA, 4096, recompute="matmul-outputs", attention="explicit")
    selective = training.training_step(LLAMA, 4096, recompute="selective", attention="explicit")
    assert float(explicit["recompute"].flops) == float(selective["recompute"].flops) > 0
    kept, working = memory.layer_activations(LLAMA, 4096, 1, recompute="matmul-outputs")
    none_kept, _ = memory.layer_activations(LLAMA, 4096, 1)
    assert float(working) == float(none_kept / LLAMA.num_layers - kept / LLAMA.num_layers)
