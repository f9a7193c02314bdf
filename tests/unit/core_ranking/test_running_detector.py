"""The running-task detector: sees a fault in tasks still running, suspects no healthy node, lets a recovered node
go and keeps a slow one, and gives the same evidence whatever the arrival order or a snapshot in between."""

from __future__ import annotations

import json
import random

import numpy as np

from streams.core.detection.base import WindowView, observe_task
from streams.core.detection.censored import task_scores
from streams.core.detection.running import RunningTaskDetector
from streams.core.detection.scales import Scale
from streams.core.events import Event, Status, TaskFinish, TaskStart

MIN = 60_000_000


def detector() -> RunningTaskDetector:
    return RunningTaskDetector((Scale(15 * MIN), Scale(60 * MIN), Scale(180 * MIN)), z_list=4.5, min_effect=0.3)


def cluster(minutes: range, slow: dict[str, float], rng: random.Random, nodes: int = 20,
            hang: frozenset[str] = frozenset()) -> list[Event]:
    """One task a minute per node, jobs of 20 tasks (one per node), log-normal work; ``hang``: never finish."""
    events: list[Event] = []
    for minute in minutes:
        size = rng.lognormvariate(0, 0.5) * 3 * MIN
        for i in range(nodes):
            node, start = f"n{i:02d}", minute * MIN + i
            events.append(TaskStart(f"j{minute}", str(i), 0, node, start))
            if node in hang:
                continue
            duration = round(size * rng.lognormvariate(0, 0.5) * slow.get(node, 1.0))
            events.append(TaskFinish(f"j{minute}", str(i), 0, node, start + duration, duration, Status.SUCCEEDED))
    return sorted(events, key=lambda e: e.ts_us)


def periods(det: RunningTaskDetector, events: list[Event], first: int, last: int,
            shuffle: random.Random | None = None) -> list[dict]:
    out = []
    for end in range(first, last + 1, 5):
        batch = [e for e in events if (end - 5) * MIN <= e.ts_us < end * MIN]
        if shuffle is not None:
            shuffle.shuffle(batch)
        for event in batch:
            observe_task(det, event)
        out.append(dict(det.detect(WindowView(end * MIN - 60 * MIN, end * MIN, {}))))
    return out


def test_scores_of_a_healthy_cluster_are_standard_normal_per_node() -> None:
    rng = np.random.default_rng(1)
    jobs = np.repeat(np.arange(3000), 20)
    starts = rng.integers(0, 600 * MIN, len(jobs))
    durations = (rng.lognormal(0, 0.5, len(jobs)) * rng.lognormal(0, 1, 3000)[jobs] * 2 * MIN).astype(np.int64)
    end = 620 * MIN
    finished = starts + durations < end
    x, v, _ = task_scores(jobs, starts, np.where(finished, durations, end - starts), finished, end)
    nodes = rng.integers(0, 300, len(jobs))
    z = np.bincount(nodes, x) / np.sqrt(np.bincount(nodes, v))
    assert abs(z.mean()) < 0.15 and 0.85 < z.std() < 1.1 and np.abs(z).max() < 4.5


def test_a_node_whose_tasks_hang_is_found_before_any_of_them_finishes() -> None:
    det, rng = detector(), random.Random(1)
    events = cluster(range(0, 60), {}, rng) + cluster(range(60, 90), {}, rng, hang=frozenset({"n04"}))
    found = periods(det, sorted(events, key=lambda e: e.ts_us), 5, 90)
    first = next(k for k, period in enumerate(found) if "n04" in period and period["n04"].suspect)
    assert (first + 1) * 5 <= 80  # within 20 minutes of the hang, on running tasks alone
    assert "still running" in found[first]["n04"].reason


def test_a_node_that_turns_2x_slow_is_found_within_40_minutes_and_no_healthy_node_is() -> None:
    det, rng = detector(), random.Random(2)
    events = cluster(range(0, 240), {}, rng) + cluster(range(240, 300), {"n07": 2.0}, rng)
    found = periods(det, sorted(events, key=lambda e: e.ts_us), 5, 300)
    assert not any(e.suspect or e.still_slow for period in found for n, e in period.items() if n != "n07")
    first = next(k for k, period in enumerate(found) if period["n07"].suspect)
    assert 240 < (first + 1) * 5 <= 280


def test_a_recovered_node_is_let_go_and_a_still_slow_one_is_kept() -> None:
    det, rng = detector(), random.Random(3)
    events = (cluster(range(0, 60), {}, rng) + cluster(range(60, 150), {"n01": 2.0, "n02": 1.6}, rng)
              + cluster(range(150, 210), {"n02": 1.6}, rng))
    found = periods(det, sorted(events, key=lambda e: e.ts_us), 5, 210)
    after = found[150 // 5 - 1:]
    assert after[0]["n01"].still_slow and after[0]["n02"].still_slow
    released = next(k for k, period in enumerate(after) if not period["n01"].still_slow)
    assert released * 5 <= 25 and "recovered" in after[released]["n01"].reason
    assert all(period["n02"].still_slow for period in after)


def test_arrival_order_within_a_period_and_a_snapshot_change_nothing() -> None:
    rng = random.Random(4)
    events = sorted(cluster(range(0, 90), {"n05": 1.8}, rng), key=lambda e: e.ts_us)
    one, two = detector(), detector()
    assert periods(one, events, 5, 45) == periods(two, events, 5, 45, shuffle=random.Random(5))
    twin = detector()
    twin.restore(json.loads(json.dumps(two.snapshot())))
    later = periods(one, events, 50, 90)
    assert later == periods(twin, events, 50, 90) and any(e.suspect for period in later for e in period.values())


def test_the_survival_curve_behind_the_scores_is_scipys_kaplan_meier() -> None:
    from scipy import stats
    from scipy.special import ndtri

    rng = np.random.default_rng(7)
    times = rng.integers(1, 1000, 30).astype(np.int64)
    finished = rng.random(30) < 0.6
    end = 2000
    starts = np.where(finished, 0, end - times).astype(np.int64)  # running tasks: censored at their elapsed time
    x, _, _ = task_scores(np.zeros(30, dtype=np.int64), starts, times, finished, end)
    km = stats.ecdf(stats.CensoredData(uncensored=times[finished], right=times[~finished])).sf
    before, after = km.evaluate(times[finished] - 0.5), km.evaluate(times[finished])
    assert np.allclose(x[finished], ndtri(1 - (before + after) / 2))


def test_progress_reports_are_evidence_before_a_slow_nodes_tasks_finish() -> None:
    # Every task reports its progress each minute; a 3x node's tasks progress at a third of their siblings' rate.
    from streams.core.events import TaskCheckpoint

    rng = random.Random(6)
    events = cluster(range(0, 60), {}, rng) + cluster(range(60, 90), {"n03": 3.0}, rng)
    starts = {(e.job_id, e.task_id): e for e in events if isinstance(e, TaskStart)}
    reports: list[Event] = []
    for e in events:
        if isinstance(e, TaskFinish):
            s = starts[(e.job_id, e.task_id)]
            reports += [TaskCheckpoint(e.job_id, e.task_id, 0, e.node_id, s.ts_us + k * MIN, k * MIN,
                                       {"progress": k * MIN / e.duration_us})
                        for k in range(1, 1 + (e.duration_us - 1) // MIN)]

    def run(stream: list[Event]) -> list[dict]:
        found = periods(detector(), sorted(stream, key=lambda e: e.ts_us), 5, 90)
        assert not any(e.suspect for period in found for n, e in period.items() if n != "n03")
        assert found[75 // 5 - 1]["n03"].suspect
        return found

    with_reports, without = run(events + reports), run(events)
    for minute in (65, 70):  # 5 and 10 minutes after the onset its evidence is stronger with progress reports
        assert with_reports[minute // 5 - 1]["n03"].score > without[minute // 5 - 1]["n03"].score + 0.1


def every_minute(det: RunningTaskDetector, events: list[Event], last: int) -> list[dict]:
    out, i = [], 0
    for end in range(1, last + 1):
        while i < len(events) and events[i].ts_us < end * MIN:
            observe_task(det, events[i])
            i += 1
        out.append(dict(det.detect(WindowView(end * MIN - 60 * MIN, end * MIN, {}))))
    return out


def test_the_running_policy_at_a_1_min_period_lists_a_2x_node_sooner_than_one_15_min_window() -> None:
    # The policy's scan over 10-20 min scales finds a 2x node in fewer minutes after its onset than the single
    # 15-min scale it replaced, looked at just as often; neither suspects a healthy node.
    from streams.core.detection.registry import RUNNING_Z, RUNNING_Z_RELEASE_FAST, RUNNING_Z_SCAN, running_detector
    from streams.core.ranking_config import RankingConfig

    def first_found(det: RunningTaskDetector, seed: int) -> int:
        rng = random.Random(seed)
        events = sorted(cluster(range(0, 90), {}, rng) + cluster(range(90, 150), {"n07": 2.0}, rng),
                        key=lambda e: e.ts_us)
        found = every_minute(det, events, 150)
        assert not any(e.suspect for period in found for n, e in period.items() if n != "n07")
        return next(k + 1 for k, period in enumerate(found) if "n07" in period and period["n07"].suspect) - 90

    policy = running_detector(RankingConfig(period_us=MIN))
    assert policy.z_release == RUNNING_Z_RELEASE_FAST > running_detector(RankingConfig()).z_release
    scan = [first_found(running_detector(RankingConfig(period_us=MIN)), seed) for seed in range(10, 16)]
    single = [first_found(RunningTaskDetector((Scale(15 * MIN, RUNNING_Z_SCAN), Scale(60 * MIN)),
                                             z_list=RUNNING_Z), seed)
              for seed in range(10, 16)]
    assert sum(scan) < sum(single) and all(a <= b for a, b in zip(scan, single, strict=True))


def test_a_scale_looked_at_every_5_minutes_lists_only_on_those_boundaries() -> None:
    # A long window judged every 5 minutes of event time gives a healthy node a fifth of the looks at its lucky
    # highs: a node it would list at minute 63 is listed at minute 65, never between.
    rng = random.Random(3)
    events = sorted(cluster(range(0, 60), {}, rng) + cluster(range(60, 90), {"n02": 3.0}, rng),
                    key=lambda e: e.ts_us)
    every = every_minute(RunningTaskDetector((Scale(30 * MIN, 3.0),), z_list=3.0), events, 90)
    sparse = every_minute(RunningTaskDetector((Scale(30 * MIN, 3.0, every_us=5 * MIN),), z_list=3.0), events, 90)
    first = next(k + 1 for k, period in enumerate(every) if "n02" in period and period["n02"].suspect)
    later = next(k + 1 for k, period in enumerate(sparse) if "n02" in period and period["n02"].suspect)
    assert later % 5 == 0 and first <= later < first + 5
    assert sum(e.suspect for p in sparse for e in p.values()) <= sum(e.suspect for p in every for e in p.values())


def test_a_task_that_slows_mid_run_shows_it_at_its_next_report_against_its_own_earlier_rate() -> None:
    # Jobs of 8 tasks, one per node, 10 to 22 minutes long (n0's 10); n0 turns 3x slow at minute 62, two minutes
    # into its running task. Reports every minute. Projected at the recent rate, that task looks longer than any
    # sibling two reports later (26 min); at the mean rate since its start (15 min), in the middle of them.
    from streams.core.events import TaskCheckpoint

    events: list[Event] = []
    for j in range(14):
        start = j * 5 * MIN
        for i in range(8):
            node, slow_from = f"n{i}", 62 * MIN if i == 0 else None
            events.append(TaskStart(f"j{j}", str(i), 0, node, start + i))
            done, t, rate = 0.0, start, 1.0 / ((10 + 2 * i) * MIN)
            while done < 1.0 and t < start + 60 * MIN:
                step = rate / 3 if slow_from is not None and t >= slow_from else rate
                t += MIN
                done = min(1.0, done + step * MIN)
                if done < 1.0:
                    events.append(TaskCheckpoint(f"j{j}", str(i), 0, node, t + i, t - start, {"progress": done}))
            events.append(TaskFinish(f"j{j}", str(i), 0, node, t + i, t - start, Status.SUCCEEDED))
    events.sort(key=lambda e: e.ts_us)

    def score(recent: bool) -> float:
        det = RunningTaskDetector((Scale(30 * MIN),), z_list=99.0, recent_rate=recent)
        for event in events:
            if event.ts_us < 65 * MIN:
                observe_task(det, event)
        return det.detect(WindowView(5 * MIN, 65 * MIN, {}))["n0"].score

    recent, mean = score(True), score(False)
    assert recent > mean + 0.1, (recent, mean)


def hardware_cluster(rng: random.Random, faulty: dict[str, float]) -> list[Event]:
    """30 nodes of three healthy generations (0.8x, 1x, 1.25x: nodes n00-n09, n10-n19, n20-n29) for 3 hours."""
    speeds = {f"n{i:02d}": (0.8, 1.0, 1.25)[i // 10] * faulty.get(f"n{i:02d}", 1.0) for i in range(30)}
    return cluster(range(0, 180), speeds, rng, nodes=30)


def listed_over_hours(spread: bool, events: list[Event]) -> set[str]:
    det = RunningTaskDetector((Scale(180 * MIN, spread=spread),), z_list=4.9, min_effect=0.3)
    return {node for period in periods(det, events, 60, 180) for node, e in period.items() if e.suspect}


def test_over_hours_slower_healthy_hardware_is_judged_against_the_clusters_spread_and_a_faulty_node_is_not_spared(
) -> None:
    healthy = hardware_cluster(random.Random(5), {})
    assert {int(node[1:]) // 10 for node in listed_over_hours(False, healthy)} == {2}  # the 1.25x generation
    assert listed_over_hours(True, healthy) == set()
    equal = cluster(range(0, 180), {"n03": 1.6}, random.Random(6), nodes=30)  # equal hardware, one 1.6x node
    assert listed_over_hours(True, equal) == listed_over_hours(False, equal) == {"n03"}


def test_a_release_needs_enough_information_not_a_few_tasks_that_just_started() -> None:
    events = cluster(range(0, 60), {}, random.Random(7)) + cluster(range(60, 150), {"n01": 2.0}, random.Random(8))
    events += cluster(range(150, 210), {}, random.Random(9))
    events.sort(key=lambda e: e.ts_us)
    released = {}
    for floor in (0.0, 3.0, 1e9):
        det = RunningTaskDetector((Scale(15 * MIN), Scale(60 * MIN)), z_list=4.5, release_information=floor)
        found = periods(det, events, 5, 210)
        released[floor] = [k * 5 + 5 for k, period in enumerate(found) if "recovered" in period["n01"].reason]
    assert released[0.0] and released[0.0][0] >= 150  # let go after its recovery at 150 min, not before
    assert released[3.0][:1] == released[0.0][:1]  # a recovered node's scales carry three tasks' worth at once
    assert released[1e9] == []  # no scale ever holds that much information: never released by a scale
