"""A stream known caught up (nothing unread on the broker, as far as this worker knows) is declared idle after a short
grace of wall time, not the idle timeout (LAGGARD_CAUGHT_UP_GRACE_S, Kafka Streams' max.task.idle.ms); a stream that
is behind, or whose state this worker does not know, keeps the timeout. Faust-free: the rule
(streams.agents.idle_rules) and the direct engine's normalising host and idle tick, on a fake outbox."""

from __future__ import annotations

import time

import pytest

from producers.registry import open_trace
from streams.agents.idle_rules import Backlog, IdleClock
from streams.core.events import Event, JobFinish, JobStart, Progress, TaskRows
from streams.engine.hosts import Decoded, NormaliseHost
from streams.serde import codec
from streams.settings import Settings
from tests.unit.engine.test_predict_host import TRACE, Raw, Sent
from tests.unit.engine.test_timer_release_checkpoint import FakeConsumer, worker_without_broker

JOB = ("job-events", 0)
TASK = ("task-events", 0)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_backlog_knows_a_partition_caught_up_only_when_assigned_here_with_its_position_and_end_known() -> None:
    backlog = Backlog()
    assert not backlog.caught_up(JOB)  # not assigned here: another worker's, not known
    backlog.assign([JOB])
    assert not backlog.caught_up(JOB)  # position and end unknown
    backlog.start(JOB, 0)
    assert not backlog.caught_up(JOB)  # end unknown
    backlog.ended(JOB, 3)
    assert not backlog.caught_up(JOB)  # three records unread
    backlog.processed(JOB, 2)
    assert backlog.caught_up(JOB)
    backlog.ended(JOB, 4)  # a fetch saw one more: the end learnt before it was stale
    assert not backlog.caught_up(JOB) and backlog.behind(JOB)
    assert not backlog.caught_up()


def caught_up_clock(caught_up: set[str], grace_s: float = 0.5) -> tuple[IdleClock, Clock]:
    clock = Clock()
    behind = {"behind"}
    return IdleClock(60.0, clock=clock, behind=behind.__contains__, caught_up=caught_up.__contains__,
                     grace_s=grace_s), clock


def checks(idle: IdleClock, clock: Clock, stream: str, at: list[float], sent: list[int] | None = None) -> list[bool]:
    out = []
    for i, now in enumerate(at):
        clock.now = now
        out.append(idle.overdue(stream, True, None if sent is None else sent[i]))
    return out


def test_a_caught_up_stream_is_idle_after_the_grace_and_one_behind_or_unknown_after_the_timeout() -> None:
    idle, clock = caught_up_clock({"quiet"})
    assert checks(idle, clock, "quiet", [0.0, 0.4, 0.5]) == [False, False, True]
    assert idle.why == "caught up"
    assert checks(idle, clock, "unknown", [0.0, 0.5, 59.0, 60.0]) == [False, False, False, True]
    assert idle.why == "timeout"
    # unread records hold it off for the catch-up allowance (900 s), then the timeout runs from the last of them
    assert checks(idle, clock, "behind", [0.0, 0.5, 60.0, 899.0, 958.0, 959.0]) == [False] * 5 + [True]


def test_the_grace_runs_only_while_the_stream_is_caught_up_without_a_break() -> None:
    caught = {"s"}
    idle, clock = caught_up_clock(caught)
    assert checks(idle, clock, "s", [0.0, 0.3]) == [False, False]
    caught.clear()  # a fetch saw a record it has not processed yet
    assert checks(idle, clock, "s", [0.4]) == [False]
    caught.add("s")
    assert checks(idle, clock, "s", [0.6, 1.0, 1.1]) == [False, False, True]  # from 0.6 s, not from 0


def test_a_record_of_the_stream_starts_its_grace_over() -> None:
    idle, clock = caught_up_clock({"s"})
    assert checks(idle, clock, "s", [0.0, 0.4, 0.6, 1.0, 1.1], sent=[1, 1, 2, 2, 2]) == [False] * 4 + [True]


@pytest.mark.parametrize(("after_s", "grace_s"), [(60.0, 0.0), (0.0, 0.5)])
def test_no_grace_when_it_is_off_or_idleness_is_off(after_s: float, grace_s: float) -> None:
    clock = Clock()
    idle = IdleClock(after_s, clock=clock, caught_up=lambda _: True, grace_s=grace_s)
    assert checks(idle, clock, "s", [0.0, 1.0, 59.0]) == [False, False, False]
    assert idle.due() is None


def test_due_says_when_the_earliest_grace_ends() -> None:
    idle, clock = caught_up_clock({"a", "b"})
    assert idle.due() is None
    checks(idle, clock, "a", [1.0])
    checks(idle, clock, "b", [1.2])
    assert idle.due() == pytest.approx(1.5)
    checks(idle, clock, "unknown", [1.3])  # blocks, not known caught up: checked again a quarter grace later
    assert idle.due() == pytest.approx(1.425)


def silent_job_stream() -> list[Decoded]:
    """One partition's records: every event before 900 s, then task events to 1,300 s and no job event (so its
    task events pass the boundary of 1,200 s, which waits for the job stream)."""
    events: list[Event] = [e for e in open_trace(TRACE) if e.ts_us < 1_300_000_000]
    kept = [e for e in events if e.ts_us < 900_000_000 or not isinstance(e, (JobStart, JobFinish))]
    offsets = {"task-events": 0, "job-events": 0}
    records = []
    for event in kept:
        topic = "job-events" if isinstance(event, (JobStart, JobFinish)) else "task-events"
        records.append(Decoded(Raw(topic, 0, offsets[topic]), event, None))
        offsets[topic] += 1
    return records


class Highwaters(FakeConsumer):
    """kafka-python's ``highwater``: each partition's end as its latest fetch reported it."""

    def __init__(self, ends: dict[tuple[str, int], int]) -> None:
        self.ends = ends

    def highwater(self, tp: tuple[str, int]) -> int | None:
        return self.ends.get((tp[0], tp[1]))


def furthest_progress(sent: Sent) -> int:
    return max((record.ts_us for _, record in sent.records if isinstance(record, Progress)), default=-1)


class Forwarded(Sent):
    """The fake outbox, also taking the task events a running policy's normaliser forwards as read (``send_raw``:
    batches, one entry per event), in one list with the records, so their order against the progress marks shows."""

    def send_raw(self, topic: str, key: bytes, value: bytes, headers: object = None) -> None:
        rows = codec.decode(value)
        assert isinstance(rows, TaskRows)
        self.records += [(topic, ("forwarded", rows.source, offset)) for offset in rows.offsets]


@pytest.mark.parametrize("policy", ["pcores", "running"])
@pytest.mark.parametrize("job_stream", ["caught up", "one record unread", "task events unread", "assigned elsewhere"])
def test_the_direct_worker_ticks_when_the_grace_ends_and_releases_only_a_caught_up_job_stream(
        job_stream: str, policy: str) -> None:
    """The idle tick comes when the grace ends, not at its regular interval (15 s with the default timeout), and
    the poll in between waits no longer than that. Under ``running`` the normaliser also forwards every task event
    to the ranking, each before any progress mark past it."""
    grace_s = 0.05
    settings = Settings(caught_up_grace_s=grace_s, app_id="t", policy=policy)  # type: ignore[call-arg]
    sent = Forwarded()
    worker, _ = worker_without_broker(settings, None)  # type: ignore[arg-type]
    worker.predict = None
    worker.normalise = NormaliseHost(settings, 1, sent, behind=worker.job_stream_behind,  # type: ignore[arg-type]
                                     caught_up=worker.job_stream_caught_up)
    worker.normalise.load({0}, {})
    records = silent_job_stream()
    jobs = sum(1 for item in records if item.raw.topic == "job-events")
    worker.backlog.assign([TASK] if job_stream == "assigned elsewhere" else [TASK, JOB])
    for item in records:
        worker.backlog.processed((item.raw.topic, 0), item.raw.offset)
    worker.consumer = Highwaters({TASK: len(records) - jobs, JOB: jobs})
    worker.backlog.ended(TASK, len(records) - jobs)
    worker.backlog.ended(JOB, jobs)
    if job_stream == "one record unread":  # a fetch since the last job event processed saw one more
        worker.consumer.ends[JOB] = jobs + 1
    if job_stream == "task events unread":  # a catch-up: a job event may still be in the replayer's batch
        worker.consumer.ends[TASK] += 1
    worker._next_tick = time.monotonic() + 15.0  # the regular tick is far off

    worker.normalise.take(0, records)
    held = furthest_progress(sent)
    assert worker.normalise.slots[0].state.holds_progress and held < 1_200_000_000
    wait_ms = worker.poll_ms()
    time.sleep(grace_s + 0.02)
    worker.tick()
    if job_stream == "caught up":
        assert wait_ms <= grace_s * 1000  # the poll returns by the grace's end (0 once a loaded process is past it)
        assert furthest_progress(sent) >= 1_200_000_000  # the boundary no longer waits for the silent job stream
    else:
        assert furthest_progress(sent) == held  # behind, or not known here: the idle timeout (60 s) holds
    forwarded = [i for i, (_, record) in enumerate(sent.records) if isinstance(record, tuple)]
    if policy == "pcores":
        assert not forwarded  # P-Cores ranks summaries: no task event crosses to the ranking
        return
    assert len(forwarded) == len(records) - jobs  # every task event, the ones past the held boundary too
    marks = [(i, record.ts_us) for i, (_, record) in enumerate(sent.records) if isinstance(record, Progress)]
    task_times = [item.record.ts_us for item in records if item.raw.topic == "task-events"]
    for at, ts_us in zip(forwarded, task_times, strict=True):
        # no progress mark past a task event was sent before that event was forwarded
        assert all(mark <= ts_us for m, mark in marks if m < at)
