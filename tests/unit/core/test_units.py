"""Display conversions of fmt and Quantity (chapters 1 to 6): a fraction in percent, bytes in binary units."""

import pytest

from roofline.core.units import Quantity, fmt


def test_convert_shows_a_fraction_in_percent_and_bytes_in_binary_units():
    assert fmt(0.25, "%", convert=True) == "25.0%"
    assert fmt(0.123456, "%", 3, convert=True) == "12.3%"
    assert fmt(228 * 1024, "KiB", fixed=0, convert=True) == "228 KiB"  # an H100 SM's shared memory
    assert fmt(50 * 2**20, "MiB", fixed=0, convert=True) == "50 MiB"
    assert fmt(80 * 2**30, "GiB", 3, convert=True) == "80.0 GiB"
    # without convert the value is shown as given, as before
    assert fmt(25.0, "%") == "25.0%"
    assert repr(Quantity(0.5, "%", 2, convert=True)) == "50%"


def test_convert_refuses_a_unit_it_cannot_convert_to():
    with pytest.raises(ValueError, match="convert=True needs a unit of '%', 'KiB', 'MiB', 'GiB'"):
        fmt(1.0, "B", convert=True)
    with pytest.raises(ValueError, match="convert=True needs a unit"):
        Quantity(1.0, "", convert=True)


def test_per_shows_a_count_in_the_scale_the_prose_names():
    assert fmt(8.03e9, per="billion") == "8.03"  # Llama 3 8B: "8.03 billion parameters"
    assert fmt(405.9e9, per="billion", fixed=0) == "406"
    assert fmt(14.8e12, per="trillion", fixed=1) == "14.8"  # DeepSeek-V3's training tokens
    assert fmt(16 * 2**20, per="Mi", fixed=0) == "16"  # Llama 3's 16M-token batches are 2^24 tokens
    assert fmt(3.4e24, per="1e24", digits=3) == "3.40"
    assert repr(Quantity(100e9, per="billion", fixed=0, suffix="B")) == "100B"
    # a count past a scale's prefix range still reads (no prefix is added to a bare count)
    assert fmt(2.5e6, per="thousand", fixed=0) == "2,500"


def test_per_refuses_an_unknown_scale_and_a_second_conversion():
    with pytest.raises(ValueError, match="per must be one of 'thousand', 'million', 'billion'"):
        fmt(1e9, per="billions")
    with pytest.raises(ValueError, match="does not combine with convert or a prefix"):
        fmt(0.5, "%", convert=True, per="million")
    with pytest.raises(ValueError, match="per must be one of"):
        Quantity(1.0, per="lots")
