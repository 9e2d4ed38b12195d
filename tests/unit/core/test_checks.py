"""Argument checks and number formatting."""

import math
import re

import numpy as np
import pytest

import roofline as rl
from roofline.core.checks import UnknownNameError, number, unknown_name
from roofline.core.units import Quantity, dtype_bytes, fmt


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), -0.5])
def test_number_rejects_non_positive_and_non_finite(bad):
    with pytest.raises(ValueError, match="batch must be"):
        number("batch", bad)


@pytest.mark.parametrize("bad", ["4", True, None, [1, "a"], 1 + 2j])
def test_number_rejects_non_numbers_naming_the_argument(bad):
    with pytest.raises((TypeError, ValueError), match="tokens"):
        number("tokens", bad)


def test_number_integer_and_arrays():
    assert number("batch", 3, integer=True) == 3.0
    with pytest.raises(ValueError, match="whole number"):
        number("batch", 2.5, integer=True)
    out = number("batch", np.array([1, 2, 4]), integer=True)
    assert out.dtype == float and list(out) == [1, 2, 4]
    with pytest.raises(ValueError, match=r"batch must be .* in every element, got -1.0"):
        number("batch", np.array([1, -1]))
    assert number("context", 0, strict=False) == 0.0


def test_unknown_name_lists_close_matches():
    err = unknown_name("hardware", "h10-sxm", ["h100-sxm", "h200-sxm", "mi300x"])
    assert isinstance(err, KeyError) and isinstance(err, UnknownNameError)
    assert "did you mean 'h100-sxm'" in str(err)
    assert "known: a, b" in str(unknown_name("thing", "zzzzzz", ["b", "a"]))


@pytest.mark.parametrize(
    "value, unit, digits, expected",
    [
        (4.79418e-3, "s", 3, "4.79 ms"),
        (16.2326e-6, "s", 3, "16.2 µs"),
        (16.0605e9, "B", 4, "16.06 GB"),
        (989.4e12, "FLOP/s", 4, "989.4 TFLOP/s"),
        (0.33859, "%", 2, "0.34%"),
        (2081.67, "", 3, "2,082"),
        (285.79, "×", 3, "286×"),
        (3.35e12, "B/s", 3, "3.35 TB/s"),
    ],
)
def test_fmt_as_the_book_prints(value, unit, digits, expected):
    assert fmt(value, unit, digits) == expected
    assert repr(Quantity(value, unit, digits)) == expected


def test_fmt_fixed_and_forced_prefix():
    assert fmt(8030261248, fixed=0) == "8,030,261,248"
    assert fmt(989.4e12, "FLOP/s", prefix="P", fixed=2) == "0.99 PFLOP/s"
    assert fmt(math.inf, "s") == "inf s"


def test_dtype_bytes():
    assert dtype_bytes("bf16") == 2 and dtype_bytes("fp8") == 1 and dtype_bytes("int4") == 0.5
    with pytest.raises(KeyError, match="did you mean 'bf16'"):
        dtype_bytes("bf61")


def test_close_matches_put_names_that_begin_with_the_typed_one_first():
    from roofline.core.checks import close_matches

    known = rl.hardware_names() + [a for k in rl.hardware_names() for a in rl.get_hardware(k).aliases]
    # every suggestion for a truncated A100 key is an A100, the SXM keys first
    assert close_matches("a100-sxm", known)[:2] == ["a100-sxm-40gb", "a100-sxm-80gb"]
    assert all(k.startswith("a100") for k in close_matches("a100-sxm", known))
    # a transposition still finds its key before the shorter alias it begins with
    assert close_matches("h100-smx", known)[0] == "h100-sxm"
    assert "did you mean 'a100-sxm-40gb' or 'a100-sxm-80gb'" in str(unknown_name("hardware", "a100-sxm", known))


def test_a_number_too_large_for_a_float_is_a_value_error_naming_the_argument():
    with pytest.raises(ValueError, match=r"batch must be a finite number, got a number too large .*401 digits"):
        number("batch", 10**400, integer=True)
    with pytest.raises(TypeError, match="batch must be a number"):
        number("batch", np.array([object()]))


# One bad input for every public entry point: each fails at the edge, with the argument's name.
BAD_INPUT = {
    "Breakdown": (lambda: rl.Breakdown("step", {"weights": 3}), TypeError, "part 'weights' is a int"),
    "CalibratedRoof": (lambda: rl.CalibratedRoof("c", 1e12, (1.0,), (1e-6,), {}, {}, {"graph": 1e-6}, mode="jit"),
                       ValueError, "mode must be one of 'graph'"),
    "Cost": (lambda: rl.Cost("many", 1), TypeError, "flops must be a number"),
    "Formats": (lambda: rl.Formats(kv="fp3"), KeyError, "kv format: unknown dtype 'fp3'"),
    "formats": (lambda: rl.formats("bf16", weights_dtype="int2"), KeyError, "weights format: unknown dtype 'int2'"),
    "Op": (lambda: rl.Op.build("x", "gemm"), ValueError, "kind must be one of matmul, attention"),
    "Hardware": (lambda: rl.get_hardware("h100").with_(hbm_bandwidth=float("inf")), ValueError, "hbm_bandwidth must be"),
    "Model": (lambda: rl.Model("m", 64, 160, 2, 4, 0, 16, 1000), ValueError, "Model.num_kv_heads"),
    "NotModelledError": (lambda: rl.decode_step("mixtral-8x7b", 2), rl.NotModelledError, "routing"),
    "Prediction": (lambda: rl.predict(5, "h100"), TypeError, "cost must be a Cost"),
    "UnknownNameError": None,  # the error itself: raised for an unknown name, tested in test_public_api
    "Quantity": (lambda: rl.Quantity("fast", "B/s"), TypeError, "value must be a single real number"),
    "Roof": (lambda: rl.Roof("r", 0, 1), ValueError, "peak_flops must be"),
    "arithmetic_intensity": (lambda: rl.arithmetic_intensity("x", 1), TypeError, "flops must be"),
    "as_roof": (lambda: rl.as_roof(3), TypeError, "hardware must be a name"),
    "attainable_flops": (lambda: rl.attainable_flops(-1, "h100"), ValueError, "intensity must be"),
    "attention_flops": (lambda: rl.attention_flops(4, 2, 8, causal="exact"), ValueError, "queries must not exceed keys"),
    "attention_parity_tokens": (lambda: rl.attention_parity_tokens(3.5), TypeError, "model must be a name"),
    "bandwidth_tiers": (lambda: rl.bandwidth_tiers(None), TypeError, "hardware must be a name"),
    "compute_bound_batch": (lambda: rl.compute_bound_batch("llama-3-8b", "h100", context=-1), ValueError, "context must be"),
    "data_parallel_bytes": (lambda: rl.data_parallel_bytes(1e9, 0), ValueError, "gpus must be"),
    "decode_step": (lambda: rl.decode_step("llama-3-8b", 0), ValueError, "batch must be"),
    "dtype_bytes": (lambda: rl.dtype_bytes("bf17"), KeyError, "did you mean 'bf16'"),
    "fmt": (lambda: rl.fmt("x", "B"), TypeError, "value must be a single real number"),
    "get_hardware": (lambda: rl.get_hardware(["h100"]), TypeError, "hardware must be a name"),
    "hardware_names": (lambda: rl.hardware_names(catalog=42), TypeError, "catalog must be"),
    "hfu": (lambda: rl.hfu(1, "llama-3-8b", 1, "h100", recompute="some"), ValueError, "recompute must be"),
    "kv_cache_bytes": (lambda: rl.kv_cache_bytes(1, -5), ValueError, "kv_bytes_per_token must be"),
    "load_catalog": (lambda: rl.load_catalog(5), TypeError, "catalog must be the path"),
    "load_model": (lambda: rl.load_model(5), TypeError, "model must be a name"),
    "matmul": (lambda: rl.matmul(1, 2, 0), ValueError, "k must be"),
    "mfu": (lambda: rl.mfu(1e9, "llama-3-8b", 1, "h100"), ValueError, "above 1"),
    "model_from_config": (lambda: rl.model_from_config([]), TypeError, "config must be the dict"),
    "model_names": None,  # takes nothing
    "model_state_bytes": (lambda: rl.model_state_bytes("llama-3-8b", recipe="adamw"), KeyError, "unknown recipe 'adamw'"),
    "plan_training": (lambda: rl.plan_training("llama-3-8b", "h100", seq=0), ValueError, "seq must be"),
    "predict": (lambda: rl.predict(rl.Cost(1, 1), "h100", overlap="some"), ValueError, "overlap must be"),
    "prefill": (lambda: rl.prefill("llama-3-8b", 0), ValueError, "tokens must be"),
    "ridge_point": (lambda: rl.ridge_point("h100", "fp3"), KeyError, "unknown dtype 'fp3'"),
    "tokens_per_s_at_mfu": (lambda: rl.tokens_per_s_at_mfu(1.5, "llama-3-8b", "h100"), ValueError, "cannot exceed 1"),
    "training_flops_per_token": (lambda: rl.training_flops_per_token("llama-3-8b", recompute="x"), ValueError, "recompute must be"),
    "training_step": (lambda: rl.training_step("llama-3-8b", -1), ValueError, "seq must be"),
    "transfer_time": (lambda: rl.transfer_time(-1, 1), ValueError, "nbytes must be"),
    "verify_step": (lambda: rl.verify_step("llama-3-8b", 0, 2048), ValueError, "queries must be"),
}
# chapters 1 to 6: plain comparisons of two results, a link's ridge, what-if hardware, tokens per second
BAD_INPUT.update({
    "difference": (lambda: rl.difference("a", 1), TypeError, "a must be a number"),
    "gain": (lambda: rl.gain(1, 0), ZeroDivisionError, "b is zero"),
    "link_ridge": (lambda: rl.link_ridge("h100-sxm", "pcie"), ValueError, "link must be one of"),
    "nearest": (lambda: rl.nearest([], 3), ValueError, "values must hold at least one number"),
    "ratio": (lambda: rl.ratio(1, 2, what=3), TypeError, "what must be the name of an attribute"),
    "scale_hardware": (lambda: rl.scale_hardware("h100-sxm", hbm_bandwidth=-2), ValueError,
                       "the factor for hbm_bandwidth must be a positive number"),
    "time_per_token": (lambda: rl.time_per_token(1.0), TypeError, "prediction must be a Prediction"),
    "tokens_per_s": (lambda: rl.tokens_per_s(1.0), TypeError, "prediction must be a Prediction"),
})


def test_every_public_entry_point_has_a_bad_input_case():
    public = {name for name in rl.__all__ if callable(getattr(rl, name))}
    assert public == set(BAD_INPUT), "add a bad-input case for each new public function"


@pytest.mark.parametrize("name", [n for n, case in BAD_INPUT.items() if case is not None])
def test_bad_input_fails_at_the_edge_naming_what_is_wrong(name):
    call, error, message = BAD_INPUT[name]
    with pytest.raises(error, match=re.escape(message)):
        call()


@pytest.mark.parametrize("call, message", [
    (lambda: rl.fmt(1.0, "B", prefix="Q"), "prefix must be one of"),
    (lambda: rl.fmt(1.0, "B", digits=0), "digits must be a whole number >= 1"),
    (lambda: rl.fmt([1.0, 2.0], "B"), "value must be a single real number"),
    (lambda: rl.fmt(1.0, 5), "unit must be a string"),
])
def test_fmt_checks_its_arguments(call, message):
    with pytest.raises((TypeError, ValueError), match=re.escape(message)):
        call()
    assert rl.fmt(np.asarray(3e9), "B") == "3.00 GB" and rl.fmt(np.float32(2.5), "s") == "2.50 s"


# The collectives module (chapter 7; chapters 8 to 11 call it): one bad input for every function it exports.
COLLECTIVES_BAD_INPUT = {
    "bytes_sent": (lambda: rl.core.collectives.bytes_sent("all_reduce", 0, 1e6), ValueError, "n must be a whole number"),
    "latency_steps": (lambda: rl.core.collectives.latency_steps("reduce_scatter", 8, algorithm="tree"), ValueError,
                      "modelled for all_reduce only"),
    "bus_factor": (lambda: rl.core.collectives.bus_factor("allgather", 8), KeyError, "did you mean 'all_gather'"),
    "algorithm_bandwidth": (lambda: rl.core.collectives.algorithm_bandwidth(1e6, 0), ValueError, "seconds must be"),
    "bus_bandwidth": (lambda: rl.core.collectives.bus_bandwidth("all_reduce", 8, -1, 1.0), ValueError, "size must be"),
    "tier_link": (lambda: rl.core.collectives.tier_link("h100", "infiniband"), KeyError, "unknown tier 'infiniband'"),
    "CollectiveCost": None,  # a record built by collective_cost
    "Collective": None,  # the catalog's record of one collective, read by name
    "collective_cost": (lambda: rl.core.collectives.collective_cost("all_reduce", 24, 1e6, "h100", gpus_per_node=16),
                        ValueError, "n must be at most gpus_per_node (16)"),
    "collective_time": (lambda: rl.core.collectives.collective_time("all_to_all", 8, 1e6, "h100", tier="pcie"), KeyError,
                        "unknown tier 'pcie'"),
    "break_even_size": (lambda: rl.core.collectives.break_even_size("all_reduce", 8, "h100", overhead=-1e-6), ValueError,
                        "overhead must be"),
}


def test_every_collective_function_has_a_bad_input_case():
    import roofline.core.collectives as col

    public = {name for name in col.__all__ if callable(getattr(col, name))}
    assert public == set(COLLECTIVES_BAD_INPUT), "add a bad-input case for each new function in roofline.core.collectives"


@pytest.mark.parametrize("name", [n for n, case in COLLECTIVES_BAD_INPUT.items() if case is not None])
def test_collectives_bad_input_fails_at_the_edge(name):
    call, error, message = COLLECTIVES_BAD_INPUT[name]
    with pytest.raises(error, match=re.escape(message)):
        call()


def _sheet():
    from roofline.core.cluster_roof import datasheet_cluster_roof

    return datasheet_cluster_roof("h100-sxm")


def _dp():
    from roofline.parallel import data_parallel

    return data_parallel


# The data-parallel step (chapter 7): one bad input for every function it exports.
DATA_PARALLEL_BAD_INPUT = {
    "DataParallelStep": None,  # a record built by data_parallel_step
    "data_parallel_step": (lambda: _dp().data_parallel_step("llama-3-8b", "h100", gpus_per_node=0), ValueError,
                           "gpus_per_node must be"),
    "exposed_time": (lambda: _dp().exposed_time(-1.0, 4, 0.1), ValueError, "compute must be"),
    "hiding_tokens": (lambda: _dp().hiding_tokens("llama-3-8b", "h100", nodes=1.5), ValueError, "nodes must be"),
    "strategy_name": (lambda: _dp().strategy_name("3"), ValueError, "stage must be 0, 1, 2 or 3"),
}


def test_every_data_parallel_function_has_a_bad_input_case():
    public = {name for name in _dp().__all__ if callable(getattr(_dp(), name))}
    assert public == set(DATA_PARALLEL_BAD_INPUT), "add a bad-input case for each new function in roofline.parallel.data_parallel"


@pytest.mark.parametrize("name", [n for n, case in DATA_PARALLEL_BAD_INPUT.items() if case is not None])
def test_data_parallel_bad_input_fails_at_the_edge(name):
    call, error, message = DATA_PARALLEL_BAD_INPUT[name]
    with pytest.raises(error, match=re.escape(message)):
        call()


# The tensor-parallel module (chapter 8): one bad input for every function it exports.
TENSOR_PARALLEL_BAD_INPUT = {
    "PUBLISHED": None,  # a mapping of published figures
    "Exchange": None,  # a record built by the step functions
    "TPStep": None,
    "TPPrediction": None,
    "check_tp": (lambda: rl.parallel.tensor_parallel.check_tp("llama-3-8b", 3), ValueError, "tp must divide llama-3-8b's 32 query heads"),
    "shard_model": (lambda: rl.parallel.tensor_parallel.shard_model("llama-3-8b", 0), ValueError, "tp must be"),
    "kv_heads_per_gpu": (lambda: rl.parallel.tensor_parallel.kv_heads_per_gpu("llama-3-8b", 2.5), ValueError, "tp must be a whole number"),
    "tp_decode_step": (lambda: rl.parallel.tensor_parallel.tp_decode_step("llama-3.1-405b", 16, gpus_per_node=8), ValueError,
                       "tp must be at most the 8 GPUs of a node"),
    "tp_prefill": (lambda: rl.parallel.tensor_parallel.tp_prefill("llama-3-8b", 2, 0), ValueError, "tokens must be"),
    "tp_verify_step": (lambda: rl.parallel.tensor_parallel.tp_verify_step("llama-3-8b", 2, 0), ValueError, "queries must be"),
    "tp_training_step": (lambda: rl.parallel.tensor_parallel.tp_training_step("llama-3-8b", 2, 1024, sequence_parallel="yes"),
                         TypeError, "sequence_parallel must be True or False"),
    "predict_tp": (lambda: rl.parallel.tensor_parallel.predict_tp(rl.decode_step("llama-3-8b"), "h100"), TypeError,
                   "step must be a TPStep"),
    "tp_intensity": (lambda: rl.parallel.tensor_parallel.tp_intensity("llama-3-8b", 0), ValueError, "tp must be"),
    "tier_ridge": (lambda: rl.parallel.tensor_parallel.tier_ridge("h100-pcie", "network"), ValueError, "tier must be one of"),
    "hiding_width": (lambda: rl.parallel.tensor_parallel.hiding_width("llama-3-8b", 8, "h100", "nvlink"), ValueError,
                     "tier must be one of"),
    "layer_times": (lambda: rl.parallel.tensor_parallel.layer_times("llama-3-8b", 8, -4, "h100"), ValueError, "tokens must be"),
    "DegreePoint": None,
    "decode_by_degree": (lambda: rl.parallel.tensor_parallel.decode_by_degree("llama-3-8b", "h100", 8), TypeError,
                         "degrees must be a sequence"),
    "best_degree": (lambda: rl.parallel.tensor_parallel.best_degree("llama-3-8b", "h100", (1, 3)), ValueError,
                    "tp must divide llama-3-8b's 32 query heads, got tp=3"),
    "weights_per_gpu": (lambda: rl.parallel.tensor_parallel.weights_per_gpu("mixtral-8x7b", ep=3), ValueError,
                        "ep must divide the 8 experts of mixtral-8x7b, got 3"),
    "linear_shard": None,  # takes a model's own Linear, whose shape the model checked,
    "TPTrainingPlan": None,
    "tp_training_plan": (lambda: rl.parallel.tensor_parallel.tp_training_plan("llama-3-8b", "h100", tp=4, gpus=6, seq=1024),
                         ValueError, "gpus must be a multiple of tp (4)"),
}


def test_every_tensor_parallel_function_has_a_bad_input_case():
    import roofline.parallel.tensor_parallel as tp

    public = {name for name in tp.__all__}
    assert public == set(TENSOR_PARALLEL_BAD_INPUT), "add a bad-input case for each new name in roofline.parallel.tensor_parallel"


@pytest.mark.parametrize("name", [n for n, case in TENSOR_PARALLEL_BAD_INPUT.items() if case is not None])
def test_tensor_parallel_bad_input_fails_at_the_edge(name):
    import roofline.parallel.tensor_parallel  # noqa: F401  (rl.tensor_parallel)

    call, error, message = TENSOR_PARALLEL_BAD_INPUT[name]
    with pytest.raises(error, match=re.escape(message)):
        call()


# The context-parallel module (chapter 11): one bad input for every function it exports.
import roofline.parallel.context_parallel  # noqa: E402,F401  (makes rl.context_parallel an attribute)

CONTEXT_PARALLEL_BAD_INPUT = {
    "chunk_owners": (lambda: rl.parallel.context_parallel.chunk_owners(4, "zig-zag"), KeyError, "did you mean 'zigzag'"),
    "pair_matrix": (lambda: rl.parallel.context_parallel.pair_matrix(100, 8), ValueError, "a multiple of 16"),
    "pairs_per_gpu": (lambda: rl.parallel.context_parallel.pairs_per_gpu(64, 0), ValueError, "cp must be"),
    "ring_schedule": (lambda: rl.parallel.context_parallel.ring_schedule(64, 2.5), ValueError, "cp must be a whole number"),
    "ring_balance": (lambda: rl.parallel.context_parallel.ring_balance(-64, 2), ValueError, "seq must be"),
    "kv_block_bytes": (lambda: rl.parallel.context_parallel.kv_block_bytes("llama-3-8b", 0), ValueError, "tokens must be"),
    "ring_hiding_block": (lambda: rl.parallel.context_parallel.ring_hiding_block("llama-3-8b", "h100", tier="infiniband"),
                          KeyError, "unknown tier 'infiniband'"),
    "calibrated_hiding_block": (lambda: rl.parallel.context_parallel.calibrated_hiding_block("llama-3-8b", "h100", seq=4096,
                                                                                            tier="nvlink"),
                                KeyError, "unknown tier 'nvlink'; known: network, scale_up"),
    "ring_layer_times": (lambda: rl.parallel.context_parallel.ring_layer_times("llama-3-8b", "h100", 4096, 4, achieved=2),
                         ValueError, "achieved is a fraction of peak"),
    "check_all_to_all": (lambda: rl.parallel.context_parallel.check_all_to_all("llama-3-8b", 16), ValueError,
                         "cp must not exceed llama-3-8b's 8 key/value heads"),
    "all_to_all_sizes": (lambda: rl.parallel.context_parallel.all_to_all_sizes("llama-3-8b", 4097, 4), ValueError,
                         "seq must be a multiple of cp (4)"),
    "all_to_all_layer_time": (lambda: rl.parallel.context_parallel.all_to_all_layer_time("llama-3-8b", "h100", 4096, 3),
                              ValueError, "cp must divide"),
    "context_parallel_ops": (lambda: rl.parallel.context_parallel.context_parallel_ops([], "llama-3-8b", 4096, 2, method="ulysses"),
                             KeyError, "unknown method 'ulysses'"),
    "ContextParallelPlan": None,  # built by plan_context_parallel
    "RingLayerTimes": None,  # built by ring_layer_times
    "plan_context_parallel": (lambda: rl.parallel.context_parallel.plan_context_parallel("mixtral-8x7b", "h100", seq=4096, cp=2),
                              rl.NotModelledError, "experts"),
    "ContextParallelPrefill": None,  # built by context_parallel_prefill
    "context_parallel_prefill": (lambda: rl.parallel.context_parallel.context_parallel_prefill("llama-3-8b", "h100", 1000, 8),
                                 ValueError, "seq must split into 2 x cp = 16 equal chunks"),
    "longest_sequence": (lambda: rl.parallel.context_parallel.longest_sequence("llama-3-8b", "h100", multiple=0), ValueError,
                         "multiple must be"),
    "LongContext": None,  # built by long_context
    "long_context": (lambda: rl.parallel.context_parallel.long_context("llama-3-8b", 2**20, "h100", dtype="bf15"), KeyError,
                     "did you mean 'bf16'"),
    "smallest_cp": (lambda: rl.parallel.context_parallel.smallest_cp("llama-3-70b", "h100", 2**24, largest=8), ValueError,
                    "does not fit on up to 8 GPUs"),
}


def test_every_context_parallel_function_has_a_bad_input_case():
    import roofline.parallel.context_parallel as cp

    public = {name for name in cp.__all__ if callable(getattr(cp, name))}
    assert public == set(CONTEXT_PARALLEL_BAD_INPUT), "add a bad-input case for each new function in roofline.parallel.context_parallel"


@pytest.mark.parametrize("name", [n for n, case in CONTEXT_PARALLEL_BAD_INPUT.items() if case is not None])
def test_context_parallel_bad_input_fails_at_the_edge(name):
    call, error, message = CONTEXT_PARALLEL_BAD_INPUT[name]
    with pytest.raises(error, match=re.escape(message)):
        call()


# The pipeline schedules and the planner (chapter 9): one bad input for every function they export.
def _pp():
    from roofline.parallel import pipeline, planner

    return pipeline, planner


PIPELINE_BAD_INPUT = {
    "PUBLISHED": None, "SCHEDULES": None, "Slot": None, "Timeline": None,  # constants and records
    "bubble_fraction": (lambda: _pp()[0].bubble_fraction(4, 8, schedule="zero-bubble"), KeyError, "unknown schedule"),
    "in_flight": (lambda: _pp()[0].in_flight(0, 8), ValueError, "p must be"),
    "schedule_order": (lambda: _pp()[0].schedule_order(4, 6, 2, "interleaved"), ValueError, "multiple of p (4)"),
    "simulate": (lambda: _pp()[0].simulate(4, 8, forward=-1), ValueError, "forward must be"),
    "stage_layers": (lambda: _pp()[0].stage_layers(80, 81), ValueError, "at most the number of layers (80)"),
    "boundary_bytes": (lambda: _pp()[0].boundary_bytes("llama-3-8b", 4096, tp=0), ValueError, "tp must be"),
    "boundary_intensity": (lambda: _pp()[0].boundary_intensity("llama-3-8b", 1.5), ValueError, "p must be"),
}
PLANNER_BAD_INPUT = {
    "PUBLISHED": None, "Layout": None, "Plan": None, "NoLayoutFits": None, "MICRO_BATCHES": None, "CHUNKS": None,
    "plan": (lambda: _pp()[1].plan("llama-3-8b", "h100", nodes=1, seq=4096, global_batch=2.5), ValueError,
             "global_batch must be a whole number"),
    "gpt_model": (lambda: _pp()[1].gpt_model(12288, 96, 0), ValueError, "layers must be"),
    "cluster_size": (lambda: _pp()[1].cluster_size(2, 1000), ValueError, "gpus_per_node must be at most 576"),
}


def test_every_pipeline_and_planner_function_has_a_bad_input_case():
    pipeline, planner = _pp()
    assert set(pipeline.__all__) == set(PIPELINE_BAD_INPUT)
    assert set(planner.__all__) == set(PLANNER_BAD_INPUT)


@pytest.mark.parametrize("name", [n for n, c in {**PIPELINE_BAD_INPUT, **PLANNER_BAD_INPUT}.items() if c is not None])
def test_pipeline_and_planner_bad_input_fails_at_the_edge(name):
    call, error, message = {**PIPELINE_BAD_INPUT, **PLANNER_BAD_INPUT}[name]
    with pytest.raises(error, match=re.escape(message)):
        call()


# Chapters 7 to 9's helpers for their notebooks (appended so that each registry above stays complete).
CHAPTERS_7_TO_9_BAD_INPUT = {
    "data_parallel": {
        "gradient_bytes": (lambda: _dp().gradient_bytes("llama-3-8b", "fp7"), KeyError, "unknown dtype"),
        "bucket_count": (lambda: _dp().bucket_count("llama-3-8b", bucket=0), ValueError, "bucket must be"),
        "exchange_intensity": (lambda: _dp().exchange_intensity("llama-3-8b", 4096, n=1), ValueError, "n must be"),
        "exposure_sweep": (lambda: _dp().exposure_sweep("llama-3-8b", "h100", [512], nodes=0), ValueError, "nodes must be"),
        "layer_gather_time": (lambda: _dp().layer_gather_time("step"), TypeError, "step must be a DataParallelStep"),
        "layer_forward_time": (lambda: _dp().layer_forward_time(None), TypeError, "step must be a DataParallelStep"),
        "PublishedExchange": None,  # a record built by published_exchange
        "published_exchange": (lambda: _dp().published_exchange("h100-pcie"), ValueError, "tier must be one of"),
        "published_per_gpu": (lambda: _dp().published_per_gpu("v100-sxm2", "fp7"), KeyError, "fp7"),
        "TierThreshold": None,  # a record built by tier_thresholds
        "tier_thresholds": (lambda: _dp().tier_thresholds("a100-sxm-80gb", nodes=1), ValueError, "nodes must be"),
        "hierarchical_latency_steps": (lambda: _dp().hierarchical_latency_steps(12, 8), ValueError,
                                       "n must be a whole number of nodes"),
        "roof_hiding_tokens": (lambda: _dp().roof_hiding_tokens("llama-3-8b", _sheet(), seq=0), ValueError, "seq must be"),
        "zero_layouts": (lambda: _dp().zero_layouts(seq=4096, gpus=0), ValueError, "gpus must be"),
        "BucketExchange": None,  # a record built by roof_bucket_exchange
        "roof_bucket_exchange": (lambda: _dp().roof_bucket_exchange("llama-3-8b", _sheet(), bucket=0), ValueError,
                                 "bucket must be"),
    },
    "tensor_parallel": {
        "norm_share": (lambda: rl.parallel.tensor_parallel.norm_share("no-such-model"), KeyError, "no-such-model"),
        "message_bytes": (lambda: rl.parallel.tensor_parallel.message_bytes("llama-3-70b", -1), ValueError, "tokens must be"),
        "width_constant": (lambda: rl.parallel.tensor_parallel.width_constant("mixtral-8x7b"), rl.NotModelledError, "experts"),
        "width_layer_times": (lambda: rl.parallel.tensor_parallel.width_layer_times("llama-3-70b", 8, 4096, "h100", 0),
                              ValueError, "hidden must be"),
        "kv_room": (lambda: rl.parallel.tensor_parallel.kv_room("h100", -1.0), ValueError, "weights_per_gpu must be"),
        "batch_per_gpu": (lambda: rl.parallel.tensor_parallel.batch_per_gpu(3), TypeError, "point must be a DegreePoint"),
        "stack_time": (lambda: rl.parallel.tensor_parallel.stack_time("llama-3-70b", 8, 4096, "h100", pp=0), ValueError,
                       "pp must be"),
        "kv_head_copies": (lambda: rl.parallel.tensor_parallel.kv_head_copies("llama-3-70b", 0), ValueError, "tp must be"),
        "wait_share": (lambda: rl.parallel.tensor_parallel.wait_share("llama-3-8b", 8, "h100-pcie", "network"), ValueError,
                       "tier must be one of"),
        "stack_activations": (lambda: rl.parallel.tensor_parallel.stack_activations("llama-3-8b", 0), ValueError, "seq must be"),
        "replicated_activations": (lambda: rl.parallel.tensor_parallel.replicated_activations("llama-3-8b", 0), ValueError,
                                   "seq must be"),
        "degree_speedup": (lambda: rl.parallel.tensor_parallel.degree_speedup([], 8), ValueError, "tp must be one of the points"),
        "AgainstPipeline": None,  # a record built by against_pipeline
        "comm_share": (lambda: rl.parallel.tensor_parallel.comm_share(None), TypeError, "point must be a DegreePoint"),
        "comm_latency_share": (lambda: rl.parallel.tensor_parallel.comm_latency_share(None), TypeError,
                               "point must be a DegreePoint"),
        "width_margin": (lambda: rl.parallel.tensor_parallel.width_margin("llama-3-8b", 8, "h100-pcie", "network"), ValueError,
                         "tier must be one of"),
        "compute_share": (lambda: rl.parallel.tensor_parallel.compute_share("llama-3-70b", 16, 4096, "h100", gpus_per_node=3),
                          ValueError, "whole number of nodes"),
        "against_pipeline": (lambda: rl.parallel.tensor_parallel.against_pipeline("llama-3-70b", "h100", 8, published=0),
                             ValueError, "published must be"),
    },
    "pipeline": {
        "head_layers": (lambda: _pp()[0].head_layers("no-such-model"), KeyError, "no-such-model"),
        "BoundaryShare": None, "StageBalance": None,  # records
        "boundary_share": (lambda: _pp()[0].boundary_share("llama-3-70b", "h100", 8192, 0), ValueError, "p must be"),
        "hiding_stages": (lambda: _pp()[0].hiding_stages("llama-3-70b", "h100-pcie", "network"), ValueError,
                          "tier must be one of"),
        "micro_batches_for": (lambda: _pp()[0].micro_batches_for(16, 1.5), ValueError, "target is a bubble fraction"),
        "pipeline_messages": (lambda: _pp()[0].pipeline_messages(16, 0), ValueError, "m must be"),
        "stage_activation_bytes": (lambda: _pp()[0].stage_activation_bytes(126, 16, 64, -1.0), ValueError,
                                   "layer_bytes must be"),
        "stage_balance": (lambda: _pp()[0].stage_balance(8, 16), ValueError, "p (pipeline stages) must be at most"),
        "boundary_margin": (lambda: _pp()[0].boundary_margin("llama-3-70b", 0, "h100"), ValueError, "p must be"),
    },
    "planner": {
        "where": (lambda: _pp()[1].where("plan", tp=8), TypeError, "plan must be a Plan"),
        "first_layout": (lambda: _pp()[1].first_layout(None), TypeError, "plan must be a Plan"),
        "megatron_runs": (lambda: _pp()[1].megatron_runs("a100-sxm-80gb", seq=0), ValueError, "seq must be"),
        "published_over_bound": (lambda: _pp()[1].published_over_bound([("x", 3)]), TypeError, "runs must be"),
        "bubble_share": (lambda: _pp()[1].bubble_share(None), TypeError, "layout must be a Layout"),
    },
}
DATA_PARALLEL_BAD_INPUT.update(CHAPTERS_7_TO_9_BAD_INPUT["data_parallel"])
TENSOR_PARALLEL_BAD_INPUT.update(CHAPTERS_7_TO_9_BAD_INPUT["tensor_parallel"])
PIPELINE_BAD_INPUT.update(CHAPTERS_7_TO_9_BAD_INPUT["pipeline"])
PLANNER_BAD_INPUT.update(CHAPTERS_7_TO_9_BAD_INPUT["planner"])


@pytest.mark.parametrize("name", [f"{module}.{n}" for module, cases in CHAPTERS_7_TO_9_BAD_INPUT.items()
                                  for n, c in cases.items() if c is not None])
def test_chapters_7_to_9_helpers_bad_input_fails_at_the_edge(name):
    module, function = name.split(".")
    call, error, message = CHAPTERS_7_TO_9_BAD_INPUT[module][function]
    with pytest.raises(error, match=re.escape(message)):
        call()


# Chapter 11's helpers for its notebook (appended so that the context-parallel registry stays complete).
CHAPTER_11_BAD_INPUT = {
    "sequence_parallel_saving": (lambda: rl.parallel.context_parallel.sequence_parallel_saving("llama-3-70b", 0, 8),
                                 ValueError, "seq must be"),
    "block_attention_time": (lambda: rl.parallel.context_parallel.block_attention_time("llama-3-70b", "h100", -1),
                             ValueError, "block must be"),
    "pair_imbalance": (lambda: rl.parallel.context_parallel.pair_imbalance(4096, 4, "striped"), KeyError, "unknown layout"),
    "contiguous_balance_limit": (lambda: rl.parallel.context_parallel.contiguous_balance_limit(0), ValueError, "cp must be"),
    "block_tokens": (lambda: rl.parallel.context_parallel.block_tokens(131072, 2.5), ValueError, "cp must be a whole number"),
    "hiding_margin": (lambda: rl.parallel.context_parallel.hiding_margin("llama-3-70b", "h100", 131072, 16, tier="ib"),
                      KeyError, "unknown tier 'ib'"),
    "phase_factors": (lambda: rl.parallel.context_parallel.phase_factors("ring", "both"), ValueError,
                      "phase must be one of 'forward', 'backward', 'step'"),
    "all_to_all_share": (lambda: rl.parallel.context_parallel.all_to_all_share("llama-3-70b", "h100", 131072, 16),
                         ValueError, "cp must not exceed"),
    "ring_transfer_total": (lambda: rl.parallel.context_parallel.ring_transfer_total(1.0), TypeError,
                            "times must be RingLayerTimes"),
    "ulysses_published_bytes": (lambda: rl.parallel.context_parallel.ulysses_published_bytes("llama-2-7b", 131072, 0),
                                ValueError, "cp must be"),
    "all_to_all_leaving_bytes": (lambda: rl.parallel.context_parallel.all_to_all_leaving_bytes("llama-2-7b", 4097, 4),
                                 ValueError, "seq must be a multiple of cp (4)"),
    "rs_ag_bytes": (lambda: rl.parallel.context_parallel.rs_ag_bytes(0), ValueError, "n must be"),
}
CONTEXT_PARALLEL_BAD_INPUT.update(CHAPTER_11_BAD_INPUT)


@pytest.mark.parametrize("name", [n for n, c in CHAPTER_11_BAD_INPUT.items() if c is not None])
def test_chapter_11_helpers_bad_input_fails_at_the_edge(name):
    call, error, message = CHAPTER_11_BAD_INPUT[name]
    with pytest.raises(error, match=re.escape(message)):
        call()


# Chapter 7's collective helper (appended so that the collectives registry stays complete).
COLLECTIVES_BAD_INPUT["latency_share"] = (lambda: rl.core.collectives.latency_share(1.0), TypeError,
                                          "cost must be a CollectiveCost")
COLLECTIVES_BAD_INPUT["latency_bound_size"] = (lambda: rl.core.collectives.latency_bound_size("all_reduce", 8, "h100",
                                                                                                0), ValueError,
                                               "share must be a single number strictly between 0 and 1")


@pytest.mark.parametrize("name", ["latency_share", "latency_bound_size"])
def test_latency_share_bad_input_fails_at_the_edge(name):
    call, error, message = COLLECTIVES_BAD_INPUT[name]
    with pytest.raises(error, match=re.escape(message)):
        call()


@pytest.mark.parametrize("value, unit, expected", [
    (10**400, "s", "1.00e+400 s"),          # past the floats: its digits, never an OverflowError
    (-10**400, "", "-1.00e+400"),
    (1e308, "s", "1.00e+308 s"),            # past every prefix: scientific, never 300 digits
    (3e16, "tokens", "3.00e+16 tokens"),
    (1e-320, "s", "1.00e-320 s"),
    (2.5e-12, "", "2.50e-12"),
    (123_456.0, "tokens", "123,456 tokens"),  # within the range, as before
    (4.794e-3, "s", "4.79 ms"),
])
def test_fmt_prints_extreme_values_readably(value, unit, expected):
    assert fmt(value, unit) == expected
