"""P-Cores levels: the invariants of the issue and equality with a literal Algorithm 3."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core.pcores import has_edges, pcores_levels


def edge(intervals: dict[str, tuple[float, float]], a: str, b: str) -> bool:
    (al, ah), (bl, bh) = intervals[a], intervals[b]
    return a != b and ah <= bl and not (al == ah == bl == bh)


# Small integer grids make ties, touching bounds and zero-width intervals common; the infinities too (a
# zero-width interval at -inf was once taken for a wide one and stopped the peeling).
grid = st.sampled_from([-math.inf, math.inf]) | st.integers(-6, 6).map(float)
bounds = st.tuples(grid, grid).map(lambda t: (min(t), max(t))) | st.tuples(st.integers(-6, 6), st.integers(0, 4)).map(
    lambda t: (float(t[0]), float(t[0] + t[1])))
interval_sets = st.dictionaries(st.text("abcdefgh", min_size=1, max_size=3), bounds, max_size=30)


@settings(max_examples=300, deadline=None)
@given(interval_sets)
def test_levels_equal_the_literal_peeling_of_algorithm_3(ref, intervals) -> None:
    assert pcores_levels(intervals) == ref.levels(intervals)


@settings(max_examples=300, deadline=None)
@given(interval_sets)
def test_levels_partition_the_nodes_and_each_level_points_to_the_one_below(intervals) -> None:
    levels = pcores_levels(intervals)
    assert set(levels) == set(intervals)  # every node has exactly one level
    top = max(levels.values(), default=-1)
    assert set(levels.values()) == set(range(top + 1))  # no level is skipped
    for node, level in levels.items():
        below = [other for other in intervals if edge(intervals, node, other)]
        if level == 0:
            assert below == []  # nothing is clearly slower than a level-0 node
        else:
            assert any(levels[other] == level - 1 for other in below)
            assert all(levels[other] < level for other in below)


@settings(max_examples=100, deadline=None)
@given(interval_sets)
def test_the_same_input_in_another_order_gives_the_same_levels(intervals) -> None:
    reordered = dict(reversed(list(intervals.items())))
    assert pcores_levels(reordered) == pcores_levels(intervals)


def test_all_overlapping_intervals_put_every_node_on_level_0_with_no_edge() -> None:
    levels = pcores_levels({"a": (0.0, 1.0), "b": (0.5, 1.5), "c": (0.9, 2.0)})
    assert levels == {"a": 0, "b": 0, "c": 0}
    assert not has_edges(levels)


def test_touching_intervals_make_an_edge_as_in_the_spec() -> None:
    # SPEC 3: m1 -> m2 when m1.ci_high <= m2.ci_low.
    assert pcores_levels({"fast": (0.0, 1.0), "slow": (1.0, 2.0)}) == {"fast": 1, "slow": 0}


def test_identical_point_intervals_do_not_form_a_cycle() -> None:
    assert pcores_levels({"a": (1.0, 1.0), "b": (1.0, 1.0), "c": (0.0, 1.0)}) == {"a": 0, "b": 0, "c": 1}


def test_zero_width_intervals_at_minus_infinity_are_ranked() -> None:
    inf = math.inf
    assert pcores_levels({"a": (-inf, -inf)}) == {"a": 0}
    assert pcores_levels({"a": (-inf, -inf), "b": (0.0, 1.0)}) == {"a": 1, "b": 0}
    assert pcores_levels({"a": (-inf, -inf), "b": (-inf, -inf), "c": (inf, inf)}) == {"a": 1, "b": 1, "c": 0}


def test_an_unordered_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="not ordered"):
        pcores_levels({"a": (2.0, 1.0)})


# Hundreds of nodes on a fine grid: deep level structures, where the prefixes of the numpy peeling matter.
many_intervals = st.dictionaries(st.text("abcdefghij", min_size=1, max_size=4),
                                 st.tuples(st.integers(-40, 40), st.integers(0, 6)).map(
                                     lambda t: (t[0] / 4, (t[0] + t[1]) / 4)), min_size=50, max_size=400)


@settings(max_examples=60, deadline=None)
@given(many_intervals)
def test_levels_of_hundreds_of_nodes_equal_the_literal_peeling(ref, intervals) -> None:
    levels = pcores_levels(intervals)
    assert levels == ref.levels(intervals)
