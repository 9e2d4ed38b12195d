import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    """Every figure a test draws is closed after it, so that a long run does not hold hundreds open."""
    yield
    plt.close("all")
