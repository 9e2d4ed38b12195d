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
