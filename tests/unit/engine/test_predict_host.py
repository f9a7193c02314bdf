"""The direct engine's prediction host flags each task once however the consumer interleaves a partition's two
topics, releases a silent job stream on its timer, and starts cold (with a warning) from a checkpoint of the
fleet alone, what it saved before its events were merged."""

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

TRACE = "synthetic:nodes=20,slow=2,jobs=60,checkpoints=4,seed=102"
METHOD = "spark-q0.75-m1.5"


@dataclass(frozen=True)
class Raw:
    """The fields of kafka-python's ConsumerRecord a host reads."""

    topic: str
    partition: int
    offset: int
    key: bytes = b""
    value: bytes = b""
    timestamp: int | None = None


class Sent:
    """Fake Outbox: what the host sent."""

    def __init__(self) -> None:
        self.records: list[tuple[str, Any]] = []

    def send(self, topic: str, key: str, record: Any) -> None:
        self.records.append((topic, record))

    def flags(self) -> list[tuple[str, str]]:
        return [(r.job_id, r.task_id) for topic, r in self.records if isinstance(r, StragglerPrediction)]


def polled(events: list[Event], job_lead: int) -> list[Decoded]:
    """A partition's records as a consumer may fetch them: each topic in order, job-events ``job_lead`` records
    ahead of task-events."""
    jobs = [e for e in events if isinstance(e, (JobStart, JobFinish))]
    tasks = [e for e in events if not isinstance(e, (JobStart, JobFinish))]
    order = sorted([(i - job_lead, 0, i, "job-events", e) for i, e in enumerate(jobs)]
                   + [(i * len(jobs) // len(tasks), 1, i, "task-events", e) for i, e in enumerate(tasks)])
    return [Decoded(Raw(topic, 0, offset), event, None) for _, _, offset, topic, event in order]


def host(sent: Sent, **settings: Any) -> PredictHost:
    predict = PredictHost(Settings(prediction_method=METHOD, **settings), sent)  # type: ignore[arg-type]
    predict.load({0}, {})
    return predict


@pytest.fixture(scope="module")
def events() -> list[Event]:
    return list(open_trace(TRACE))


def test_each_task_is_flagged_once_whatever_the_interleaving(events: list[Event]) -> None:
    fleet = PredictorFleet(METHOD)
    in_order = [(p.job_id, p.task_id) for e in events if (p := fleet.step(e)) is not None]
    for lead in (-300, 300):  # job events fetched after, then before, the task events of their time
        sent = Sent()
        predict = host(sent)
        records = polled(events, lead)
        for start in range(0, len(records), 500):
            predict.take(0, records[start:start + 500])
        sent_flags = sent.flags() + [(p.job_id, p.task_id) for p in predict.slots[0].state.flush()]
        assert max(Counter(sent_flags).values()) == 1
        assert sorted(sent_flags) == sorted(in_order)


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


def test_a_checkpoint_of_the_fleet_alone_is_a_cold_start_with_a_warning(events: list[Event],
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    fleet = PredictorFleet(METHOD)
    for event in events[:2000]:
        fleet.step(event)
    sent = Sent()
    predict = PredictHost(Settings(prediction_method=METHOD), sent)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING):
        predict.load({0}, {"predict:0": pack(fleet.snapshot(), {"task-events:0": 1999})})
    assert "predict:0" in caplog.text and "cold start" in caplog.text
    assert predict.slots[0].state.fleet.running_jobs == 0 and predict.slots[0].offsets == {}
    resumed = PredictHost(Settings(prediction_method=METHOD), sent)  # type: ignore[arg-type]
    resumed.load({0}, {"predict:0": pack(predict.slots[0].state.snapshot(), {"task-events:0": 5})})
    assert resumed.slots[0].offsets == {"task-events:0": 5}
