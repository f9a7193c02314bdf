"""Predictions do not depend on how a partition's two topics interleave (issue 18): the same events in time
order, or with the job events read 500-2,000 events early or late, give the same flags, none twice; a source
without job events still gets its flags once its job stream is declared idle; a restart mid-stream changes
nothing."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from producers.registry import open_trace
from streams.agents.idle_rules import IdleClock, release_predictions_if_idle
from streams.core.events import Event, JobFinish, JobStart, StragglerPrediction
from streams.core.prediction.base import PredictionContext
from streams.core.prediction.fleet import PredictorFleet
from streams.core.prediction.stage import PredictStage

TRACE = "synthetic:nodes=20,slow=2,jobs=60,checkpoints=4,seed=101"  # 14,232 events, jobs overlapping in time
Flag = tuple[str, str, int, int]


@pytest.fixture(scope="module")
def events() -> list[Event]:
    return list(open_trace(TRACE))


def is_job_event(event: Event) -> bool:
    return isinstance(event, (JobStart, JobFinish))


def skewed(events: list[Event], skew: int) -> list[Event]:
    """``events`` as a consumer may read the two topics: each stream in its own order, every job event moved
    ``skew`` task events later (negative: earlier) than its place in time order."""
    keyed: list[tuple[int, int, int, Event]] = []
    tasks = 0
    for arrival, event in enumerate(events):
        if is_job_event(event):
            keyed.append((tasks + skew, 0, arrival, event))
        else:
            keyed.append((tasks, 1, arrival, event))
            tasks += 1
    return [event for *_, event in sorted(keyed, key=lambda row: row[:3])]


def fleet(method: str) -> PredictorFleet:
    return PredictorFleet(method, PredictionContext(), job_idle_timeout_us=3_600_000_000)


def keys(flags: list[StragglerPrediction]) -> list[Flag]:
    return [(f.job_id, f.task_id, f.attempt, f.ts_us) for f in flags]


def worker_flags(stage: PredictStage, events: list[Event], batch: int = 500) -> list[StragglerPrediction]:
    """What a worker's stage flags over ``events`` read in batches, then everything it still holds."""
    flags: list[StragglerPrediction] = []
    for start in range(0, len(events), batch):
        flags += stage.process_batch(events[start:start + batch])
    return flags + stage.flush()


def in_time_order(method: str, events: list[Event]) -> list[Flag]:
    stage = PredictStage(fleet(method), time_ordered=True)
    return keys([flag for event in events for flag in stage.process(event)] + stage.flush())


@pytest.mark.parametrize("method", ["select", "hazard", "spark-q0.75-m1.5"])
def test_the_same_flags_whatever_the_skew_between_the_topics(events: list[Event], method: str) -> None:
    expected = in_time_order(method, events)
    assert expected and len({flag[:3] for flag in expected}) == len(expected)
    for skew in (-2000, -500, 500, 2000):  # job events read early, then late
        arrived = skewed(events, skew)
        assert arrived != events
        got = keys(worker_flags(PredictStage(fleet(method), wait_for_job_events=True), arrived))
        twice = [flag for flag, n in Counter(flag[:3] for flag in got).items() if n > 1]
        assert not twice, f"skew {skew}: {len(twice)} tasks flagged twice"
        missing, extra = set(expected) - set(got), set(got) - set(expected)
        assert got == expected, f"skew {skew}: {len(missing)} missing, {len(extra)} extra"


def test_a_flag_waits_only_until_the_job_stream_has_passed_its_time(events: list[Event]) -> None:
    stage = PredictStage(fleet("spark-q0.75-m1.5"), wait_for_job_events=True)
    arrived = skewed(events, 500)  # job events late: task events wait for them
    emitted = 0
    for start in range(0, len(arrived), 200):
        before = stage.watermark
        for flag in stage.process_batch(arrived[start:start + 200]):
            assert before <= flag.ts_us < stage.watermark, "flagged in the batch that let its checkpoint pass"
            emitted += 1
    assert emitted > 0.9 * len(in_time_order("spark-q0.75-m1.5", events)), "flags come while the trace runs"


def test_a_source_without_job_events_gets_its_flags_once_the_job_stream_is_declared_idle(events: list[Event]) -> None:
    tasks_only = [event for event in events if not is_job_event(event)]
    expected = in_time_order("spark-q0.75-m1.5", tasks_only)
    assert expected
    now = [0.0]
    idle = IdleClock(60.0, clock=lambda: now[0])
    stage = PredictStage(fleet("spark-q0.75-m1.5"), wait_for_job_events=True)  # a Kafka worker waits for job-events
    half = len(tasks_only) // 2
    flags = stage.process_batch(tasks_only[:half]) + release_predictions_if_idle(idle, stage)
    assert flags == [] and stage.holds_progress, "the job stream may only be late: the worker waits"
    now[0] = 61.0  # a minute of wall-clock time without a job event
    flags += release_predictions_if_idle(idle, stage)
    assert flags and stage.job_stream_idle
    flags += stage.process_batch(tasks_only[half:])
    assert keys(flags + stage.flush()) == expected
    # where job events are not expected (LAGGARD_WAIT_FOR_JOB_EVENTS=false) nothing waits at all
    assert keys(worker_flags(PredictStage(fleet("spark-q0.75-m1.5")), tasks_only)) == expected


def test_a_restart_mid_stream_changes_no_flag(events: list[Event]) -> None:
    arrived = skewed(events, -1000)
    expected = keys(worker_flags(PredictStage(fleet("select"), wait_for_job_events=True), arrived))
    first = PredictStage(fleet("select"), wait_for_job_events=True)
    cut = len(arrived) // 2 + 123
    flags = first.process_batch(arrived[:cut])
    assert first.pending > 0, "the snapshot holds events that wait"
    saved = json.loads(json.dumps(first.snapshot()))  # what the checkpoint topic holds
    second = PredictStage(fleet("select"), wait_for_job_events=True)
    second.restore(saved)
    assert keys(flags + worker_flags(second, arrived[cut:])) == expected


def test_an_old_fleet_snapshot_continues_and_a_malformed_one_changes_nothing(events: list[Event]) -> None:
    old = fleet("select")  # what a prediction worker ran before its events were merged
    for event in events[:3000]:
        old.step(event)
    upgraded = PredictStage(fleet("select"), time_ordered=True)
    upgraded.restore(json.loads(json.dumps(old.snapshot())))  # what its checkpoints held
    assert upgraded.fleet.running_jobs == old.running_jobs > 0 and upgraded.pending == 0
    expected = keys([flag for event in events[3000:] if (flag := old.step(event)) is not None])
    assert expected and keys(worker_flags(upgraded, events[3000:])) == expected, "it continues where it was"
    stage = PredictStage(fleet("select"))
    stage.process_batch(events[:300])
    with pytest.raises(ValueError, match="does not match"):
        PredictStage(fleet("hazard")).restore(stage.snapshot())  # another method
    resumed = PredictStage(fleet("select"))
    resumed.restore(stage.snapshot())
    before = json.dumps(resumed.snapshot())
    good = stage.snapshot()
    for broken in ({**good, "merge": {"pending": []}},  # a part missing
                   {**good, "fleet": {**good["fleet"], "jobs": [["job", 1]]}}):  # a part of another shape
        with pytest.raises(ValueError):
            resumed.restore(broken)
        assert json.dumps(resumed.snapshot()) == before, "a refused snapshot changed the stage"


def test_a_job_stream_that_keeps_sending_is_not_declared_idle(events: list[Event]) -> None:
    """Live (wall clock = event time, a batch a second, the timer every 15 s): task events wait behind the job
    stream almost always, since job events come only as jobs start and end; the stream is declared idle only
    after a minute without a job event (it was about once a minute, 2-20 s after one), and the flags stay those
    of time order."""
    now = [0.0]
    idle = IdleClock(60.0, clock=lambda: now[0])
    stage = PredictStage(fleet("spark-q0.75-m1.5"), wait_for_job_events=True)
    start, last_job, at = events[0].ts_us, 0.0, 0
    silences: list[float] = []  # seconds since the latest job event, at each declaration
    flags: list[StragglerPrediction] = []
    while at < len(events):
        now[0] += 1.0
        batch = []
        while at < len(events) and (events[at].ts_us - start) / 1e6 <= now[0]:
            batch.append(events[at])
            at += 1
        last_job = now[0] if any(is_job_event(e) for e in batch) else last_job
        idle_before = stage.job_stream_idle
        flags += stage.process_batch(batch) if batch else []
        flags += release_predictions_if_idle(idle, stage) if batch or now[0] % 15 == 0 else []
        if stage.job_stream_idle and not idle_before:
            silences.append(now[0] - last_job)
    assert silences and min(silences) >= 60.0, f"idle {len(silences)}x, {sorted(silences)[:5]} s after a job event"
    assert keys(flags + stage.flush()) == in_time_order("spark-q0.75-m1.5", events)


def test_an_event_after_a_flush_is_stepped_at_once(events: list[Event]) -> None:
    """A flush steps everything held: the watermark stays past it, so a straggling event is not held behind
    events already stepped, waiting for a job stream that has ended."""
    tasks = [event for event in events[:2000] if not is_job_event(event)]
    late = tasks.pop(len(tasks) // 2)  # read after the flush
    stage = PredictStage(fleet("spark-q0.75-m1.5"), wait_for_job_events=True)
    stage.process_batch(tasks)
    stage.flush()
    stage.process(late)
    assert stage.pending == 0 and stage.watermark > tasks[-1].ts_us
