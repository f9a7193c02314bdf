"""The running detector's floor in duration terms (issue 21, h58): a node's tasks must run at least ``min_ratio`` times
their job siblings' durations, whatever the jobs' spread of task times; an effect in job standard deviations is large
for a slightly slower node when a job's tasks are alike."""

from __future__ import annotations

import math
import random

import pytest

from streams.core.detection.base import WindowView
from streams.core.detection.registry import DETECTORS, RUNNING_MIN_RATIO
from streams.core.detection.running import RunningTaskDetector
from streams.core.detection.scales import Scale, Tally
from streams.core.events import Status, TaskFinish, TaskStart
from streams.core.ranking_config import RankingConfig

MIN = 60_000_000


def feed(det: RunningTaskDetector, sigma: float, slow: dict[str, float], minutes: int = 90, seed: int = 1) -> dict:
    """20 nodes, one task of about 3 minutes a minute each (job j<m // 3>, log-normal spread ``sigma``); the nodes in
    ``slow`` run that many times longer from the start. Judged every 5 minutes; returns the last evidence."""
    rng, evidence = random.Random(seed), {}
    for minute in range(minutes):
        for k in range(20):
            node, job, start = f"n{k}", f"j{minute // 3}", minute * MIN + k
            det.observe(TaskStart(job, f"{minute}-{k}", 0, node, start))
            duration = round(rng.lognormvariate(0, sigma) * 3 * MIN * slow.get(node, 1.0))
            det.observe(TaskFinish(job, f"{minute}-{k}", 0, node, start + duration, duration, Status.SUCCEEDED))
        if (minute + 1) % 5 == 0:
            evidence = dict(det.detect(WindowView(0, (minute + 1) * MIN, {})))
    return evidence


def detector(min_ratio: float) -> RunningTaskDetector:
    return RunningTaskDetector((Scale(30 * MIN),), z_list=4.0, min_ratio=min_ratio)


def test_a_slightly_slower_node_among_alike_tasks_is_listed_only_without_a_ratio_floor() -> None:
    # At a spread of 0.05 a 1.1x node runs ~1.9 job std behind: far past the 0.3 effect floor and z 4.
    slow = {"n0": 1.1, "n1": 1.5}
    without = feed(detector(1.0), 0.05, slow)
    assert without["n0"].suspect and without["n1"].suspect
    floored = feed(detector(1.2), 0.05, slow)
    assert not floored["n0"].suspect
    assert floored["n1"].suspect
    ratio = float(floored["n1"].reason.split("x their durations")[0].rsplit(" ", 1)[1])
    assert 1.35 <= ratio <= 1.6  # the evidence line says how much longer, and the floor
    assert ">= 1.2x" in floored["n1"].reason
    assert not any(e.suspect for node, e in floored.items() if node not in slow)


@pytest.mark.parametrize("sigma", [0.05, 0.1, 0.22, 0.5])
def test_the_ratio_is_the_slowdown_whatever_the_jobs_spread(sigma: float) -> None:
    det = detector(1.0)
    feed(det, sigma, {"n0": 1.25})
    tally = det._tally(90 * MIN, [])["n0"][0]
    assert tally.ratio == pytest.approx(1.25, abs=0.06 + 0.1 * sigma)
    if sigma >= 0.1:  # in job std 4x apart (at 0.05 the scores, ranks, saturate: every task is its job's slowest)
        assert tally.effect == pytest.approx(math.log(1.25) / sigma, rel=0.3)


def test_one_enormous_task_does_not_make_a_node_slow() -> None:
    det = RunningTaskDetector((Scale(20_000 * MIN),), z_list=4.0)
    rng = random.Random(3)
    for minute in range(30):
        for k in range(20):
            job, task, start = f"j{minute // 3}", f"{minute}-{k}", minute * MIN + k
            duration = round(rng.lognormvariate(0, 0.22) * 3 * MIN * (1000 if (minute, k) == (5, 0) else 1))
            det.observe(TaskStart(job, task, 0, f"n{k}", start))
            det.observe(TaskFinish(job, task, 0, f"n{k}", start + duration, duration, Status.SUCCEEDED))
    # n0's 30 tasks, one of them 1000x its job: counted as 4x at most, the node reads about 5 % slower, not 25 %
    det._log.apply_before(10_000 * MIN)  # every task finished, the enormous one too
    tally = det._tally(10_000 * MIN, [])["n0"][0]
    assert tally.running == 0 and tally.ratio < 1.12


def test_the_shipped_detector_carries_the_floor() -> None:
    det = DETECTORS.get("running")(RankingConfig(policy="running", period_us=MIN))
    assert isinstance(det, RunningTaskDetector)
    assert det.min_ratio == RUNNING_MIN_RATIO


def test_the_setting_overrides_the_floor_and_1_turns_it_off() -> None:
    from streams.config import ranking_config
    from streams.settings import Settings

    for value, expected in ((1.0, 1.0), (1.3, 1.3)):
        config = ranking_config(Settings(policy="running", running_min_ratio=value))
        det = DETECTORS.get("running")(config)
        assert isinstance(det, RunningTaskDetector) and det.min_ratio == expected
    with pytest.raises(ValueError, match="running_min_ratio"):
        RankingConfig(running_min_ratio=0.9)


def test_a_tally_of_little_information_reads_at_most_the_per_task_clip_instead_of_overflowing() -> None:
    """CI at 92fcd13: a Faust running-policy worker crashed with OverflowError in ``Tally.ratio`` (running tasks
    carry contributions with little information, so their mean log ratio passed exp's range)."""
    assert Tally(3, 3, 0, 1.0, 1e-6, 5.0).ratio == pytest.approx(4.0)
    assert Tally(3, 3, 0, 1.0, 1e-6, -5.0).ratio == pytest.approx(0.25)
    assert Tally(3, 0, 0, 1.0, 2.0, 0.4).ratio == pytest.approx(math.exp(0.2))
    assert math.isnan(Tally(3, 0, 0, 1.0, 0.0, 0.4).ratio) and math.isnan(Tally(3, 0, 0, 1.0, 1.0, math.inf).ratio)
