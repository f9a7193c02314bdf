"""``select`` follows its first member until another one's flags have paid off better, with confidence, on
ended jobs."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from producers.synthetic import SyntheticCluster, SyntheticConfig
from streams.core.evaluation import shadow
from streams.core.evaluation.runner import replay_jobs
from streams.core.events import Event, StragglerPrediction, TaskCheckpoint
from streams.core.prediction.base import PredictionContext
from streams.core.prediction.registry import build_method
from streams.core.prediction.selector import SelectorMethod
from streams.core.prediction.threshold import JobP90


def _jobs(seed: int) -> dict[str, list[Event]]:
    jobs: dict[str, list[Event]] = defaultdict(list)
    config = SyntheticConfig(nodes=20, slow=3, jobs=20, tasks=(20, 30), checkpoints=6, seed=seed)
    for event in SyntheticCluster(config):
        jobs[event.job_id].append(event)
    return dict(jobs)


def _flags(method: object, jobs: dict[str, list[Event]]) -> dict[str, list[tuple[str, int]]]:
    runs = replay_jobs(method, jobs, {j: JobP90() for j in jobs})  # type: ignore[arg-type]
    return {j: [(f.task_id, f.ts_us) for f in run.flags] for j, run in runs.items()}


def _members(context: PredictionContext) -> list[object]:
    return [build_method("spark-q0.9-m3", context), build_method("hazard", context)]


def test_with_no_lead_enough_it_flags_exactly_what_spark_flags() -> None:
    jobs, context = _jobs(3), PredictionContext()
    selector = SelectorMethod(_members(context), margin=1.0)  # type: ignore[arg-type]
    assert _flags(selector, jobs) == _flags(build_method("spark-q0.9-m3", context), jobs)
    assert selector.leader == "spark-q0.9-m3"


def test_on_a_cluster_with_slow_nodes_it_moves_to_hazard_and_flags_earlier() -> None:
    jobs, context = _jobs(4), PredictionContext()
    selector = SelectorMethod(_members(context), margin=0.1)  # type: ignore[arg-type]
    runs = replay_jobs(selector, jobs, {j: JobP90() for j in jobs})
    assert selector.leader == "hazard"
    board = selector.board
    assert board["hazard"][0] > board["spark-q0.9-m3"][0]  # more flags in time on the ended jobs
    flags: list[StragglerPrediction] = [f for run in runs.values() for f in run.flags]
    assert flags and all(f.method == "select" for f in flags)
    assert len({(f.job_id, f.task_id) for f in flags}) == len(flags)  # each task once


def test_nothing_is_judged_before_a_job_ends() -> None:
    jobs, context = _jobs(4), PredictionContext()
    selector = SelectorMethod(_members(context), margin=0.0)  # type: ignore[arg-type]
    job_id, events = next(iter(jobs.items()))
    replay_jobs(selector, {job_id: events[:-1]}, {job_id: JobP90()})  # every event but the JobFinish
    assert set(selector.board.values()) == {(0, 0, 0, 0)} and selector.leader == "spark-q0.9-m3"


def _blind(jobs: dict[str, list[Event]]) -> dict[str, list[Event]]:
    """The tasks report nothing about their own speed (as on Google): only their node's past can tell."""
    return {j: [replace(e, features={}) if isinstance(e, TaskCheckpoint) else e for e in events]
            for j, events in jobs.items()}  # fmt: skip


def test_a_lead_on_one_job_is_not_enough_to_move() -> None:
    # the first select moved to hazard after one job where hazard flagged 1 straggler in time and Spark none
    selector = SelectorMethod([build_method(n, PredictionContext()) for n in ("spark-q0.9-m3", "hazard")],
                              z=1.0, min_jobs=5)  # fmt: skip
    selector.judge([(0, 0, 0, 3), (1, 11, 2, 0)])
    assert selector.leader == "spark-q0.9-m3"
    for _ in range(4):  # the same lead, job after job: now it is evidence
        selector.judge([(0, 0, 0, 3), (1, 2, 0, 2)])
    assert selector.leader == "hazard"
    for _ in range(10):  # and a member that falls behind for good is left again
        selector.judge([(2, 0, 0, 1), (0, 5, 0, 3)])
    assert selector.leader == "spark-q0.9-m3"


def test_replaying_select_from_its_members_flags_equals_running_it() -> None:
    jobs, context = _blind(_jobs(4)), PredictionContext()
    names = ["spark-q0.9-m3", "spark-q0.75-m1.5", "node-slow"]
    live = SelectorMethod([build_method(n, context) for n in names], min_jobs=2)  # type: ignore[arg-type]
    runs = replay_jobs(live, jobs, {j: JobP90() for j in jobs})
    members = [shadow.first_flags(build_method(n, context), jobs, {j: JobP90() for j in jobs}) for n in names]
    replayed = shadow.replay_select(jobs, members, SelectorMethod(shadow.stand_ins(names), min_jobs=2))
    assert live.leader != names[0]  # it did move, so the replay had something to follow
    for job_id, run in runs.items():
        first: dict[str, tuple[int, int]] = {}
        for f in run.flags:
            first.setdefault(f.task_id, (f.ts_us, f.elapsed_us))
        assert first == replayed[job_id]


def test_spark_node_flags_what_spark_flags_and_slow_nodes_tasks_earlier() -> None:
    jobs, context = _blind(_jobs(5)), PredictionContext()
    spark = shadow.first_flags(build_method("spark-q0.75-m1.5", context), jobs, {j: JobP90() for j in jobs})
    both = shadow.first_flags(build_method("spark-node", context), jobs, {j: JobP90() for j in jobs})
    for job_id, tasks in spark.items():
        assert all(task in both[job_id] and both[job_id][task][0] <= at for task, (at, _) in tasks.items())
    earlier = sum(both[j][t][0] < spark[j].get(t, (2**62, 0))[0] for j in both for t in both[j])
    assert earlier > 10  # the node's past flags tasks Spark flags late or never


def test_the_bound_is_the_mean_lead_less_z_standard_errors() -> None:
    import math
    import statistics

    from streams.core.prediction.selector import f1_in_time

    outcomes = [((1, 0, 0, 0), (0, 1, 0, 1)), ((0, 2, 0, 1), (1, 0, 0, 0)), ((3, 1, 0, 0), (1, 1, 1, 1))]
    leads = [f1_in_time(leader) - f1_in_time(challenger) for challenger, leader in outcomes]
    for z in (0.0, 1.5):
        selector = SelectorMethod(_members(PredictionContext()), z=z, margin=10.0)  # type: ignore[arg-type]
        for challenger, leader in outcomes:  # members: spark-q0.9-m3 (followed), hazard (the challenger)
            selector.judge([leader, challenger])
        mean = statistics.fmean([-lead for lead in leads])
        assert selector.bound(1) == mean - z * statistics.stdev(leads) / math.sqrt(3)
