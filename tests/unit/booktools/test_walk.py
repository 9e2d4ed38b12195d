"""booktools/walk.py: a request walks down the floors, entering the package at its model's floor, and never
through measured/ (the floor where the model is checked against measurements)."""

import pytest

from booktools.walk import floor, walk


@pytest.mark.parametrize("argv, entry", [
    (["serve", "llama-3.1-70b", "--gpu", "h100", "--input", "2048", "--output", "256", "--weights-dtype", "fp8",
      "--tp", "4"], ("serving_pair", "serving.deployment")),
    (["train", "llama-3-70b", "--gpu", "h100", "--nodes", "8", "--tp", "8", "--pp", "4", "--seq", "8192",
      "--global-batch", "512", "--roof", "calibrated"], ("estimate_step", "parallel.cluster")),
])
def test_a_request_goes_down_from_its_models_floor(argv, entry):
    descents, climbs, measured, output = walk(argv)
    assert climbs == 0 and measured == 0
    name, room = entry
    assert (name, room) in [(n, rooms[0]) for n, rooms in descents]
    assert "estimate" in output  # the calibrated estimate was printed


def test_floors_are_the_layering_tests():
    assert [floor(f"roofline.{f}.x") for f in ("core", "workloads", "parallel", "serving", "measured", "present",
                                                "cli")] == [1, 2, 3, 4, 5, 6, 7]
    assert floor("numpy.core") is None and floor("roofline") is None
