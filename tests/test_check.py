"""Argument checks and number formatting."""

import math

import numpy as np

import roofline as rl
import pytest

from roofline._check import UnknownNameError, number, unknown_name
from roofline.units import Quantity, dtype_bytes, fmt


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
    from roofline._check import close_matches

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
