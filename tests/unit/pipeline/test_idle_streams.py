"""A silent stream, once its shell declares it idle, no longer holds the ranking back; late records still count."""

from __future__ import annotations

import pytest

from streams.core.events import JobFinish, JobStart, NormalizedTask, Progress, Status, TaskFinish, TaskStart
from streams.core.ranking_config import RankingConfig
from streams.core.stages import NormalizeStage, RankStage

S = 1_000_000
PERIOD = 60 * S


def finished_job(job: str, start_s: int, durations: list[int]) -> list[TaskFinish]:
    return [TaskFinish(job, f"t{i}", 0, f"n{i}", (start_s + d) * S, d * S, Status.SUCCEEDED)
            for i, d in enumerate(durations)]  # fmt: skip


def test_task_events_wait_for_a_silent_job_stream_until_it_is_declared_idle() -> None:
    stage = NormalizeStage(0, 1, PERIOD, job_idle_timeout_us=100 * S, wait_for_job_events=True)
    out = [stage.process(e) for e in finished_job("j", 0, [10, 11, 12, 30])]
    out.append(stage.process(TaskStart("k", "t0", 0, "n0", 400 * S)))  # j idle since 30 s: final by 130 s
    assert all(not samples and not summaries and progress is None for samples, summaries, progress in out), \
        "nothing passes yet"
    samples, _, progress = stage.mark_job_stream_idle()
    assert stage.job_stream_idle
    assert sorted(s.task_id for s in samples) == ["t0", "t1", "t2", "t3"]
    assert progress == Progress(0, 1, 400 * S)
    # the job stream speaks again, late: its event counts at once and the watermark does not go back
    samples, _, progress = stage.process(JobStart("late", 200 * S))
    assert not stage.job_stream_idle and stage.watermark == 400 * S
    assert stage.pending == 1 and progress is None  # applied; only the task start at 400 s itself waits


def test_the_watermark_survives_a_checkpoint_but_idleness_does_not() -> None:
    stage = NormalizeStage(0, 1, PERIOD, job_idle_timeout_us=100 * S, wait_for_job_events=True)
    stage.process(TaskStart("k", "t0", 0, "n0", 400 * S))
    stage.mark_job_stream_idle()
    restored = NormalizeStage(0, 1, PERIOD, job_idle_timeout_us=100 * S, wait_for_job_events=True)
    restored.restore(stage.snapshot())
    assert restored.watermark == 400 * S and not restored.job_stream_idle


def sample(node: str, z: float, at_s: int) -> NormalizedTask:
    return NormalizedTask("j", f"{node}-{at_s}", 0, node, at_s * S, 10 * S, z, emitted_us=at_s * S)


def test_the_ranking_goes_on_without_an_idle_partition_and_takes_it_back_when_it_reports() -> None:
    config = RankingConfig(window_size_us=3600 * S, period_us=PERIOD, min_tasks=2, significance_floor=None,
                           max_fraction=1.0)  # fmt: skip
    stage = RankStage(config, partitions=2)
    for at in (10, 20, 30):
        stage.add(sample("a", 1.0, at))
        stage.add(sample("b", -1.0, at))
    assert stage.progress(Progress(0, 2, 200 * S)) == [], "partition 1 never reported: the ranking waits"
    results = stage.mark_idle(1)
    assert stage.idle == {1}
    assert [r.boundary_us for r in results] == [60 * S, 120 * S, 180 * S]
    assert {row.node_id for row in results[-1].ranking.nodes} == {"a", "b"}
    # partition 1 comes back behind the ranking: its sample is late, applied at the next boundary
    stage.add(sample("c", 0.5, 50))
    stage.add(sample("c", 0.7, 55))
    assert stage.progress(Progress(1, 2, 100 * S)) == [] and stage.idle == frozenset()
    assert stage.progress(Progress(0, 2, 300 * S)) == [], "active again: the ranking waits for partition 1"
    results = stage.progress(Progress(1, 2, 250 * S))
    assert [r.boundary_us for r in results] == [240 * S]
    assert "c" in {row.node_id for row in results[0].ranking.nodes}


def test_an_unknown_partition_cannot_be_idle() -> None:
    stage = RankStage(RankingConfig(), partitions=2)
    with pytest.raises(ValueError, match="partition 2 of 2"):
        stage.mark_idle(2)


def test_a_job_finish_after_idleness_finalises_its_job_at_once() -> None:
    stage = NormalizeStage(0, 1, PERIOD, job_idle_timeout_us=10_000 * S, wait_for_job_events=True)
    for event in finished_job("j", 0, [10, 11, 12, 30]):
        stage.process(event)
    stage.process(TaskStart("k", "t0", 0, "n0", 100 * S))
    samples, summaries, _ = stage.mark_job_stream_idle()
    assert samples == [], "the job is not final yet: its idle timeout is long"
    assert sum(m.n for s in summaries for m in s.added) == 4, "its tasks count provisionally meanwhile"
    samples, summaries, _ = stage.process(JobFinish("j", 40 * S))
    assert sorted(s.task_id for s in samples) == ["t0", "t1", "t2", "t3"]
    assert {s.emitted_us for s in samples} == {40 * S}, "emitted at the time the job became final"
