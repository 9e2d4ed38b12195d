"""roofline.measured.checkpointing: the recomputation runs of chapter 3 against the model."""

from __future__ import annotations

import pytest
from roofline import measured as M


def test_checkpoint_run_flops_per_second_and_the_unexplained_rest():
    from roofline.measured import checkpoint_runs

    for r in checkpoint_runs():
        assert r.model_flops_per_s == pytest.approx(r.mfu * r.peak)
        per = (r.measured - r.kept - r.working - r.temporaries) / (r.run.tokens * r.run.batch) / r.run.layers
        assert r.unexplained_per_token_layer == pytest.approx(per)


def test_checkpointing_raised_hfu_everywhere_but_the_shortest_run():
    effects = M.checkpointing_effects(M.checkpoint_runs())
    by = {e.label: e for e in effects}
    assert len(effects) == 5
    short = by["2,048 x 1"]
    # 46.5% -> 44.2%: 1.40x the time for 1.33x the FLOPs
    assert (short.hfu_without, short.hfu_with) == pytest.approx((0.465, 0.442), abs=0.001)
    assert short.time_ratio == pytest.approx(1.402, abs=0.001) and short.flop_ratio == pytest.approx(4 / 3)
    assert not short.hfu_rose
    assert [e.label for e in effects if e.hfu_rose] == ["4,096 x 1", "8,192 x 1", "4,096 x 2", "4,096 x 4"]
    for e in effects:  # HFU rises exactly when the time grew by less than the FLOPs
        assert e.hfu_rose == (e.time_ratio < e.flop_ratio)
