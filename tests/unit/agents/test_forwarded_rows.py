"""What a normaliser forwards to a ranking that watches the task events: ``TaskRows`` records (issue 18), each
small enough for a broker, and rows a task log takes exactly as it takes the events they stand for."""

from __future__ import annotations

import itertools

import pytest

from producers.registry import open_trace
from streams.agents.records import FORWARD_MAX_BYTES, forwarded_rows
from streams.core.detection.task_log import TaskLog
from streams.core.events import TaskCheckpoint, TaskFinish, TaskRows, TaskStart
from streams.serde import codec


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
