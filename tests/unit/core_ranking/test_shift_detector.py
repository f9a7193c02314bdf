"""The shift detector: finds a node that became slow, keeps it while it is slow, lets it go once it recovered,
suspects no healthy node, and survives a snapshot."""

from __future__ import annotations

import random

from streams.core.detection.base import WindowView
from streams.core.detection.shift import Scale, ShiftDetector
from streams.core.events import NormalizedTask

MIN = 60_000_000
PERIOD = 5 * MIN


def detector() -> ShiftDetector:
    return ShiftDetector((Scale(20 * MIN, 0.75, 0.975, 8), Scale(60 * MIN, 0.25, 0.999, 5)), persistence=2,
                         recovery_ratio=0.35, resolution=4.0, cusum=(0.3, 20.0))


def feed(det: ShiftDetector, minutes: range, shift: dict[str, float], rng: random.Random,
         nodes: int = 20) -> list[dict]:
    """One sample per node per minute, skewed like job-normalised durations; evidence every period."""
    out = []
    for minute in minutes:
        for i in range(nodes):
            node = f"n{i:02d}"
            z = rng.lognormvariate(0, 0.5) - 1.13 + shift.get(node, 0.0)
            det.learn(NormalizedTask(f"j{minute}", node, 0, node, minute * MIN + i, 1, z))
        if (minute + 1) % 5 == 0:
            out.append(dict(det.detect(WindowView((minute + 1) * MIN - 60 * MIN, (minute + 1) * MIN, {}))))
    return out


def test_a_node_that_turns_slow_is_found_and_no_healthy_node_is() -> None:
    det, rng = detector(), random.Random(1)
    before = feed(det, range(0, 120), {}, rng)
    after = feed(det, range(120, 180), {"n03": 1.4}, rng)  # about 2x slow from minute 120
    assert not any(e.suspect for period in before + after for n, e in period.items() if n != "n03")
    first = next(k for k, period in enumerate(after) if period["n03"].suspect)
    assert first <= 6  # within half an hour of the change
    assert all(period["n03"].suspect or period["n03"].still_slow for period in after[first:])


def test_a_recovered_node_is_let_go_and_a_still_slow_one_is_kept() -> None:
    det, rng = detector(), random.Random(2)
    feed(det, range(0, 60), {}, rng)
    feed(det, range(60, 150), {"n01": 1.4, "n02": 0.9}, rng)
    after = feed(det, range(150, 210), {"n02": 0.9}, rng)  # n01 recovers at minute 150, n02 stays slow
    released = next(k for k, period in enumerate(after) if not period["n01"].still_slow)
    assert released <= 5 and "recovered" in after[released]["n01"].reason
    assert all(period["n02"].still_slow for period in after)


def test_snapshot_and_restore_continue_identically() -> None:
    det, rng = detector(), random.Random(3)
    feed(det, range(0, 90), {"n05": 1.0}, rng)
    twin = detector()
    twin.restore(det.snapshot())
    rest = [(m, i, random.Random(m * 100 + i).gauss(0, 1)) for m in range(90, 120) for i in range(20)]
    outputs = []
    for d in (det, twin):
        for m, i, z in rest:
            d.learn(NormalizedTask(f"j{m}", f"n{i:02d}", 0, f"n{i:02d}", m * MIN + i, 1, z))
        outputs.append(d.detect(WindowView(60 * MIN, 120 * MIN, {})))
    assert outputs[0] == outputs[1]
