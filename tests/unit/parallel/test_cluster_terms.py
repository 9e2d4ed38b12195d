"""The cluster step model term by term (issue 51), under the H100's datasheet roof: every matmul at
989.4 TFLOP/s, every byte at 3.35 TB/s, NVLink at 450 GB/s one way, the network at 50 GB/s (400 Gb/s) a GPU, no
launch and no latency. Each value is worked by hand in its docstring, so that a one-line change to a term of
:func:`roofline.parallel.cluster.price_step` fails at least two tests here or beside them;
`python -m booktools.mutants training` plants such changes and counts the tests that catch them.

Llama 3 8B: h = 4,096, an MLP 14,336 wide (gated), 32 query and 8 KV heads of 128, 8,030,261,248 parameters."""

import dataclasses

import pytest

import roofline as rl
from roofline.core.calibration import get_roof
from roofline.parallel.cluster import TrainLayout, check_layout, layer_seconds, price_step

SHEET = get_roof("h100-sxm", "datasheet")
HBM, NVLINK, NETWORK = 3.35e12, 450e9, 50e9
LLAMA, MIXTRAL = rl.load_model("llama-3-8b"), rl.load_model("mixtral-8x7b")
PARAMS = 8_030_261_248


# ------------------------------------------------------------------------------------ memory-bound kernels


def test_a_tokens_memory_bound_bytes_are_its_norms_residuals_rotary_and_activation():
    """A token's bytes through one layer's memory-bound kernels, forward: two norms (each reads and writes the
    bf16 hidden state, 2 x 4h), the two residual adds and their copies (12h), the gated MLP's activation (read two
    14,336-wide halves and write one, 6 x 14,336) and rotary on 40 heads' queries and keys (4 x 40 x 128):
    81,920 + 86,016 + 20,480 = 188,416 bytes. 4,096 tokens: 771,751,936 bytes, 230.4 us at 3.35 TB/s."""
    fwd = layer_seconds(LLAMA, TrainLayout(seq=4096), SHEET)["memory-bound"]
    assert fwd == pytest.approx(188_416 * 4096 / HBM)
    assert fwd == pytest.approx(230.37e-6, rel=1e-4)


def test_the_backward_pass_moves_twice_the_forwards_memory_bound_bytes():
    """Backward, each kernel reads what the forward pass read and the incoming gradient and writes the gradient
    of its input: twice the bytes, 460.7 us a layer for the same 4,096 tokens."""
    lay = TrainLayout(seq=4096)
    fwd = layer_seconds(LLAMA, lay, SHEET)["memory-bound"]
    bwd = layer_seconds(LLAMA, lay, SHEET, "backward")["memory-bound"]
    assert bwd == pytest.approx(2 * fwd) == pytest.approx(2 * 188_416 * 4096 / HBM)


# ------------------------------------------------------------------------------------ context parallelism


RING = TrainLayout(seq=2048, cp=8, gpus_per_node=4)  # 8 ranks over two nodes of 4: the ring crosses the network


def test_the_rings_forward_pass_sends_its_block_seven_times_behind_attention():
    """Eight ranks of 256 tokens each: a rank's keys and values are 2 x 256 x 8 heads x 128 x 2 bytes =
    1,048,576 bytes, sent on 7 times at 50 GB/s (20.97 us each, 146.8 us), less the 4.3 us of attention they
    hide behind: 142.5 us exposed a layer."""
    f = layer_seconds(LLAMA, RING, SHEET)
    assert f["context-parallel"] == pytest.approx(7 * 1_048_576 / NETWORK - f["attention"])
    assert f["context-parallel"] == pytest.approx(142.46e-6, rel=1e-3)


def test_the_rings_backward_pass_sends_the_blocks_and_their_gradients():
    """Backward, the keys and values go round again with their gradients coming back: 14 sends of 20.97 us,
    293.6 us, less the 10.9 us of the backward attention: 282.7 us a layer."""
    b = layer_seconds(LLAMA, RING, SHEET, "backward")
    assert b["context-parallel"] == pytest.approx(14 * 1_048_576 / NETWORK - b["attention"])
    assert b["context-parallel"] == pytest.approx(282.75e-6, rel=1e-3)


def test_a_steps_ring_traffic_is_its_layers_forward_and_backward_exposure():
    """Over the step's 32 layers and its one micro-batch: 32 x (142.5 + 282.7) us = 13.6 ms."""
    f, b = layer_seconds(LLAMA, RING, SHEET), layer_seconds(LLAMA, RING, SHEET, "backward")
    assert price_step(LLAMA, RING, SHEET).parts["context-parallel"] == pytest.approx(
        32 * (f["context-parallel"] + b["context-parallel"]))
    assert price_step(LLAMA, RING, SHEET).parts["context-parallel"] == pytest.approx(13.61e-3, rel=1e-3)


@pytest.mark.parametrize("seq", [4092, 4100])
def test_the_zigzag_split_needs_twice_cp_to_divide_the_sequence(seq):
    """Zigzag gives each of cp ranks two of 2 x cp chunks (one from each end, to balance the causal mask):
    4,092 and 4,100 tokens divide by 4 but not by 8, so cp = 4 is refused for both; 4,096 is split."""
    with pytest.raises(ValueError, match=r"2 x cp \(8\) to divide seq"):
        check_layout(LLAMA, TrainLayout(seq=seq, cp=4))
    assert check_layout(LLAMA, TrainLayout(seq=4096, cp=4)) is not None


def test_a_sequence_the_zigzag_cannot_split_is_refused_when_a_step_is_priced():
    with pytest.raises(ValueError, match=r"zigzag split needs 2 x cp \(8\)"):
        price_step(LLAMA, TrainLayout(seq=4100, cp=4), SHEET)


# ------------------------------------------------------------------------------------ expert parallelism


MOE = TrainLayout(seq=4096, dp=2, ep=2, recompute="none")


def test_each_token_goes_once_to_each_gpu_of_its_top_two_experts_and_back_in_both_passes():
    """Mixtral over 2 GPUs, experts split 4 and 4: a token's two experts sit on ``2 (1 - C(4,2)/C(8,2)) = 2 x 22/28
    = 1.5714`` GPUs on average, and the dispatch sends it once to each (DeepEP's count, its own GPU included):
    4,096 x 1.5714 x 4,096 x 2 bytes = 52,728,393 bytes a dispatch, half of it leaving the GPU at 450 GB/s
    (58.59 us); dispatch and combine, forward and backward, over 32 layers: 128 x 58.59 us = 7.50 ms a
    micro-batch."""
    a2a = price_step(MIXTRAL, MOE, SHEET).parts["expert all-to-all"]
    assert a2a == pytest.approx(128 * 4096 * (44 / 28) * 4096 * 2 * 0.5 / NVLINK)
    assert a2a == pytest.approx(7.499e-3, rel=1e-3)


def test_a_top_one_mixture_sends_each_token_to_one_gpu():
    """The same model routed to one expert a token: ``2 (1 - 4/8) = 1`` GPU a token, 4,096 x 4,096 x 2 =
    33,554,432 bytes a dispatch, half leaving at 450 GB/s: 128 x 37.28 us = 4.77 ms, 22/28 of the top-two's
    (not half: a top-two token's experts share a GPU 6 times in 28)."""
    top1 = dataclasses.replace(MIXTRAL, moe=dataclasses.replace(MIXTRAL.moe, experts_per_token=1))
    two = price_step(MIXTRAL, MOE, SHEET).parts["expert all-to-all"]
    one = price_step(top1, MOE, SHEET).parts["expert all-to-all"]
    assert one == pytest.approx(4.772e-3, rel=1e-3)
    assert one == pytest.approx(two * 28 / 44)


# ------------------------------------------------------------------------------------ ZeRO's stages


def _zero(stage):
    return price_step(LLAMA, TrainLayout(seq=4096, dp=8, global_batch=8, zero_stage=stage), SHEET)


def test_zero_2_shards_the_gradients_and_zero_1_does_not():
    """bf16 gradients are 2 bytes a parameter, 16.06 GB whole; ZeRO-2 over 8 replicas keeps an eighth,
    2.01 GB; ZeRO-1 keeps them whole and shards only the optimizer's 12 bytes a parameter."""
    assert _zero(1).memory_parts["gradients"] == pytest.approx(2 * PARAMS)
    assert _zero(2).memory_parts["gradients"] == pytest.approx(2 * PARAMS / 8)


def test_zero_2_saves_seven_eighths_of_the_gradients_over_zero_1():
    """The step from stage 1 to 2 frees 2 x 8.03e9 x 7/8 = 14.05 GB a GPU and changes nothing else."""
    assert _zero(1).memory - _zero(2).memory == pytest.approx(2 * PARAMS * 7 / 8)
    assert _zero(1).memory_parts["optimizer"] == _zero(2).memory_parts["optimizer"]


def test_the_optimizer_step_reads_its_shard_from_stage_1():
    """The optimizer's pass moves 38 bytes a parameter in bf16 (Adam reads the fp32 weights, the gradients and
    two moments and writes three, the gradient norm reads the gradients again, the bf16 copy is written);
    unsharded that is 305 GB, 91.1 ms at 3.35 TB/s; ZeRO-1 over 8 leaves each GPU an eighth, 11.4 ms."""
    assert _zero(0).parts["optimizer"] == pytest.approx(38 * PARAMS / HBM)
    assert _zero(1).parts["optimizer"] == pytest.approx(38 * PARAMS / 8 / HBM)


def test_sharding_the_optimizer_divides_its_time_by_the_replicas():
    assert _zero(0).parts["optimizer"] / _zero(1).parts["optimizer"] == pytest.approx(8)
    assert _zero(3).parts["optimizer"] == pytest.approx(_zero(1).parts["optimizer"])


# ------------------------------------------------------------------------------------ a tied embedding


GEMMA = rl.load_model("gemma-7b")  # 256,000 x 3,072 embedding, shared with the output head


def test_a_tied_embeddings_gradient_is_summed_between_the_first_and_last_stage():
    """Gemma 7B in two pipeline stages on two nodes: the embedding's gradient, 256,000 x 3,072 x 2 bytes =
    1,572,864,000 bytes, all-reduced between the two GPUs that hold a copy, one per node: (2 - 1)/2 x 2 x the
    buffer at 50 GB/s = 31.5 ms, the only data-parallel traffic of a step with one replica."""
    p = price_step(GEMMA, TrainLayout(seq=4096, pp=2, global_batch=8), SHEET)
    assert p.parts["data-parallel"] == pytest.approx(1_572_864_000 / NETWORK)


def test_an_untied_model_has_no_such_exchange_and_tp_halves_it():
    untied = dataclasses.replace(GEMMA, tie_word_embeddings=False)
    lay = TrainLayout(seq=4096, pp=2, global_batch=8)
    tied = price_step(GEMMA, lay, SHEET).parts["data-parallel"]
    assert tied - price_step(untied, lay, SHEET).parts["data-parallel"] == pytest.approx(31.457e-3, rel=1e-4)
    halved = price_step(GEMMA, dataclasses.replace(lay, tp=2), SHEET).parts["data-parallel"]
    assert halved == pytest.approx(tied / 2)


# ------------------------------------------------------------------------------------ recomputation's FLOPs

ATTENTION_FWD = 4096 * 32 * 256 * 32  # a token's causal attention forward: 4,096 keys / 2 x 2 x 32 heads x 256 x 32 layers


def _recomputed(policy):
    return price_step(LLAMA, TrainLayout(seq=4096, global_batch=1, recompute=policy), SHEET)


def test_selective_recomputation_runs_attentions_forward_a_fourth_time():
    """A token's model FLOPs: 6 x 8,030,261,248 for the weights and 3 x 1,073,741,824 for causal attention at
    4,096 tokens, 51,402,792,960. Selective recomputation redoes the attention forward only: 4 x 1,073,741,824,
    52,476,534,784 hardware FLOPs, so HFU / MFU = 1.0209. Full recomputation redoes every forward: 4/3."""
    sel, full = _recomputed("selective"), _recomputed("full")
    assert sel.hfu / sel.mfu == pytest.approx((6 * PARAMS + 4 * ATTENTION_FWD) / (6 * PARAMS + 3 * ATTENTION_FWD))
    assert sel.hfu / sel.mfu == pytest.approx(1.02089, rel=1e-5)
    assert full.hfu / full.mfu == pytest.approx(4 / 3)


def test_the_hardware_flops_selective_adds_are_one_attention_forward_a_token():
    """HFU x peak x step time is the FLOPs the GPU ran: with selective recomputation, 4,096 x 1,073,741,824 =
    4.4e12 more than the model's count for the step's 4,096 tokens; without recomputation, none more."""
    for policy, extra in (("selective", ATTENTION_FWD), ("none", 0)):
        p = _recomputed(policy)
        ran, counted = p.hfu * SHEET.peak_flops * p.time, p.mfu * SHEET.peak_flops * p.time
        assert ran - counted == pytest.approx(4096 * extra, abs=1e3)
