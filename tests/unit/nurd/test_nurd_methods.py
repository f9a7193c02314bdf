"""Every prediction method behaves as SPEC 4 says: no flag before the initial fraction, each task once."""

from __future__ import annotations

from pathlib import Path

import pytest

from producers.readers.google_usage import read_usage
from streams.core.events import Event, JobStart, Status, StragglerPrediction, TaskCheckpoint, TaskFinish
from streams.core.prediction.base import JobPredictor, PredictionContext, step
from streams.core.prediction.baselines import SpeculationJob
from streams.core.prediction.nurd.nurd import NurdJob
from streams.core.prediction.perjob import PerJobMethod
from streams.core.prediction.registry import PREDICTORS, build_method
from streams.core.prediction.tasks import JobTasks
from streams.core.prediction.threshold import Oracle

FAST = [f"f{i}" for i in range(8)]


def _job(slow_cpu: float = 5.0) -> list[Event]:
    """Eight fast tasks (10 s, cpu 1) finish; two slow ones (cpu 5) keep reporting up to 200 s."""
    events: list[Event] = [JobStart("j", 0, declared_tasks=10)]
    for i, task in enumerate(FAST):
        end = (10 + i) * 1_000_000
        events.append(TaskCheckpoint("j", task, 0, "n1", end, end, {"cpu": 1.0 + i / 100}))
        events.append(TaskFinish("j", task, 0, "n1", end, end, Status.SUCCEEDED))
    for second in range(20, 200, 10):
        for task in ("s0", "s1"):
            us = second * 1_000_000
            events.append(TaskCheckpoint("j", task, 0, "n2", us, us, {"cpu": slow_cpu}))
    return events


def _run(job: JobPredictor, events: list[Event]) -> list[StragglerPrediction]:
    method = PerJobMethod(job.method, False, lambda threshold: job)
    return [f for e in events if (f := step(method, job, e)) is not None]


def _flags(job: JobPredictor, events: list[Event]) -> list[str]:
    return [f.task_id for f in _run(job, events)]


@pytest.mark.parametrize("name", [m for m in PREDICTORS.names() if m != "nurd-batch"])
def test_no_method_flags_a_task_twice(name: str) -> None:
    flagged = _flags(build_method(name, PredictionContext()).job("j", Oracle(30.0)), _job())
    assert len(flagged) == len(set(flagged))


def test_spark_flags_a_task_running_past_the_multiple_of_the_median() -> None:
    flagged = _flags(SpeculationJob(quantile=0.75, multiplier=1.5), _job())
    assert sorted(flagged) == ["s0", "s1"]
    first = _run(SpeculationJob(0.75, 1.5), _job())[0]
    assert first.elapsed_us > 1.5 * 13.5e6  # median of 10..17 s is 13.5 s


def test_predict_does_not_learn_the_checkpoint_it_is_judged_on() -> None:
    events = _job(slow_cpu=3.0)
    probe = next(e for e in events[40:] if isinstance(e, TaskCheckpoint))
    job = NurdJob(Oracle(tau_s=30.0), alpha=0.0)
    _run(job, events[: events.index(probe)])
    before = job.propensity_score({"cpu": 3.0, "log_elapsed_s": 3.0})
    job.predict(probe)
    assert job.propensity_score({"cpu": 3.0, "log_elapsed_s": 3.0}) == before  # g untouched by predict
    job.learn(probe)
    assert job.propensity_score({"cpu": 3.0, "log_elapsed_s": 3.0}) != before


def test_nothing_is_flagged_before_the_initial_fraction_finished() -> None:
    job = NurdJob(Oracle(tau_s=0.001), initial_fraction=0.5)  # any prediction would flag
    events = _job()
    fifth_finish = [i for i, e in enumerate(events) if isinstance(e, TaskFinish)][4]
    assert _run(job, events[:fifth_finish]) == []


def test_nurd_flags_the_tasks_unlike_the_finished_ones_and_not_the_others() -> None:
    job = NurdJob(Oracle(tau_s=30.0), alpha=0.0)
    flagged = _flags(job, _job())
    assert set(flagged) <= {"s0", "s1"}
    assert job.rho is not None and job.delta is not None


def test_an_incomplete_vector_is_not_scored() -> None:
    tasks = JobTasks()
    tasks.update(TaskCheckpoint("j", "a", 0, "n", 1, 1, {"EV": 0.0, "cpu": 1.0}))
    assert tasks.complete({"EV": 0.0, "cpu": 2.0})
    assert not tasks.complete({"EV": 0.0})


def test_nurd_batch_runs_the_same_protocol(traces_dir: Path) -> None:
    pytest.importorskip("sklearn")
    job = traces_dir / "google2011-nurd-timeseries" / "timeseriesspecsixtotal" / "6343048076"
    events = list(read_usage(job))
    tenth_finish = [i for i, e in enumerate(events) if isinstance(e, TaskFinish)][9]
    events = events[: tenth_finish + 60]  # predictions start at the 7th finish: a few dozen refits
    batch = build_method("nurd-batch", PredictionContext()).job("j", Oracle(300.0))
    flagged = _flags(batch, events)
    assert len(flagged) == len(set(flagged))
    assert batch.delta is not None  # type: ignore[attr-defined]


def test_nurd_batch_refits_on_one_blas_thread_seen_by_a_spy(traces_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its tiny refits ran 1.5-10x slower with the BLAS/OpenMP threads than without (they only wait for each other
    on shared cores), which made the batch baseline look costlier than it is (``laggard bench``'s nurd cost). A spy
    on the propensity refit records the pools' thread counts inside it, with the process set to 2 threads around."""
    pytest.importorskip("sklearn")
    from threadpoolctl import threadpool_info, threadpool_limits

    from streams.core.prediction.nurd.batch import NurdBatchJob

    threads: list[int] = []
    fit = NurdBatchJob._propensity

    def spy_propensity(self, *args):  # type: ignore[no-untyped-def]
        threads.extend(pool["num_threads"] for pool in threadpool_info())
        return fit(self, *args)

    monkeypatch.setattr(NurdBatchJob, "_propensity", spy_propensity)
    events = list(read_usage(traces_dir / "google2011-nurd-timeseries" / "timeseriesspecsixtotal" / "6343048076"))
    tenth_finish = [i for i, e in enumerate(events) if isinstance(e, TaskFinish)][9]
    with threadpool_limits(limits=2):  # what the pools run with outside the refits, on any machine
        _flags(build_method("nurd-batch", PredictionContext()).job("j", Oracle(300.0)), events[: tenth_finish + 20])
        outside = {pool["num_threads"] for pool in threadpool_info()}
    assert outside == {2} and threads and set(threads) == {1}


def test_a_restored_snapshot_continues_exactly_where_the_job_was() -> None:
    from streams.core.prediction.snapshot import restore, snapshot

    events = _job(slow_cpu=3.0)
    half = len(events) // 2
    live = NurdJob(Oracle(tau_s=30.0), alpha=0.0)
    _run(live, events[:half])
    copy = restore(snapshot(live))
    rest_live = [(f.task_id, f.adjusted_us) for f in _run(live, events[half:])]
    rest_copy = [(f.task_id, f.adjusted_us) for f in _run(copy, events[half:])]
    assert rest_copy == rest_live
