"""Per-node window statistics: agreement with numpy/scipy, event-time expiry, replacement, snapshots."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core.events import NormalizedTask
from streams.core.windows import NodeWindows

MIN = 60_000_000
HOUR = 60 * MIN


def sample(task: str, node: str, ts: int, z: float, job: str = "j") -> NormalizedTask:
    return NormalizedTask(job, task, 0, node, ts, 1, z)


samples_strategy = st.lists(
    st.tuples(st.integers(0, 5), st.integers(0, 2 * HOUR), st.floats(-5, 5, allow_nan=False)),
    min_size=1, max_size=80,
)


@settings(max_examples=80, deadline=None)
@given(samples_strategy, st.integers(0, 3 * HOUR))
def test_window_statistics_agree_with_numpy_and_scipy(ref, rows, now) -> None:
    windows = NodeWindows(window_size_us=HOUR, step_us=5 * MIN)
    for i, (node, ts, z) in enumerate(rows):
        windows.update(sample(f"t{i}", f"n{node}", ts, z))
    start, end = windows.advance(now)
    assert end == now - now % (5 * MIN) and start == end - HOUR
    inside: dict[str, list[float]] = defaultdict(list)
    for node, ts, z in rows:
        if start <= ts < end:
            inside[f"n{node}"].append(z)
    got = windows.stats()
    expected = ref.node_stats(inside)
    assert set(got) == set(expected)
    mean_count = sum(len(v) for v in inside.values()) / len(inside) if inside else 0
    for node, (n, mean, std, low, high) in expected.items():
        s = got[node]
        assert s.n == n
        assert s.mean == pytest.approx(mean, abs=1e-9) and s.std == pytest.approx(std, abs=1e-9)
        if low is None:
            assert s.ci_low is None and s.ci_high is None
        else:
            assert s.ci_low == pytest.approx(low, abs=1e-9) and s.ci_high == pytest.approx(high, abs=1e-9)
        assert s.n / windows.mean_count == pytest.approx(n / mean_count)


def test_samples_expire_by_event_time_not_by_arrival() -> None:
    windows = NodeWindows(window_size_us=HOUR, step_us=5 * MIN)
    windows.update(sample("old", "n1", 10 * MIN, 1.0))
    windows.update(sample("new", "n1", 50 * MIN, 3.0))
    windows.advance(60 * MIN)
    assert windows.stats()["n1"].n == 2
    windows.advance(70 * MIN + 1)  # window [10 min, 70 min): "old" at 10 min is still in
    assert windows.stats()["n1"].n == 2
    windows.advance(75 * MIN)  # window [15 min, 75 min)
    assert windows.stats()["n1"].mean == 3.0
    windows.advance(110 * MIN)  # window [50 min, 110 min): "new" at 50 min is the last one in
    assert windows.stats()["n1"].n == 1
    windows.advance(115 * MIN)
    assert windows.stats() == {}
    assert windows.stored_samples == 0


def test_samples_at_or_after_the_window_end_wait_for_their_window() -> None:
    windows = NodeWindows(window_size_us=HOUR, step_us=5 * MIN)
    windows.advance(60 * MIN)
    windows.update(sample("now", "n1", 60 * MIN, 1.0))  # the window is [0, 60 min): not yet
    assert windows.stats() == {}
    windows.advance(65 * MIN)
    assert windows.stats()["n1"].n == 1


def test_a_sample_older_than_the_window_is_late_and_dropped() -> None:
    windows = NodeWindows(window_size_us=HOUR, step_us=5 * MIN)
    windows.advance(2 * HOUR)
    windows.update(sample("stale", "n1", HOUR - 1, 1.0))
    assert windows.late_samples == 1 and windows.stats() == {}


def test_the_window_never_moves_back() -> None:
    windows = NodeWindows(window_size_us=HOUR, step_us=5 * MIN)
    assert windows.advance(2 * HOUR) == (HOUR, 2 * HOUR)
    assert windows.advance(HOUR) == (HOUR, 2 * HOUR)


def test_a_later_sample_of_the_same_task_replaces_the_earlier_one() -> None:
    windows = NodeWindows(window_size_us=HOUR, step_us=5 * MIN)
    windows.update(NormalizedTask("j", "t", 0, "n1", MIN, 1, 0.9, provisional=True))
    windows.update(sample("u", "n1", MIN, 0.1))
    windows.update(NormalizedTask("j", "t", 0, "n1", MIN, 1, 0.5))  # the final value
    windows.update(NormalizedTask("j", "t", 0, "n1", MIN, 1, 0.5))  # and a redelivery of it
    windows.advance(HOUR)
    s = windows.stats()["n1"]
    assert s.n == 2 and s.mean == pytest.approx(0.3)


def test_normalized_count_is_the_task_count_against_the_average_node() -> None:
    windows = NodeWindows(window_size_us=HOUR, step_us=5 * MIN)
    for i in range(6):
        windows.update(sample(f"a{i}", "busy", MIN, 0.0))
    for i in range(2):
        windows.update(sample(f"b{i}", "idle", MIN, 0.0))
    windows.advance(HOUR)
    got = {node: s.n / windows.mean_count for node, s in windows.stats().items()}
    assert got == {"busy": 1.5, "idle": 0.5}


def test_snapshot_restore_gives_the_same_statistics_now_and_later() -> None:
    windows = NodeWindows(window_size_us=HOUR, step_us=5 * MIN)
    for i in range(40):
        windows.update(sample(f"t{i}", f"n{i % 4}", i * 3 * MIN, (i % 7) / 3))
    windows.advance(70 * MIN)
    copy = NodeWindows(window_size_us=HOUR, step_us=5 * MIN)
    copy.restore(json.loads(json.dumps(windows.snapshot())))
    assert copy.stats() == windows.stats()
    for w in (windows, copy):
        w.update(sample("late-ish", "n9", 71 * MIN, 2.0))
        w.advance(100 * MIN)
    assert copy.stats() == windows.stats()
    with pytest.raises(ValueError, match="version"):
        copy.restore({"version": 99})
