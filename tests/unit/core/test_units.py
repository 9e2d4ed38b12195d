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
