"""roofline.core.curve: a measured curve is straight between its points on log-log axes and flat beyond them."""

from __future__ import annotations

import numpy as np
import pytest

import roofline as rl
from roofline.core.curve import Curve, loglog


def test_calibrated_interpolation_is_straight_on_log_log_axes():
    """Between two measured points a calibrated roof draws a straight line in log(size) against log(time):
    halfway (in log) between 1 kB in 2 us and 100 kB in 8 us is 10 kB in sqrt(2 x 8) = 4 us, a quarter of
    the way is 10^3.5 B in 2 x 4^(1/4) us; the matmul rate likewise between 1 and 100 rows."""
    roof = rl.CalibratedRoof("toy", 1e12, (1e3, 1e5), (2e-6, 8e-6), {"bf16": (1.0, 100.0)}, {"bf16": (1e12, 4e14)},
                             {"graph": 0.0})
    assert roof.memory_seconds(1e4) == pytest.approx(4e-6, rel=1e-12)
    assert roof.memory_seconds(10**3.5) == pytest.approx(2e-6 * 4**0.25, rel=1e-12)
    assert roof.matmul_flops_per_s(10.0) == pytest.approx(2e13, rel=1e-12)  # sqrt(1e12 x 4e14)


def test_a_curve_is_loglog_through_its_points_flat_beyond_them_and_checked():
    c = Curve((1.0, 100.0), (1.0, 100.0))
    assert c(10.0) == pytest.approx(10.0)
    assert c(0.01) == pytest.approx(1.0) and c(1e6) == pytest.approx(100.0)  # held flat past both ends
    assert list(c(np.array([1.0, 10.0, 100.0]))) == pytest.approx([1.0, 10.0, 100.0])
    assert loglog(10.0, (1.0, 100.0), (4.0, 16.0)) == pytest.approx(8.0)  # halfway in log: sqrt(4 x 16)
    assert c.top == 100.0 and c.capped(50.0).ys == (1.0, 50.0) and c.scaled(2.0).ys == (2.0, 200.0)
    assert Curve.flat(3.0)(1e9) == pytest.approx(3.0)
    with pytest.raises(ValueError, match="increasing"):
        Curve((2.0, 1.0), (1.0, 1.0))
    with pytest.raises(ValueError, match="as many ys as xs"):
        Curve((1.0, 2.0), (1.0,))
    with pytest.raises(ValueError, match="positive"):
        Curve((0.0, 1.0), (1.0, 1.0))
