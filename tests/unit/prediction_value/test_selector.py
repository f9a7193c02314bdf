"""``select`` follows Spark's cautious rule until hazard's flags have paid off better on ended jobs."""

from __future__ import annotations

from collections import defaultdict

from producers.synthetic import SyntheticCluster, SyntheticConfig
from streams.core.evaluation.runner import replay_jobs
from streams.core.events import Event, StragglerPrediction
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
