"""Nurd's calibration arithmetic (SPEC 4) on a hand-made example, and its invariants."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.core.prediction.nurd.calibration import (
    calibration_delta,
    centroid,
    delta_at_first_prediction,
    minmax_scale,
    rho,
    weight,
)

# Two finished and two running tasks, two features. By hand: min-max over all four rows scales
# column 0 by (x - 0) / 4 and column 1 by (x - 0) / 6, so the scaled rows are
# finished (0.5, 0), (1, 1/3) and running (0, 2/3), (0.5, 1); c_fin = (0.75, 1/6), c_run = (0.25, 5/6);
# ||c_fin||² = 0.5625 + 1/36 = 21.25/36, ||c_run - c_fin||² = 0.25 + 4/9 = 25/36, rho = 21.25/25 = 0.85;
# delta(alpha=0.5) = 1/1.85 - 0.5 = 0.0405405...; delta(alpha=0) = 0.5405405...
FINISHED = [{"a": 2.0, "b": 0.0}, {"a": 4.0, "b": 2.0}]
RUNNING = [{"a": 0.0, "b": 4.0}, {"a": 2.0, "b": 6.0}]


def test_rho_and_delta_match_the_hand_computation() -> None:
    value, delta = delta_at_first_prediction(FINISHED, RUNNING, alpha=0.5)
    assert value == pytest.approx(0.85)
    assert delta == pytest.approx(1 / 1.85 - 0.5)
    assert delta == pytest.approx(0.0405405, abs=1e-6)
    assert delta_at_first_prediction(FINISHED, RUNNING, alpha=0.0)[1] == pytest.approx(0.5405405, abs=1e-6)


def test_scaled_centroids_match_the_hand_computation() -> None:
    scaled = minmax_scale([[2, 0], [4, 2], [0, 4], [2, 6]])
    expected = [[0.5, 0], [1, 1 / 3], [0, 2 / 3], [0.5, 1]]
    assert [value for row in scaled for value in row] == pytest.approx([v for row in expected for v in row])
    assert centroid(scaled[:2]) == pytest.approx([0.75, 1 / 6])
    assert centroid(scaled[2:]) == pytest.approx([0.25, 5 / 6])


@pytest.mark.parametrize(
    ("z", "delta", "expected"),
    [
        (0.3, 0.0405405, 0.3405405),  # inside: z + delta
        (0.99, 0.0405405, 1.0),  # capped at 1
        (0.2, -0.4, 0.05),  # floored at epsilon
        (0.6, -0.4, 0.2),
    ],
)
def test_weight_is_z_plus_delta_clipped_to_epsilon_and_one(z: float, delta: float, expected: float) -> None:
    assert weight(z, delta, epsilon=0.05) == pytest.approx(expected)


def test_adjusted_prediction_grows_as_the_weight_falls() -> None:
    y_hat = 100.0
    assert y_hat / weight(0.2, -0.4, 0.05) == pytest.approx(2000.0)
    assert y_hat / weight(0.99, 0.04, 0.05) == pytest.approx(100.0)


def test_coinciding_centroids_make_rho_infinite_and_delta_minus_alpha() -> None:
    assert math.isinf(rho([[1.0, 1.0]], [[1.0, 1.0]]))
    assert calibration_delta(math.inf, alpha=0.5) == -0.5


@given(
    st.floats(0, 1),
    st.floats(-1, 1),
    st.floats(0.001, 1),
)
def test_weight_stays_between_epsilon_and_one(z: float, delta: float, epsilon: float) -> None:
    assert epsilon <= weight(z, delta, epsilon) <= 1.0


vectors = st.lists(st.lists(st.floats(-100, 100), min_size=3, max_size=3), min_size=1, max_size=6)


@given(vectors, vectors)
def test_pooled_z_scores_would_make_rho_a_constant(finished: list[list[float]], running: list[list[float]]) -> None:
    # Why the calibration scales by min-max, not z-scores: centring at the pooled mean puts
    # n_fin c_fin + n_run c_run at the origin, so rho = (n_run / n)² whatever the data.
    rows = finished + running
    means = [sum(c) / len(rows) for c in zip(*rows, strict=True)]
    centred = [[v - m for v, m in zip(r, means, strict=True)] for r in rows]
    c_fin, c_run = centroid(centred[: len(finished)]), centroid(centred[len(finished) :])
    if sum((a - b) ** 2 for a, b in zip(c_fin, c_run, strict=True)) < 1e-6:
        return  # identical centroids: rho undefined either way
    expected = (len(running) / len(rows)) ** 2
    assert rho(centred[: len(finished)], centred[len(finished) :]) == pytest.approx(expected, rel=1e-6, abs=1e-9)
