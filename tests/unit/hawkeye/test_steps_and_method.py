"""Hawkeye's straggling ratio, host book and the fixed-parameter method on the predictor protocol."""

from __future__ import annotations

from typing import Any

import pytest

from producers.registry import open_trace
from streams.core.events import JobFinish, JobStart, Status, TaskCheckpoint, TaskFinish, TaskStart
from streams.core.prediction.base import step
from streams.core.prediction.hawkeye.method import HawkeyeMethod
from streams.core.prediction.hawkeye.steps import HostBook, straggling_ratio

S = 1_000_000


def test_straggling_ratio_is_one_for_a_task_on_its_hosts_schedule() -> None:
    # four steps of 5 s expected on this host: after two steps and 10 s the task is on time
    assert straggling_ratio(10.0, 20.0, step_s=5.0, steps_done=2) == pytest.approx(1.0)
    # the same two steps took 20 s: 10 s behind a 20 s task
    assert straggling_ratio(20.0, 20.0, step_s=5.0, steps_done=2) == pytest.approx(1.5)
    # past every expected step, SR is elapsed / expected
    assert straggling_ratio(50.0, 20.0, step_s=5.0, steps_done=6) == pytest.approx(2.5)


def test_progress_replaces_step_counting_when_a_source_reports_it() -> None:
    assert straggling_ratio(30.0, 20.0, step_s=5.0, steps_done=1, progress=0.5) == pytest.approx(2.0)


def test_host_book_forgets_beyond_its_window_and_shrinks_toward_the_job() -> None:
    book = HostBook(window=3, prior=1.0)
    book.add("h", [10.0, 1.0, 1.0, 1.0], [])
    assert book.task_times("h") == (1.0, 1.0, 1.0)
    assert book.expected_factor("h") == pytest.approx(1.0)
    assert book.expected_factor("h", local=(3.0,)) == pytest.approx((3 + 3 + 1) / 5)


def _job(method: HawkeyeMethod, job_id: str, durations: dict[str, tuple[str, int]], t0: int) -> list[str]:
    """Run one job of tasks (task -> (host, duration s)) with a checkpoint every 10 s; return flagged tasks."""
    job = method.job(job_id, None)
    events = [JobStart(job_id, t0, declared_tasks=len(durations))]
    for task, (host, seconds) in durations.items():
        events.append(TaskStart(job_id, task, 0, host, t0))
        events += [TaskCheckpoint(job_id, task, 0, host, t0 + e * S, e * S, {}) for e in range(10, seconds, 10)]
        events.append(TaskFinish(job_id, task, 0, host, t0 + seconds * S, seconds * S, Status.SUCCEEDED))
    events.sort(key=lambda e: e.ts_us)
    events.append(JobFinish(job_id, max(e.ts_us for e in events)))
    return [flag.task_id for e in events if (flag := step(method, job, e)) is not None]


def test_a_slow_host_learned_from_earlier_jobs_is_flagged_by_its_pof() -> None:
    method = HawkeyeMethod(quantile=0.5, multiplier=1.5)
    for j in range(4):  # 'slow' runs every task twice as long as the others
        tasks = {f"f{i}": (f"fast{i}", 40 + i) for i in range(6)} | {"s": ("slow", 90 + j)}
        _job(method, f"warm{j}", tasks, j * 1000 * S)
    law = method.hosts.book.pareto("slow")
    assert law is not None and law.pof(1.5) == 0.0
    # in a new job the slow host's task is flagged at its first checkpoint after half the tasks ended,
    # while it has run only 50 s: not yet past 1.5 x the job's mean
    tasks = {f"f{i}": (f"fast{i}", 40 + i) for i in range(6)} | {"s": ("slow", 95)}
    assert _job(method, "new", tasks, 10_000 * S) == ["s"]


def test_a_task_slow_for_its_own_host_is_flagged_by_its_straggling_ratio() -> None:
    method = HawkeyeMethod(quantile=0.5, multiplier=1.5)
    tasks = {f"f{i}": (f"h{i}", 40 + i) for i in range(6)} | {"late": ("h9", 130)}
    assert _job(method, "j", tasks, 0) == ["late"]


def test_nothing_is_flagged_before_the_quantile_of_tasks_finished() -> None:
    method = HawkeyeMethod(quantile=0.9, multiplier=1.5)
    tasks = {f"f{i}": (f"h{i}", 40 + i) for i in range(6)} | {"late": ("h9", 60), "later": ("h8", 61)}
    assert _job(method, "j", tasks, 0) == []


def test_on_a_heterogeneous_cluster_hawkeye_flags_fewer_ordinary_tasks_of_the_slow_tier_than_spark() -> None:
    """Host-relative SR: a task on a legitimately slower tier is a straggler only if slow for that tier."""
    from streams.core.prediction.baselines import SpeculationJob
    from streams.core.prediction.hawkeye.heldout import _spark_step

    trace = open_trace("synthetic:nodes=12,slow=0,jobs=40,tasks=30,hetero=2.5,tiers=2,checkpoints=4,seed=3")
    stretch = trace.ground_truth["host_stretch"]
    method = HawkeyeMethod(quantile=0.5, multiplier=1.5)
    jobs: dict[str, Any] = {}
    spark: dict[str, SpeculationJob] = {}
    work: dict[tuple[str, str], float] = {}  # (job, task) -> duration / its host's stretch
    hawkeye_flags, spark_flags = [], []
    for event in trace:
        if isinstance(event, TaskFinish):
            work[event.job_id, event.task_id] = event.duration_us / 1e6 / stretch[event.node_id]
        job = jobs.setdefault(event.job_id, method.job(event.job_id, None))
        flag = step(method, job, event)
        late = event.job_id >= "job-00020"  # once every host has a history
        if flag is not None and late and stretch[flag.node_id] > 1:
            hawkeye_flags.append((flag.job_id, flag.task_id))
        rule = spark.setdefault(event.job_id, SpeculationJob(0.5, 1.5))
        spark_flags += [(f.job_id, f.task_id) for f in _spark_step(rule, event) if late and stretch[f.node_id] > 1]
    assert len(hawkeye_flags) < 0.6 * len(spark_flags)
    # what Hawkeye leaves out on the slow tier is the ordinary work Spark flags for running on slow hardware
    mean_work = {name: sum(work[k] for k in flags) / len(flags)
                 for name, flags in (("hawkeye", hawkeye_flags), ("spark", spark_flags))}  # fmt: skip
    assert mean_work["hawkeye"] > mean_work["spark"]
