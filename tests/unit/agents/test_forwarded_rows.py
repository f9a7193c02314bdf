"""What a normaliser forwards to a ranking that watches the task events: ``TaskRows`` records (issue 18), each
small enough for a broker, and rows a task log takes exactly as it takes the events they stand for."""
# ruff: noqa: F811  (the fixtures ``trace`` and ``expected`` are imported from the forwarding tests, then requested)

from __future__ import annotations

import itertools

import pytest

from producers.registry import open_trace
from streams.agents.records import FORWARD_MAX_BYTES, forwarded_rows
from streams.core.detection.task_log import TaskLog
from streams.core.events import (
    BlacklistDelta,
    BlacklistSnapshot,
    Event,
    Progress,
    TaskCheckpoint,
    TaskEventBatch,
    TaskFinish,
    TaskRows,
    TaskStart,
)
from streams.core.rank_stage import RankStage
from streams.core.ranking_config import RankingConfig
from streams.core.task_rows import rows_record
from streams.engine import hosts
from streams.engine.hosts import FEED_TYPES, TASK_TYPES, NormaliseHost, RankHost, decode
from streams.serde import codec
from streams.settings import Settings
from tests.unit.engine.test_predict_host import Raw
from tests.unit.engine.test_running_policy_forwarding import (  # noqa: F401 (fixtures)
    PARTITIONS,
    SETTINGS,
    Outbox,
    as_batches,
    expected,
    forwarded,
    normalised,
    ranked,
    trace,
)


@pytest.mark.parametrize("alphabet", ["a", "\U0001f600"], ids=["ascii", "four-byte utf-8"])
def test_forwarded_rows_stay_under_their_byte_budget_whatever_the_ids(alphabet: str) -> None:
    """A normaliser forwarding a long catch-up splits it into records no larger than ``FORWARD_MAX_BYTES`` (plus
    one row): a broker refuses a record over its 1 MB limit, and the producer would stop the worker."""
    long_id = alphabet * 60
    read = [("task-events", 0, offset, TaskStart(long_id, f"{long_id}{offset}", 0, long_id, 10**15 + offset))
            for offset in range(20_000)]
    records = forwarded_rows(read)
    assert len(records) > 3
    assert max(map(len, records)) <= FORWARD_MAX_BYTES + 1024
    assert [o for r in map(codec.decode, records) for o in r.offsets] == list(range(20_000)), "every row, in order"


def test_a_task_log_fed_the_forwarded_rows_holds_what_it_holds_fed_the_events() -> None:
    """A trace with checkpoints and failed attempts, observed as events by one log (as ``laggard run`` does) and as
    the decoded rows of what a normaliser forwards by another: the same buffer, table and projections at every
    boundary. Both take an event's values through ``task_row``; this holds the way there (the record's columns,
    the schema, the split into records, ``TaskRows.row``) to it (a record with two columns swapped fails it)."""
    events = [e for e in open_trace("synthetic:nodes=30,slow=2,jobs=40,checkpoints=3,fail=0.1,seed=4")
              if isinstance(e, TaskStart | TaskCheckpoint | TaskFinish)]
    assert {type(e) for e in events} == {TaskStart, TaskCheckpoint, TaskFinish}
    by_events, by_rows = TaskLog(), TaskLog()
    for event in events:
        by_events.observe(event)
    for record in map(codec.decode, forwarded_rows(("task-events", 0, i, e) for i, e in enumerate(events))):
        assert isinstance(record, TaskRows)
        for i in range(len(record.offsets)):
            by_rows.observe_row(*record.row(i))
    last, projected = max(e.ts_us for e in events), 0
    for end in itertools.chain(range(0, last, last // 7), [last + 1]):
        by_events.apply_before(end)
        by_rows.apply_before(end)
        assert by_rows.snapshot() == by_events.snapshot()
        projected += len(by_rows.projected)
    assert projected, "progress reports were taken"


def test_a_record_of_ragged_columns_goes_to_dead_letters_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``TaskRows`` whose columns are not all one value per offset cannot be read row by row: it is refused at the
    door, with its reason, and nothing of it reaches the detector."""
    monkeypatch.setattr(hosts.kafka_clients, "latest_snapshot", lambda settings, **_: None)
    ragged = TaskRows("task-events:0", (1, 2), (5, 6), (0, 0), ("j", "j"), ("t", "u"), ("n1",), (-1, -1), (0, 0))
    sent = Outbox()
    host = RankHost(Settings(**SETTINGS), PARTITIONS, sent)  # type: ignore[arg-type]
    host.load({0}, {})
    host.take([decode(Raw("ranking-feed", 0, 0, value=codec.encode(ragged)), FEED_TYPES)], lambda: None)
    assert [d.reason for d, _ in sent.on("dead-letters")] == ["task rows with columns of [1, 2] values for 2 offsets"]
    assert host.slots[0].state.stage.observed == 0


def test_a_checkpoint_without_progress_dates_the_first_boundary_as_rows_as_it_does_as_an_event() -> None:
    """Such a checkpoint gives the detector nothing, yet it is the ranking's earliest datum here: as a row (``SEEN``)
    it must move the first boundary exactly as the event does in ``laggard run``."""
    events = [TaskCheckpoint("j", "t", 0, "n1", 30_000_000, 5_000_000, {"cpu": 1.0}),
              TaskStart("j", "u", 0, "n1", 200_000_000),
              TaskCheckpoint("j", "u", 0, "n1", 260_000_000, 60_000_000, {"progress": 1e-9})]
    by_events, by_rows = (RankStage(RankingConfig(policy="running", period_us=60_000_000), 1) for _ in range(2))
    for offset, event in enumerate(events):
        by_events.observe(event, ("task-events:0", offset))
    by_rows.observe_rows(rows_record("task-events:0", list(enumerate(events))))
    assert by_rows.snapshot()["first_observed"] == 30_000_000
    assert by_rows.snapshot() == by_events.snapshot()
    marks = [Progress(0, 1, ts) for ts in (100_000_000, 400_000_000)]
    assert [[r.boundary_us for r in by_rows.progress(m)] for m in marks] == [
        [r.boundary_us for r in by_events.progress(m)] for m in marks]


def test_a_normaliser_upgraded_mid_stream_forwards_rows_over_its_predecessors_batches_and_changes_nothing(
    trace: tuple[list[Event], list[str]], expected: tuple[list[BlacklistDelta], BlacklistSnapshot],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A rolling upgrade: an old normaliser forwarded event batches up to a checkpoint and a stretch past it; the new
    one resumes from the checkpoint and forwards that stretch again as rows. The ranking drops the repeats across
    the two formats (by source and offset) and ranks as the uninterrupted run."""
    feed = normalised(trace[0]).on("ranking-feed")
    cut, back = len(feed) // 3, len(feed) // 10
    mixed = as_batches(feed[:cut], trace[0]) + feed[cut - back:]
    assert sum(isinstance(r, TaskEventBatch) for r, _ in mixed) and sum(isinstance(r, TaskRows) for r, _ in mixed)
    deltas, snapshots = ranked(mixed, monkeypatch)
    assert (deltas, snapshots[-1]) == expected


def test_forward_format_batches_sends_what_rankings_before_rows_read_and_ranks_the_same(
    trace: tuple[list[Event], list[str]], expected: tuple[list[BlacklistDelta], BlacklistSnapshot],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``LAGGARD_FORWARD_FORMAT=batches`` (for upgrading one worker at a time): the normaliser sends the events' own
    bytes in ``TaskEventBatch`` records and no rows; the ranking lists the same."""
    feed = normalised(trace[0], forward_format="batches").on("ranking-feed")
    assert any(isinstance(r, TaskEventBatch) for r, _ in feed) and not any(isinstance(r, TaskRows) for r, _ in feed)
    deltas, snapshots = ranked(feed, monkeypatch)
    assert (deltas, snapshots[-1]) == expected


def test_a_checkpoint_reported_after_a_hundred_days_projects_nothing_and_the_log_still_saves() -> None:
    """The task log packs a report's elapsed time and progress into one 64-bit field: a report past
    ``MAX_ELAPSED_US`` (~102 days) used to overflow it, and the rank checkpoint could not be written (orjson refuses
    an integer past 64 bits). Such a report now only dates the ranking (``SEEN``), as a report without progress."""
    import orjson

    from streams.core.task_rows import MAX_ELAPSED_US, SEEN, task_row

    late = TaskCheckpoint("j", "t", 0, "n1", 2 * MAX_ELAPSED_US, MAX_ELAPSED_US, {"progress": 0.5})
    assert task_row(late)[1] == SEEN
    log = TaskLog()
    log.observe(TaskStart("j", "t", 0, "n1", 1))
    log.observe(late)
    log.apply_before(3 * MAX_ELAPSED_US)
    assert orjson.loads(orjson.dumps(log.snapshot()))["projected"] == []


def test_a_ranking_fed_the_event_batches_of_a_worker_before_the_rows_lists_the_same(
    trace: tuple[list[Event], list[str]], expected: tuple[list[BlacklistDelta], BlacklistSnapshot],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A rolling upgrade: ranking-feed still holds ``TaskEventBatch`` records (the events' own bytes) from
    normalisers before session 23. The ranking reads them as before, and ranks as from rows."""
    feed = as_batches(normalised(trace[0]).on("ranking-feed"), trace[0])
    assert sum(isinstance(r, TaskEventBatch) for r, _ in feed) > 10
    deltas, snapshots = ranked(feed, monkeypatch)
    assert (deltas, snapshots[-1]) == expected


def test_a_row_the_ranking_would_refuse_goes_to_dead_letters_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A forwarded row no valid event gives (a finish before its start, a start on no node) is refused by the ranking
    host with its place and reason; the rows beside it are taken."""
    monkeypatch.setattr(hosts.kafka_clients, "latest_snapshot", lambda settings, **_: None)
    rows = TaskRows("task-events:1", (7, 8, 9), (5, 9, 9), (0, 1, 0), ("j", "j", "j"), ("t", "u", "v"),
                    ("n1", "n1", ""), (-1, 10, -1), (0, 0, 0))
    sent = Outbox()
    host = RankHost(Settings(**SETTINGS), PARTITIONS, sent)  # type: ignore[arg-type]
    host.load({0}, {})
    host.take([decode(Raw("ranking-feed", 0, 0, value=codec.encode(rows)), FEED_TYPES)], lambda: None)
    letters = [r for r, _ in sent.on("dead-letters")]
    assert [(d.source_topic, d.partition, d.offset, d.reason) for d in letters] == [
        ("task-events", 1, 8, "forwarded to the ranking: finish before start: duration_us 10 > ts_us 9"),
        ("task-events", 1, 9, "forwarded to the ranking: empty node_id")]
    assert host.slots[0].state.stage.observed == 1


def test_an_event_of_an_older_writer_is_forwarded_as_the_row_of_the_event_it_decodes_to() -> None:
    """Written by an older producer (TaskStart's previous writer schema), an event reaches the ranking as the row of
    what it decodes to: the ranking never reads an event's bytes again (issue 18)."""
    import io

    import fastavro
    from fastavro.schema import load_schema

    v1 = load_schema(str(codec.PREVIOUS_DIR / "io.laggard.TaskStart.v1.avsc"))
    buffer = io.BytesIO()
    buffer.write(codec.MAGIC + codec.fingerprint_of(v1))
    fastavro.schemaless_writer(buffer, v1, {"job_id": "j", "task_id": "t", "attempt": 0, "node_id": "n1",
                                            "ts_us": 5_000_000, "speculative": False, "task_type": ""})
    value = buffer.getvalue()
    sent = Outbox()
    host = NormaliseHost(Settings(**SETTINGS), 1, sent)  # type: ignore[arg-type]
    host.load({0}, {})
    host.take(0, [decode(Raw("task-events", 0, 41, value=value), TASK_TYPES)])
    assert forwarded(sent.on("ranking-feed")) == [(0, ("task-events:0", 41), (5_000_000, 0, "j", "t", "n1", -1, 0))]
