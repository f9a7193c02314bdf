"""Per-job z-values: finalisation rules of SPEC 3 and exactness against numpy."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core.events import JobFinish, JobStart, Status, TaskCheckpoint, TaskFinish, TaskStart
from streams.core.zscore import JobNormalizer

HOUR = 3_600_000_000


def finish(job: str, task: str, node: str, ts: int, duration: int, status: Status = Status.SUCCEEDED,
           attempt: int = 0) -> TaskFinish:
    return TaskFinish(job, task, attempt, node, ts, duration, status)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=10**9), min_size=2, max_size=40))
def test_final_z_values_equal_numpy_at_job_finish(durations: list[int]) -> None:
    normalizer = JobNormalizer(job_idle_timeout_us=HOUR)
    early = []
    for i, d in enumerate(durations):
        early += normalizer.update(finish("j", f"t{i}", f"n{i % 3}", 10**10 + i, d))
    final = normalizer.update(JobFinish("j", 10**10 + len(durations)))
    d = np.array(durations, dtype=float)
    assert early == []
    if d.std() == 0:
        assert final == []
        return
    expected = (d - d.mean()) / d.std()
    by_task = {s.task_id: s.z for s in final}
    assert [by_task[f"t{i}"] for i in range(len(durations))] == list(expected)  # exactly, not approximately
    assert not any(s.provisional for s in final)


def test_only_succeeded_attempts_count() -> None:
    normalizer = JobNormalizer()
    events = [
        finish("j", "a", "n1", 100, 10),
        finish("j", "b", "n2", 110, 20),
        finish("j", "c", "n3", 120, 500, Status.FAILED),
        finish("j", "c", "n4", 130, 30, attempt=1),
        finish("j", "b", "n5", 140, 900, Status.KILLED, attempt=1),  # the losing speculative copy
        finish("j", "d", "n6", 150, 700, Status.EVICTED),
        finish("j", "e", "n7", 160, 800, Status.LOST),
    ]
    for event in events:
        assert normalizer.update(event) == []
    samples = normalizer.update(JobFinish("j", 200))
    assert {(s.task_id, s.node_id) for s in samples} == {("a", "n1"), ("b", "n2"), ("c", "n4")}
    d = np.array([10.0, 20.0, 30.0])
    assert [s.z for s in sorted(samples, key=lambda s: s.task_id)] == list((d - d.mean()) / d.std())


def test_jobs_with_one_success_or_equal_durations_give_nothing() -> None:
    normalizer = JobNormalizer()
    normalizer.update(finish("one", "a", "n1", 100, 10))
    normalizer.update(finish("one", "b", "n1", 100, 10, Status.FAILED))
    assert normalizer.update(JobFinish("one", 200)) == []
    for task in "abc":
        normalizer.update(finish("flat", task, "n1", 300, 50))
    assert normalizer.update(JobFinish("flat", 400)) == []


def test_job_is_final_when_all_declared_tasks_succeeded() -> None:
    normalizer = JobNormalizer()
    normalizer.update(JobStart("j", 0, declared_tasks=3))
    assert normalizer.update(finish("j", "a", "n1", 100, 10)) == []
    assert normalizer.update(finish("j", "b", "n1", 110, 20, Status.FAILED)) == []
    assert normalizer.update(finish("j", "b", "n2", 120, 20, attempt=1)) == []
    samples = normalizer.update(finish("j", "c", "n3", 130, 60))
    assert len(samples) == 3
    assert normalizer.open_jobs == 0


def test_job_is_final_after_the_idle_timeout_of_event_time() -> None:
    normalizer = JobNormalizer(job_idle_timeout_us=HOUR)
    normalizer.update(finish("quiet", "a", "n1", 1_000, 10))
    normalizer.update(finish("quiet", "b", "n2", 2_000, 30))
    # Another job's events move event time; one microsecond short of the timeout nothing happens.
    assert normalizer.update(TaskStart("busy", "x", 0, "n3", 2_000 + HOUR - 1)) == []
    samples = normalizer.update(TaskCheckpoint("busy", "x", 0, "n3", 2_000 + HOUR, 5))
    assert sorted((s.task_id, s.z) for s in samples) == [("a", -1.0), ("b", 1.0)]


def test_expire_finalises_idle_jobs_on_a_timer() -> None:
    normalizer = JobNormalizer(job_idle_timeout_us=HOUR)
    normalizer.update(finish("j", "a", "n1", 1_000, 10))
    normalizer.update(finish("j", "b", "n2", 1_000, 30))
    assert normalizer.expire(1_000 + HOUR - 1) == []
    assert len(normalizer.expire(1_000 + HOUR)) == 2


def test_events_after_the_job_is_final_are_counted_as_late_not_scored() -> None:
    normalizer = JobNormalizer()
    normalizer.update(finish("j", "a", "n1", 100, 10))
    normalizer.update(finish("j", "b", "n1", 100, 30))
    assert len(normalizer.update(JobFinish("j", 200))) == 2
    assert normalizer.update(finish("j", "c", "n1", 210, 50)) == []
    assert normalizer.late_events == 1
    assert normalizer.flush() == []


def test_the_job_finish_of_a_job_final_by_its_declared_tasks_is_not_late() -> None:
    """Every synthetic job ended so: 200 'late' events a run, each a JobFinish that lost nothing."""
    normalizer = JobNormalizer()
    normalizer.update(JobStart("j", 0, declared_tasks=2))
    normalizer.update(finish("j", "a", "n1", 100, 10))
    assert len(normalizer.update(finish("j", "b", "n1", 100, 30))) == 2  # final: both declared tasks succeeded
    assert normalizer.update(JobFinish("j", 200)) == [] and normalizer.late_events == 0


def test_provisional_values_are_against_the_successes_so_far_withdrawn_when_final_and_the_final_ones_exact() -> None:
    normalizer = JobNormalizer(provisional=True)
    durations = [10, 20, 60, 30]
    for i, d in enumerate(durations[:3]):
        assert normalizer.update(finish("j", f"t{i}", "n1", 100 + i, d)) == []  # nothing until a rescore
    first = normalizer.rescore(emitted_us=150)
    so_far = np.array(durations[:3], dtype=float)
    assert [s.task_id for s in first] == ["t0", "t1", "t2"] and all(s.provisional for s in first)
    assert np.allclose([s.z for s in first], (so_far - so_far.mean()) / so_far.std())
    assert {s.emitted_us for s in first} == {150}
    assert normalizer.rescore(emitted_us=160) == [] and normalizer.take_withdrawn() == []  # unchanged job
    normalizer.update(finish("j", "t3", "n1", 170, 30))
    second = normalizer.rescore(emitted_us=180)
    assert len(second) == 4 and normalizer.take_withdrawn() == [(180, s) for s in first]  # replaced
    final = normalizer.update(JobFinish("j", 200))
    d = np.array(durations, dtype=float)
    assert [s.z for s in final] == list((d - d.mean()) / d.std())
    assert not any(s.provisional for s in final)
    assert normalizer.take_withdrawn() == [(200, s) for s in second]  # final values replace them


def test_provisional_values_leave_out_tasks_before_the_horizon_and_need_two_distinct_successes() -> None:
    normalizer = JobNormalizer(provisional=True)
    normalizer.update(finish("j", "a", "n1", 100, 10))
    assert normalizer.rescore(emitted_us=150) == []  # one success: no z-value (SPEC 3)
    normalizer.update(finish("j", "b", "n1", 300, 30))
    assert [s.task_id for s in normalizer.rescore(emitted_us=350, horizon_us=200)] == ["b"]
    assert JobNormalizer().rescore(emitted_us=10) == []  # provisional values are off by default


def test_snapshot_restore_continues_identically() -> None:
    events = [finish(f"j{i % 4}", f"t{i}", f"n{i % 5}", 1_000 * i, 10 + (i * 37) % 91) for i in range(60)]
    def run(normalizer: JobNormalizer, start: int, stop: int) -> list:
        out = []
        for i in range(start, stop):
            out += normalizer.update(events[i])
            if i % 7 == 0:  # provisional values now and then, withdrawn ones with them
                out += normalizer.rescore(events[i].ts_us) + [p for _, p in normalizer.take_withdrawn()]
        return out

    whole = JobNormalizer(job_idle_timeout_us=20_000, provisional=True)
    expected = run(whole, 0, 60) + whole.flush() + whole.take_withdrawn()  # type: ignore[operator]
    assert any(s.provisional for s in expected)
    first = JobNormalizer(job_idle_timeout_us=20_000, provisional=True)
    got = run(first, 0, 25)
    second = JobNormalizer(job_idle_timeout_us=20_000, provisional=True)
    second.restore(json.loads(json.dumps(first.snapshot())))
    got += run(second, 25, 60) + second.flush() + second.take_withdrawn()  # type: ignore[operator]
    assert got == expected
