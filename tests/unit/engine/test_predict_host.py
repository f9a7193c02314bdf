"""The direct engine's prediction host flags what time order flags however the consumer interleaves a partition's
two topics (none twice, none missed), releases a silent job stream on its timer, and continues from a checkpoint
of the fleet alone, what it saved before its events were merged (an unreadable checkpoint is a cold start with a
warning)."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest

from producers.registry import open_trace
from streams.agents.envelope import pack
from streams.agents.idle_rules import IdleClock
from streams.core.events import Event, JobFinish, JobStart, StragglerPrediction
from streams.core.prediction.fleet import PredictorFleet
from streams.engine.hosts import Decoded, PredictHost
from streams.settings import Settings
from tests.unit.pipeline.test_predict_order import in_time_order, is_job_event, keys, skewed

TRACE = "synthetic:nodes=20,slow=2,jobs=60,checkpoints=4,seed=102"
METHOD = "select"  # the default method, and the one the poll order changes most


@dataclass(frozen=True)
class Raw:
    """The fields of kafka-python's ConsumerRecord a host reads."""

    topic: str
    partition: int
    offset: int
    key: bytes = b""
    value: bytes = b""
    timestamp: int | None = None
    headers: tuple[tuple[str, bytes], ...] = ()


class Sent:
    """Fake Outbox: what the host sent."""

    def __init__(self) -> None:
        self.records: list[tuple[str, Any]] = []

    def send(self, topic: str, key: str, record: Any) -> None:
        self.records.append((topic, record))

    def flags(self) -> list[tuple[str, str]]:
        return [(r.job_id, r.task_id) for topic, r in self.records if isinstance(r, StragglerPrediction)]


def polled(events: list[Event], skew: int) -> list[Decoded]:
    """A partition's records as a consumer may fetch them: each topic in its own order, every job event ``skew``
    task events later (negative: earlier) than its place in time order (``test_predict_order.skewed``)."""
    offsets = {"task-events": 0, "job-events": 0}
    records = []
    for event in skewed(events, skew):
        topic = "job-events" if is_job_event(event) else "task-events"
        records.append(Decoded(Raw(topic, 0, offsets[topic]), event, None))
        offsets[topic] += 1
    return records


def host(sent: Sent, **settings: Any) -> PredictHost:
    predict = PredictHost(Settings(prediction_method=METHOD, **settings), sent)  # type: ignore[arg-type]
    predict.load({0}, {})
    return predict


@pytest.fixture(scope="module")
def events() -> list[Event]:
    return list(open_trace(TRACE))


@pytest.mark.parametrize("skew", [-2000, -500, 500, 2000])  # job events fetched early, then late
def test_the_flags_of_time_order_whatever_the_interleaving(events: list[Event], skew: int) -> None:
    expected = in_time_order(METHOD, events)
    sent = Sent()
    predict = host(sent)
    records = polled(events, skew)
    for start in range(0, len(records), 500):
        predict.take(0, records[start:start + 500])
    flags = [record for topic, record in sent.records if isinstance(record, StragglerPrediction)]
    got = keys(flags + predict.slots[0].state.flush())
    twice = [flag for flag, n in Counter(flag[:3] for flag in got).items() if n > 1]
    assert not twice, f"{len(twice)} tasks flagged twice"
    assert got == expected, f"{len(set(expected) - set(got))} missing, {len(set(got) - set(expected))} extra"


def test_the_timer_releases_a_silent_job_stream(events: list[Event]) -> None:
    tasks_only = [e for e in events if not isinstance(e, (JobStart, JobFinish))]
    sent = Sent()
    predict = host(sent, wait_for_job_events=True)
    now = [0.0]
    predict.idle = IdleClock(60.0, clock=lambda: now[0])
    predict.take(0, [Decoded(Raw("task-events", 0, i), e, None) for i, e in enumerate(tasks_only)])
    predict.tick()
    assert sent.flags() == [], "a job stream may be late: the host waits"
    now[0] = 61.0  # no job event for a minute of wall-clock time, and no record of this partition unread
    predict.tick()
    assert len(sent.flags()) > 100


def test_a_checkpoint_of_the_fleet_alone_continues_where_it_was(events: list[Event],
                                                              caplog: pytest.LogCaptureFixture) -> None:
    """After an upgrade the host neither replays the log nor flags it again: the old fleet stepped every event
    its offsets cover."""
    old = PredictorFleet(METHOD)  # what a prediction worker ran before its events were merged
    for event in events[:2000]:
        old.step(event)
    records = polled(events, 0)
    offsets = {f"{r.raw.topic}:0": r.raw.offset for r in records[:2000]}
    predict = host(Sent())
    with caplog.at_level(logging.WARNING):
        predict.load({0}, {"predict:0": pack(old.snapshot(), offsets)})
    assert "cold start" not in caplog.text
    slot = predict.slots[0]
    assert slot.offsets == offsets and slot.state.fleet.running_jobs == old.running_jobs > 0
    expected = [(p.job_id, p.task_id) for e in events[2000:] if (p := old.step(e)) is not None]
    predict.take(0, records)  # the consumer sought past the offsets; records read again are skipped
    assert predict.outbox.flags() + [(p.job_id, p.task_id) for p in slot.state.flush()] == expected


def test_an_unreadable_checkpoint_is_a_cold_start_with_a_warning(events: list[Event],
                                                                caplog: pytest.LogCaptureFixture) -> None:
    stage = host(Sent()).slots[0].state
    stage.process_batch(events[:2000])
    broken = {**stage.snapshot(), "merge": {"pending": [["not an event"]]}}
    predict = PredictHost(Settings(prediction_method=METHOD), Sent())  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING):
        predict.load({0}, {"predict:0": pack(broken, {"task-events:0": 1999})})
    assert "predict:0" in caplog.text and "cold start" in caplog.text
    assert predict.slots[0].state.fleet.running_jobs == 0 and predict.slots[0].offsets == {}
    resumed = PredictHost(Settings(prediction_method=METHOD), Sent())  # type: ignore[arg-type]
    resumed.load({0}, {"predict:0": pack(stage.snapshot(), {"task-events:0": 5})})
    assert resumed.slots[0].offsets == {"task-events:0": 5}


def test_a_catch_up_behind_the_job_stream_writes_checkpoints_linear_in_what_it_read(events: list[Event]) -> None:
    """Task events read ahead of a job stream still unread pile up in the merge buffer, and every checkpoint
    writes all of them (~49 bytes each; 680 k exceed the checkpoint topic's 32 MB)."""
    tasks = [e for e in events if not is_job_event(e)] * 4  # a long catch-up: the job events come later
    predict = host(Sent(), wait_for_job_events=True)
    slot, written, checkpoints = predict.slots[0], 0, 0
    for start in range(0, len(tasks), 500):
        records = [Decoded(Raw("task-events", 0, i), e, None) for i, e in enumerate(tasks[start:start + 500], start)]
        if predict.take(0, records):
            written += slot.state.pending  # what the checkpoint holds
            checkpoints += 1
            slot.held = 0  # queued (Checkpoints.queue)
    assert slot.state.pending == len(tasks) and checkpoints >= 3
    assert written <= 2 * len(tasks), f"{checkpoints} checkpoints wrote {written} held events for {len(tasks)} read"


def test_a_strict_order_says_at_start_that_a_silent_job_stream_gets_no_flag(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        PredictHost(Settings(prediction_method=METHOD), Sent())  # type: ignore[arg-type]
        assert "IDLE_STREAM_TIMEOUT_S=0" not in caplog.text
        PredictHost(Settings(prediction_method=METHOD, idle_stream_timeout_s=0), Sent())  # type: ignore[arg-type]
    assert caplog.text.count("IDLE_STREAM_TIMEOUT_S=0") == 1 and "gets none" in caplog.text
