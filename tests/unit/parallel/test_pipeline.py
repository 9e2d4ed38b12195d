"""Pipeline schedules (chapter 9): the closed forms against a simulated timeline, boundary bytes."""

import itertools

import numpy as np
import pytest

from roofline.core.model import load_model, param_count
from roofline.parallel.pipeline import (bubble_fraction, boundary_bytes, boundary_intensity, in_flight,
                                        schedule_order, simulate, stage_layers)

CASES = [(p, m) for p, m in itertools.product((2, 3, 4, 8), (1, 2, 4, 8, 16)) if m >= 1]


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p,m", CASES)
def test_bubble_matches_simulation(schedule, p, m):
    t = simulate(p, m, schedule=schedule, forward=1.0, backward=2.0)
    assert t.makespan == pytest.approx((m + p - 1) * 3.0)
    assert t.bubble == pytest.approx(bubble_fraction(p, m, schedule=schedule))
    assert t.peak_in_flight(0) == pytest.approx(in_flight(p, m, schedule=schedule))


@pytest.mark.parametrize("v", [2, 3, 4])
@pytest.mark.parametrize("p,m", [(2, 4), (4, 8), (4, 16), (3, 6), (8, 8), (8, 32)])
def test_interleaved_bubble_matches_simulation(p, m, v):
    t = simulate(p, m, v, "interleaved", forward=1.0, backward=2.0)
    assert t.bubble == pytest.approx((p - 1) / (m * v))
    assert t.bubble == pytest.approx(bubble_fraction(p, m, v, "interleaved"))
    assert t.peak_in_flight(0) == pytest.approx(in_flight(p, m, v, "interleaved"))


def test_every_stage_runs_every_pass_once():
    for schedule, v in [("gpipe", 1), ("1f1b", 1), ("interleaved", 2)]:
        t = simulate(4, 8, v, schedule)
        for s in range(4):
            ops = [(x.kind, x.micro_batch, x.chunk) for x in t.slots if x.stage == s]
            assert len(ops) == len(set(ops)) == 2 * 8 * v
            assert t.busy(s) == pytest.approx(8 * 3.0)


def test_no_stage_runs_two_things_at_once():
    t = simulate(4, 8, 2, "interleaved")
    for s in range(4):
        spans = sorted((x.start, x.end) for x in t.slots if x.stage == s)
        assert all(a[1] <= b[0] + 1e-12 for a, b in zip(spans, spans[1:]))


def test_1f1b_holds_fewer_than_gpipe():
    assert simulate(4, 16, schedule="1f1b").peak_in_flight(0) == 4
    assert simulate(4, 16, schedule="gpipe").peak_in_flight(0) == 16
    # later stages hold fewer in 1F1B: stage s holds p - s
    t = simulate(4, 16, schedule="1f1b")
    assert [t.peak_in_flight(s) for s in range(4)] == [4, 3, 2, 1]


def test_messages_lengthen_the_fill():
    # GPipe: the fill and the drain each cross p - 1 boundaries, and nothing else waits
    quiet = simulate(4, 8, schedule="gpipe", forward=1.0, backward=2.0)
    slow = simulate(4, 8, schedule="gpipe", forward=1.0, backward=2.0, message=0.1)
    assert slow.makespan == pytest.approx(quiet.makespan + 2 * 3 * 0.1)
    # 1F1B waits at least as long: its steady state also waits on the neighbours' messages
    one = simulate(4, 8, forward=1.0, backward=2.0, message=0.1)
    assert one.makespan >= slow.makespan - 1e-12


def test_bubble_broadcasts():
    out = bubble_fraction(16, np.array([16, 64, 256]))
    assert out == pytest.approx([15 / 16, 15 / 64, 15 / 256])


def test_uneven_layers():
    assert stage_layers(126, 16) == [8] * 14 + [7] * 2
    assert sum(stage_layers(80, 3)) == 80 and max(stage_layers(80, 3)) == 27


def test_boundary_bytes_and_intensity():
    m = load_model("llama-3-70b")
    assert boundary_bytes(m, 8192, 1) == 8192 * m.hidden_size * 2
    assert boundary_bytes(m, 8192, 2, tp=8) == 8192 * 2 * m.hidden_size * 2 / 8
    assert boundary_intensity(m, 8) == pytest.approx(6 * param_count(m) / 8 / (4 * m.hidden_size))


def test_bad_input():
    with pytest.raises(KeyError, match="schedule"):
        bubble_fraction(4, 8, schedule="zigzag")
    with pytest.raises(ValueError, match="v"):
        bubble_fraction(4, 8, 2, "1f1b")
    with pytest.raises(ValueError, match="m"):
        schedule_order(4, 6, 2, "interleaved")
    with pytest.raises(ValueError, match="p"):
        stage_layers(4, 8)
    with pytest.raises(ValueError, match="m"):
        bubble_fraction(4, 0)


def test_head_layers_by_hand():
    from roofline.parallel import pipeline as pp

    head = 128_256 * 16_384  # Llama 3.1 405B: vocabulary x hidden, untied
    layer = (405_853_388_800 - 2 * head) / 126
    assert pp.head_layers("llama-3.1-405b") == pytest.approx(head / layer)
    assert pp.head_layers("llama-3.1-405b") == pytest.approx(0.659, abs=1e-3)


def test_boundary_share_is_two_sends_over_the_stages_compute():
    from roofline.core.collectives import collective_time
    from roofline.parallel import pipeline as pp

    b = pp.boundary_share("llama-3.1-405b", "h100-sxm", 8192, 16, tp=8)
    assert b.stage == pytest.approx(6 * 405_853_388_800 * 8192 / 16 / 8 / 989.4e12)
    assert b.send == pytest.approx(collective_time("send_recv", 2, 8192 * 16384 * 2 / 8, "h100-sxm", tier="network"))
    assert b.share == pytest.approx(2 * b.send / b.stage)


def test_hiding_stages_is_where_the_boundary_intensity_meets_the_ridge():
    from roofline.parallel import pipeline as pp

    # 6 N / (2 h 2) FLOP/B at p = 1, against 989.4 TFLOP/s over 50 GB/s of InfiniBand per GPU
    expected = 6 * param_count(load_model("llama-3-70b")) / (4 * 8192) / (989.4e12 / 50e9)
    p = pp.hiding_stages("llama-3-70b", "h100-sxm", "network")
    assert p == pytest.approx(expected)
    assert boundary_intensity("llama-3-70b", 652) > 989.4e12 / 50e9 > boundary_intensity("llama-3-70b", 653)


def test_micro_batches_for_a_target_bubble():
    from roofline.parallel import pipeline as pp

    assert pp.micro_batches_for(16, 0.05) == 300  # 15 / 0.05
    assert bubble_fraction(16, 300) <= 0.05 < bubble_fraction(16, 299)
    m = pp.micro_batches_for(16, 0.05, 4, "interleaved")
    assert m == 80 and m % 16 == 0  # 15 / 0.2 = 75, up to a multiple of 16
    assert bubble_fraction(16, 80, 4, "interleaved") <= 0.05 < bubble_fraction(16, 64, 4, "interleaved")


def test_pipeline_messages_and_first_stage_activations():
    from roofline.parallel import pipeline as pp

    assert pp.pipeline_messages(16, 64, 4) == 2 * (64 * 4 + 15) == 542
    assert pp.pipeline_messages(2, 1) == 4
    # 126 layers on 16 stages: 8 on the first; 1F1B holds min(16, 64) micro-batches, GPipe all 64
    assert pp.stage_activation_bytes(126, 16, 64, 1.0) == 16 * 8
    assert pp.stage_activation_bytes(126, 16, 64, 2.0, schedule="gpipe") == 64 * 8 * 2
    assert pp.stage_activation_bytes(126, 16, 64, 1.0, 4, "interleaved") == pytest.approx((16 + 15 / 4) * 8)


def test_stage_balance_of_126_layers_on_16_stages():
    from roofline.parallel import pipeline as pp

    b = pp.stage_balance(126, 16)
    assert (b.mean, b.most, b.least) == (7.875, 8, 7)
    assert b.loss == pytest.approx(1 / 64) and b.short_idle == pytest.approx(1 / 8)
    assert pp.stage_balance(128, 16).loss == 0


@pytest.mark.parametrize("call, error, message", [
    (lambda pp: pp.head_layers("no-such-model"), KeyError, "no-such-model"),
    (lambda pp: pp.boundary_share("llama-3-70b", "h100-sxm", 8192, 0), ValueError, "p must be"),
    (lambda pp: pp.boundary_share("llama-3-70b", "h100-sxm", 8192, 8, tier="ib"), KeyError, "unknown tier 'ib'"),
    (lambda pp: pp.hiding_stages("llama-3-70b", "h100-pcie", "network"), ValueError, "tier must be one of"),
    (lambda pp: pp.micro_batches_for(16, 1.5), ValueError, "target is a bubble fraction and must be below 1"),
    (lambda pp: pp.micro_batches_for(16, 0), ValueError, "target must be"),
    (lambda pp: pp.micro_batches_for(16, 0.05, 2), ValueError, "v (model chunks per GPU) must be 1"),
    (lambda pp: pp.pipeline_messages(16, 0), ValueError, "m must be"),
    (lambda pp: pp.stage_activation_bytes(126, 16, 64, -1.0), ValueError, "layer_bytes must be"),
    (lambda pp: pp.stage_balance(8, 16), ValueError, "p (pipeline stages) must be at most"),
])
def test_chapter_helpers_bad_input(call, error, message):
    from roofline.parallel import pipeline as pp

    with pytest.raises(error, match=__import__("re").escape(message)):
        call(pp)


def test_boundary_margin_is_intensity_over_ridge():
    from roofline.parallel import pipeline as pp

    # 6 N / 8 / (2 h 2) against 989.4 TFLOP/s over 50 GB/s
    expected = 6 * param_count(load_model("llama-3-70b")) / 8 / (4 * 8192) / (989.4e12 / 50e9)
    assert pp.boundary_margin("llama-3-70b", 8, "h100-sxm", "network") == pytest.approx(expected)
    with pytest.raises(ValueError, match="p must be"):
        pp.boundary_margin("llama-3-70b", 0, "h100-sxm")
