"""The windows' statistics over columns (``GroupColumns``) are bit for bit ``from_moments(combine(...))`` of each
node's groups, through redelivered summaries, withdrawals, single samples, expiry and the columns' compaction."""

from __future__ import annotations

import random

from streams.core.events import NodeMoments, NodeSummary, NormalizedTask
from streams.core.moments import moments_of
from streams.core.windows import NodeStats, NodeWindows, combine, from_moments

MIN = 60_000_000
HOUR = 60 * MIN


def expected(windows: NodeWindows) -> dict[str, NodeStats]:
    """Each node's statistics from its stored groups, one node at a time (the loop the columns replaced)."""
    assert windows.window is not None
    start, end = windows.window
    state = windows.snapshot()
    groups: dict[str, list[tuple[int, float, float]]] = {}
    for bucket, node, _key, signed in state["cells"]:
        if start <= bucket < end:
            groups.setdefault(node, []).extend((n, mean, m2) for n, mean, m2 in signed)
    stats = {node: from_moments(node, combine(g)) for node, g in groups.items()}
    return {node: s for node, s in stats.items() if s.n > 0}


def summary(rng: random.Random, boundary: int, nodes: int) -> NodeSummary:
    def moments(sign_ok: bool) -> tuple[NodeMoments, ...]:
        rows = []
        for _ in range(rng.randint(0, 12)):
            values = [rng.gauss(0.0, 1.5) for _ in range(rng.randint(1, 4))]
            bucket = boundary - 5 * MIN * rng.randint(1, 14)  # some already older than the window: late
            rows.append(NodeMoments(f"n{rng.randrange(nodes)}", bucket, *moments_of(values)))
        return tuple(rows) if sign_ok else ()
    return NodeSummary(rng.randrange(2), 2, boundary, 5 * MIN, moments(True), moments(rng.random() < 0.4))


def test_statistics_over_columns_equal_the_per_node_combination_bit_for_bit() -> None:
    rng = random.Random(2026)
    windows = NodeWindows(window_size_us=HOUR, step_us=5 * MIN)
    sent: list[NodeSummary] = []
    for step in range(1, 400):
        boundary = step * 5 * MIN
        for _ in range(rng.randint(1, 3)):
            s = summary(rng, boundary, nodes=40)
            sent.append(s)
            windows.merge(s)
        if sent and rng.random() < 0.3:  # a redelivery, or another summary of an earlier key: replaces it
            old = rng.choice(sent[-20:])
            windows.merge(summary(rng, old.boundary_us, 40) if rng.random() < 0.5 else old)
            windows.merge(NodeSummary(old.partition, 2, old.boundary_us, 5 * MIN, old.added, old.removed))
        for i in range(rng.randint(0, 3)):  # single samples too, some of them replaced
            windows.update(NormalizedTask("j", f"t{rng.randrange(50)}", 0, f"n{rng.randrange(40)}",
                                          boundary - rng.randrange(HOUR), 1, rng.gauss(0.0, 1.0) + i))
        windows.advance(boundary)
        got = windows.stats()
        want = expected(windows)
        assert {node: repr(s) for node, s in got.items()} == {node: repr(s) for node, s in want.items()}
        assert windows.mean_count == (sum(s.n for s in want.values()) / len(want) if want else 0.0)


def test_restored_windows_compute_the_same_statistics_as_the_saved_ones() -> None:
    rng = random.Random(7)
    windows = NodeWindows(window_size_us=HOUR, step_us=5 * MIN)
    for step in range(1, 30):
        windows.merge(summary(rng, step * 5 * MIN, nodes=10))
        windows.advance(step * 5 * MIN)
        windows.stats()
    restored = NodeWindows(window_size_us=HOUR, step_us=5 * MIN)
    restored.restore(windows.snapshot())
    for step in range(30, 60):
        s = summary(rng, step * 5 * MIN, nodes=10)
        for w in (windows, restored):
            w.merge(s)
            w.advance(step * 5 * MIN)
        assert {node: repr(x) for node, x in restored.stats().items()} == {
            node: repr(x) for node, x in windows.stats().items()}


def test_a_node_withdrawn_to_nothing_is_left_out_whatever_its_values_and_the_window_goes_on() -> None:
    """A summary withdrawn whole (its node at n = 0) whose values are absurd, as a corrupt feed record's may be: the
    node is left out without its values being summed (fsum raised on them here once), and later merges work."""
    windows = NodeWindows(HOUR, 5 * MIN)
    absurd = (NodeMoments("n1", 0, 1, 1e200, 0.0), NodeMoments("n1", MIN, 1, -1e200, 0.0),
              NodeMoments("n1", 2 * MIN, 1, 1e200, 0.0))
    windows.merge(NodeSummary(0, 2, 5 * MIN, 5 * MIN, absurd, ()))
    windows.merge(NodeSummary(1, 2, 5 * MIN, 5 * MIN, (NodeMoments("n2", 0, 1, 0.5, 0.0),), absurd))
    windows.advance(5 * MIN)
    assert set(windows.stats()) == {"n2"}
    windows.merge(NodeSummary(0, 2, 10 * MIN, 5 * MIN, (NodeMoments("n3", 5 * MIN, 1, 0.25, 0.0),), ()))
    windows.advance(10 * MIN)
    assert set(windows.stats()) == {"n2", "n3"}
