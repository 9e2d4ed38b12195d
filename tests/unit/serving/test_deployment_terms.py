"""The deployment model term by term (issue 51): each term of a step and of a replica's memory worked by hand,
under the datasheet roof (every matmul at the peak, every byte at the HBM bandwidth, every exchange at the link's
one-way rate, no launch, no latency), so that a one-line change to any term fails at least two tests here;
`python -m booktools.mutants serving` plants such changes and counts the tests that catch them.

Llama 3 8B, per layer: q and o 4,096 x 4,096, k and v 4,096 x 1,024, gate and up 4,096 x 14,336, down
14,336 x 4,096 (7,504,658,432 linear parameters with the 128,256 x 4,096 head); its cache 131,072 bytes a token
(32 layers x 8 KV heads x 128 x K and V x 2 bytes)."""

import dataclasses

import pytest

import roofline as rl
from roofline.core.calibration import get_roof
from roofline.parallel.tensor_parallel import weights_per_gpu
from roofline.serving.deployment import (Deployment, Workload, largest_batch, prefix_savings, serving_pair,
                                         step_time, sustain)

SHEET = get_roof("h100-sxm", "datasheet")
LLAMA, MIXTRAL = rl.load_model("llama-3-8b"), rl.load_model("mixtral-8x7b")
H100 = rl.get_hardware("h100-sxm")
NVLINK = 450e9  # the H100's NVLink, one way, bytes/s (the catalog's 900 GB/s both ways)
KV_TOKEN = 131_072


def test_a_decode_token_costs_two_flops_a_weight_and_an_attention_group_holds_its_share():
    """One token through the 7,504,658,432 linear weights: 15,009,316,864 FLOPs at context 0; 64 sequences over
    2 attention groups leave 32 a GPU, the FLOPs of 32."""
    one = step_time(LLAMA, Deployment(), SHEET, decode=1, context=0)
    assert one.flops == 2 * 7_504_658_432
    halves = step_time(LLAMA, Deployment(dp_attention=2), SHEET, decode=64, context=0)
    assert halves.flops == 32 * one.flops


def test_a_decode_tokens_bytes_beyond_the_weights_are_its_activations_and_its_elementwise_passes():
    """A second token adds no weight bytes: 32 layers x (163,840 bytes in and out of its matmuls, 2 x (k + n) in
    bf16, plus 167,936 of norms (2 x 4h), residuals and rotary (12 h) and the gated MLP's activation (6 x 14,336))
    and the head's 2 x (4,096 + 128,256): 10,881,536 bytes. Two attention groups each hold half the tokens."""
    one = step_time(LLAMA, Deployment(), SHEET, decode=1, context=0)
    two = step_time(LLAMA, Deployment(), SHEET, decode=2, context=0)
    assert two.bytes - one.bytes == 10_881_536
    groups = step_time(LLAMA, Deployment(dp_attention=2), SHEET, decode=4, context=0)
    assert groups.bytes == two.bytes


def test_a_decode_step_reads_each_sequences_cache_and_tensor_parallelism_splits_it_by_kv_head():
    """4 sequences at 1,000 tokens read 4 x 1,000 x 131,072 = 524,288,000 bytes of cache; at TP 8 each GPU
    keeps one of the 8 KV heads, an eighth."""
    at = lambda d, c: step_time(LLAMA, d, SHEET, decode=4, context=c).bytes  # noqa: E731
    assert at(Deployment(), 1000) - at(Deployment(), 0) == 4 * 1000 * KV_TOKEN
    assert at(Deployment(tp=8), 1000) - at(Deployment(tp=8), 0) == pytest.approx(4 * 1000 * KV_TOKEN / 8)


def test_tensor_parallelism_exchanges_two_all_reduces_of_each_layers_activations():
    """TP 2, 8 tokens: two all-reduces a layer of 8 x 4,096 x 2 = 65,536 bytes, each sending 2 (t-1)/t = 1 times
    its buffer at 450 GB/s: 32 x 2 x 145.6 ns = 9.32 us; 16 tokens send twice that."""
    eight = step_time(LLAMA, Deployment(tp=2), SHEET, decode=8, context=0).exchange
    assert eight == pytest.approx(2 * 32 * 65_536 / NVLINK)
    assert step_time(LLAMA, Deployment(tp=2), SHEET, decode=16, context=0).exchange == pytest.approx(2 * eight)


def test_expert_parallelism_sends_each_token_to_its_top_k_experts_and_back():
    """Mixtral over 2 attention groups with its experts over both (EP 2), 8 sequences: 4 a group, each sent to
    its 2 experts (8 vectors of 4,096 numbers, 65,536 bytes) in the dispatch and again in the combine, half of
    each all-to-all leaving the GPU at 450 GB/s: 32 layers x 2 x 72.8 ns = 4.66 us."""
    st = step_time(MIXTRAL, Deployment(dp_attention=2, ep=2), SHEET, decode=8, context=0)
    assert st.exchange == pytest.approx(32 * 2 * 65_536 * 0.5 / NVLINK)
    twice = step_time(MIXTRAL, Deployment(dp_attention=2, ep=2), SHEET, decode=16, context=0)
    assert twice.exchange == pytest.approx(2 * st.exchange)


def test_a_top_1_mixture_sends_half_the_bytes_of_a_top_2_one():
    """The same Mixtral routed to one expert a token instead of two: each all-to-all carries 4 vectors, not 8, so
    the exchange halves (the dispatch and the combine both scale with the experts a token visits)."""
    top1 = dataclasses.replace(MIXTRAL, moe=dataclasses.replace(MIXTRAL.moe, experts_per_token=1))
    two = step_time(MIXTRAL, Deployment(dp_attention=2, ep=2), SHEET, decode=8, context=0).exchange
    one = step_time(top1, Deployment(dp_attention=2, ep=2), SHEET, decode=8, context=0).exchange
    assert one == pytest.approx(two / 2) == pytest.approx(32 * 2 * 32_768 * 0.5 / NVLINK)


def test_a_prompt_token_attends_to_its_keys_at_two_flops_a_pair_per_head_dimension():
    """1,000 prompt tokens attending to 500 keys each on average: 1,000 x 500 x 2 x 32 heads x (128 + 128) =
    8.192e9 FLOPs a layer, 262 GFLOP over 32 layers, beyond the matmuls' FLOPs of the same tokens."""
    with_keys = step_time(LLAMA, Deployment(), SHEET, decode=0, context=0, prefill=1000, keys=500)
    none = step_time(LLAMA, Deployment(), SHEET, decode=0, context=0, prefill=1000, keys=0)
    assert with_keys.flops - none.flops == pytest.approx(32 * 1000 * 500 * 2 * 32 * 256)
    groups = step_time(LLAMA, Deployment(dp_attention=2), SHEET, decode=0, context=0, prefill=1000, keys=500)
    assert with_keys.flops - none.flops == pytest.approx(2 * (groups.flops - none.flops / 2))


WORK = Workload(2048, 256)  # grow: a sequence holds its prompt and half its answer, 2,176 tokens on average


def test_the_batch_that_fits_is_the_room_after_the_weights_over_a_sequences_cache():
    """H100: 83,971,735,552 usable bytes less 16,060,522,496 of weights leaves 67,911,213,056; a sequence holds
    2,176 x 131,072 = 285,212,672 bytes: 238 fit. Two attention groups hold 238 each."""
    assert largest_batch(LLAMA, H100, WORK, Deployment()) == int((H100.usable_capacity - weights_per_gpu(LLAMA))
                                                               / (2176 * KV_TOKEN)) == 238
    assert largest_batch(LLAMA, H100, WORK, Deployment(dp_attention=2)) == 476


def test_a_sequence_reserving_its_whole_answer_holds_2304_tokens_and_a_cap_caps():
    """Reserve (TensorRT-LLM's policy): 2,048 + 256 = 2,304 tokens a sequence, 224 fit; max_batch 100 caps the
    batch, in the memory and in what a replica sustains offline."""
    assert largest_batch(LLAMA, H100, WORK, Deployment(kv_policy="reserve")) == 224
    assert largest_batch(LLAMA, H100, WORK, Deployment(max_batch=100)) == 100
    capped = sustain(LLAMA, H100, WORK, Deployment(max_batch=100), SHEET)
    assert capped.max_batch == 100 and capped.batch <= 100


def test_the_cache_fraction_and_a_shared_prefix_shrink_the_room():
    """Half the room after the weights (kv_fraction 0.5): 119 sequences. Half of each prompt cached (1,024 tokens,
    kept once, 134,217,728 bytes): the room less that copy over 1,152 tokens a sequence, 448."""
    assert largest_batch(LLAMA, H100, WORK, Deployment(kv_fraction=0.5)) == 119
    hit = Workload(2048, 256, prefix_hit=0.5)
    room = H100.usable_capacity - weights_per_gpu(LLAMA) - 1024 * KV_TOKEN
    assert largest_batch(LLAMA, H100, hit, Deployment()) == int(room / (1152 * KV_TOKEN)) == 448
    saved = prefix_savings(LLAMA, H100, hit, Deployment(), SHEET)
    assert saved.kv_full - saved.kv_cached == pytest.approx(1024 * KV_TOKEN) and saved.shared == 1024 * KV_TOKEN


def test_a_disaggregated_prompt_sends_its_whole_cache_to_the_decode_pool():
    """A prompt of 2,048 tokens leaves 268,435,456 bytes of cache; from one prefill GPU to one decode GPU in a
    node at 450 GB/s: 597 us. A link a thousand times slower makes the link the limit."""
    d = Deployment(disaggregate=(1, 1))
    pair = serving_pair(LLAMA, H100, WORK, d)
    assert pair.ceiling.kv_transfer_s == pytest.approx(2048 * KV_TOKEN / NVLINK)
    slow = sustain(LLAMA, H100, WORK, Deployment(disaggregate=(1, 1), kv_link=NVLINK / 1000), SHEET)
    assert slow.limit == "kv link" and slow.kv_transfer_s == pytest.approx(1000 * 2048 * KV_TOKEN / NVLINK)


def test_a_cap_below_what_fits_sets_the_batch_and_one_above_it_changes_nothing():
    """Grow: 238 sequences fit (above). A cap of 1,000 leaves 238; a cap of 64 holds a replica to 64 sequences,
    in the memory model and in what it runs offline."""
    assert largest_batch(LLAMA, H100, WORK, Deployment(max_batch=1000)) == 238
    assert largest_batch(LLAMA, H100, WORK, Deployment(max_batch=64)) == 64
    assert sustain(LLAMA, H100, WORK, Deployment(max_batch=64), SHEET).max_batch == 64
