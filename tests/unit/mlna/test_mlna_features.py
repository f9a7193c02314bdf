"""ML-NA's cumulative features against a hand-computed example (SPEC 6, paper section III-A)."""

from __future__ import annotations

import math

import pytest

from streams.core.detection.mlna.features import MISSING, PeriodBuilder

# Three sub-periods of 10 us from t=100. a: z 1, 3 in the first, -1 in the third; b: 0, 2 in the second,
# 2 in the third; c: one task in the third only.
SAMPLES = [("a", 101, 1.0), ("a", 105, 3.0), ("b", 111, 0.0), ("b", 119, 2.0),
           ("a", 120, -1.0), ("b", 125, 2.0), ("c", 129, 5.0)]  # fmt: skip


@pytest.fixture
def table():
    builder = PeriodBuilder(start_us=100, sub_period_us=10, sub_periods=3)
    for node, ts, z in SAMPLES:
        assert builder.add(node, ts, z)
    return builder.table()


def test_each_sub_period_cumulates_from_the_first(table):
    # Worked by hand: sub-period 1 sees a's (1, 3); 2 sees a's (1, 3) and b's (0, 2); 3 sees everything.
    # Mean counts of all three nodes: (2 + 0 + 0) / 3, (2 + 2 + 0) / 3, (3 + 3 + 1) / 3.
    expected_a = [2.0, 1.0, 2 / (2 / 3),  2.0, 1.0, 2 / (4 / 3),  1.0, math.sqrt(8 / 3), 3 / (7 / 3)]
    expected_b = [*MISSING,  1.0, 1.0, 2 / (4 / 3),  4 / 3, math.sqrt(8 / 9), 3 / (7 / 3)]
    expected_c = [*MISSING, *MISSING, 5.0, 0.0, 1 / (7 / 3)]
    assert table.nodes == ("a", "b", "c")
    assert table.row("a") == pytest.approx(expected_a)
    assert table.row("b") == pytest.approx(expected_b)
    assert table.row("c") == pytest.approx(expected_c)
    assert table.counts == (3, 3, 1)


def test_no_task_yet_is_an_explicit_marker_not_nan(table):
    for row in table.values:
        assert all(math.isfinite(v) for v in row)
    assert table.row("b")[:3] == [0.0, 0.0, 0.0]


def test_a_period_whose_first_sub_periods_are_empty_marks_every_node():
    # The paper's seventh month: no task at all in the first days.
    builder = PeriodBuilder(start_us=0, sub_period_us=10, sub_periods=3)
    builder.add("a", 25, 1.0)
    builder.add("b", 26, -1.0)
    table = builder.table()
    assert [list(row[:6]) for row in table.values] == [[*MISSING, *MISSING]] * 2
    assert table.row("a")[6:] == [1.0, 0.0, 1.0]


def test_samples_outside_the_period_or_not_finite_are_refused():
    builder = PeriodBuilder(start_us=100, sub_period_us=10, sub_periods=2)
    assert not builder.add("a", 99, 1.0)
    assert not builder.add("a", 120, 1.0)
    assert not builder.add("a", 105, math.nan)
    assert builder.table().nodes == ()


def test_daily_means_read_the_mean_of_each_sub_period(table):
    assert table.daily_means(table.row("a")) == pytest.approx([2.0, 2.0, 1.0])
