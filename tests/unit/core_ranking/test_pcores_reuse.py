"""The P-Cores detector reuses last period's evidence only where a fresh detector would say the same."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from streams.core.detection.base import WindowView
from streams.core.detection.pcores import PCoresDetector
from streams.core.windows import NodeStats, summarize

# Per period, per node: its z-values (few: some nodes below min_tasks or without an interval; small integers:
# ties, equal and touching intervals) and whether its statistics are a new object though the values may repeat.
values = st.lists(st.integers(-3, 3).map(float), min_size=1, max_size=7)
periods = st.lists(st.dictionaries(st.sampled_from([f"n{i:02d}" for i in range(20)]),
                                   st.tuples(values, st.booleans()), max_size=20), min_size=1, max_size=6)


@settings(max_examples=200, deadline=None)
@given(periods, st.sampled_from([None, 0.25]))
# A node whose level moves under the same statistics while the depth and edges stay (hi drops below mid).
@example([{"hi": ([5.0] * 4, False), "mid": ([2.0] * 4, False), "lo": ([0.0] * 4, False), "lower": ([-2.0] * 4, False)},
          {"hi": ([1.0] * 4, True), "mid": ([2.0] * 4, False), "lo": ([0.0] * 4, False), "lower": ([-2.0] * 4, False)}],
         0.25)
def test_evidence_across_periods_equals_a_fresh_detectors(spec: list[dict], floor: float | None) -> None:
    carried = PCoresDetector(min_tasks=3, significance_floor=floor)
    stats: dict[str, NodeStats] = {}
    for period, nodes in enumerate(spec):
        stats = {n: s for n, s in stats.items() if n in nodes}
        for node, (zs, renew) in nodes.items():
            if renew or node not in stats:
                stats[node] = summarize(node, zs)
        view = WindowView(period * 10, period * 10 + 100, dict(stats))
        evidence = carried.detect(view)
        fresh = PCoresDetector(min_tasks=3, significance_floor=floor).detect(view)
        assert evidence == fresh
        assert list(evidence) == list(stats)


def test_a_node_whose_level_moved_under_the_same_statistics_is_judged_again() -> None:
    # Point intervals: hi 5 > mid 2 > lo 0 > lower -2, levels 0-3. Then hi drops to 1: mid, with the very same
    # statistics, rises to level 0 while the depth (4) and the edges stay, and becomes the suspect.
    stats = {node: summarize(node, [z] * 4) for node, z in (("hi", 5.0), ("mid", 2.0), ("lo", 0.0), ("lower", -2.0))}
    detector = PCoresDetector(min_tasks=3)
    first = detector.detect(WindowView(0, 100, dict(stats)))
    assert (first["mid"].level, first["mid"].suspect) == (1, False)
    stats["hi"] = summarize("hi", [1.0] * 4)
    second = detector.detect(WindowView(10, 110, dict(stats)))
    assert (second["mid"].level, second["mid"].suspect, second["hi"].level) == (0, True, 1)
    assert second == PCoresDetector(min_tasks=3).detect(WindowView(10, 110, dict(stats)))


def test_new_statistics_where_freed_ones_lived_are_judged_afresh() -> None:
    # The window holds its statistics for one period only: "a"'s are freed and its next ones (another mean, the
    # same level 0) may be allocated where they were. The detector must not take them for the old ones.
    detector = PCoresDetector(min_tasks=3, significance_floor=None)
    stats = {"a": NodeStats("a", 4, 1.0, 0.1, 0.9, 1.1), "b": NodeStats("b", 4, 0.0, 0.1, -0.1, 0.1)}
    first = detector.detect(WindowView(0, 100, stats))
    freed = id(stats["a"])
    del stats["a"]
    candidates = [NodeStats("a", 4, 2.0 + i, 0.1, 1.9 + i, 2.1 + i) for i in range(200)]
    # CPython reuses a freed block for the next object of its size: where "a"'s old statistics lived, if nothing
    # holds them any more.
    stats["a"] = next((s for s in candidates if id(s) == freed), candidates[0])
    second = detector.detect(WindowView(10, 110, stats))
    assert second == PCoresDetector(min_tasks=3, significance_floor=None).detect(WindowView(10, 110, stats))
    assert (first["a"].level, second["a"].level) == (0, 0)
    assert second["a"].score == stats["a"].ci_low != first["a"].score
