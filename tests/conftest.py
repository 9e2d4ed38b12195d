import matplotlib

# Tests draw figures without a display. (Not through MPLBACKEND: nbval's kernels inherit the
# environment, and the notebooks must keep their inline backend to show their figures.)
matplotlib.use("Agg")

import pytest

import roofline as rl


@pytest.fixture(scope="session")
def llama():
    return rl.load_model("llama-3-8b")


@pytest.fixture(scope="session")
def h100():
    return rl.get_hardware("h100-sxm")
