"""What both worker engines do with a record around the core, without Faust: refuse it (the dead letter and its
reason) or observe what the ranking published.

>>> from streams.core.events import Progress
>>> reason_to_refuse(Progress(0, 1, 5), (Progress,), "ranking-feed") is None
True
>>> reason_to_refuse(Progress(0, 1, 5), (int,), "task-events")
'unexpected Progress on task-events'
>>> letter = dead_letter("task-events", 2, 7, b"k", b"junk", "not Avro", 1_700_000_000.5)
>>> letter.partition, letter.offset, letter.ts_us
(2, 7, 1700000000500000)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import TypeVar, cast

from streams import metrics
from streams.core.events import DeadLetter, Event, TaskEvent, TaskEventBatch, TaskRows, validate
from streams.core.publication import Publication
from streams.core.rank_stage import RankStage
from streams.core.task_rows import Row, rows_record
from streams.serde import codec
from streams.serde import topics as registry

log = logging.getLogger(__name__)
R = TypeVar("R")
# A forwarded record's rows (or events) at most about this many bytes: well under a broker's default 1 MB message
# limit and a producer's default request size; ~4,000 Google task events.
FORWARD_MAX_BYTES = 256 * 1024


def reason_to_refuse(record: object, expected: tuple[type[R], ...], topic: str) -> str | None:
    """Why a decoded record may not enter an agent reading ``topic``; None when it may."""
    if not isinstance(record, expected):
        return f"unexpected {type(record).__name__} on {topic}"
    # validate() checks by type; the one check all records share is the event time (every record has ts_us).
    return validate(cast(Event, record))


def dead_letter(topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None, reason: str | None,
                timestamp_s: float | None) -> DeadLetter:
    """The dead letter of a refused record (``timestamp_s``: the broker's, in seconds), logged and counted."""
    letter = DeadLetter(topic, partition, offset, key, value or b"", reason or "invalid",
                        int((timestamp_s or 0) * 1_000_000))
    log.warning("dead letter from %s[%d]@%d: %s", topic, partition, offset, reason)
    metrics.DEAD_LETTERS.labels(topic, metrics.reason_kind(letter.reason)).inc()
    return letter


def observe(publication: Publication) -> None:
    """The gauges of a ranked window: its lag behind the wall clock, nodes seen and listed."""
    snapshot = publication.result.snapshot
    metrics.NODES_SEEN.set(snapshot.nodes_seen)
    metrics.NODES_LISTED.labels("worker").set(len(snapshot.nodes))
    metrics.PERIOD_LAG.set(time.time() - publication.result.boundary_us / 1e6)


def published(publication: Publication, cluster_id: str) -> list[tuple[str, str, object]]:
    """What a ranked window sends, in order, as (topic, key, record): its changed node scores, its node classes
    (ML-NA), and with a new version its delta, then its snapshot. Sets the window's gauges and logs a new version."""
    out: list[tuple[str, str, object]] = [(registry.NODE_SCORES.name, s.node_id, s) for s in publication.scores]
    out += [(registry.NODE_CLASSES.name, c.node_id, c) for c in publication.node_classes]
    observe(publication)
    delta, snapshot = publication.delta, publication.snapshot
    if delta is not None and snapshot is not None:
        out += [(registry.BLACKLIST_DELTAS.name, cluster_id, delta),
                (registry.BLACKLIST_SNAPSHOT.name, cluster_id, snapshot)]
        metrics.DELTA_PUBLISHED.set(delta.version)
        log.info("blacklist v%d: +%s -%s", delta.version, [e.node_id for e in delta.added],
                 [e.node_id for e in delta.removed])
    return out


class RepeatsLog:
    """Task events forwarded again (a normaliser restarted from its checkpoint, a rebalance, a producer's retry)
    and dropped by the ranking as already seen: one line a minute at most, with the count since the last line (a
    catch-up's stretch comes over many batches)."""

    def __init__(self, every_s: float = 60.0) -> None:
        self.every_s, self.count, self._next = every_s, 0, 0.0

    def dropped(self, count: int) -> None:
        self.count += count
        now = time.monotonic()
        if self.count and now >= self._next:
            log.info("%d task events forwarded to the ranking again (a restart, a rebalance or a retry): already "
                     "seen, dropped", self.count)
            self.count, self._next = 0, now + self.every_s


def forwarded_rows(read: Iterable[tuple[str, int, int, TaskEvent]]) -> list[bytes]:
    """The ``TaskRows`` records forwarding ``read``: valid task events as (topic, partition, offset, event), in the
    order read, one record per run of one source partition and at most ``FORWARD_MAX_BYTES`` of rows, in that order
    (the ranking drops a row at or before the last offset it took from the source). A row is counted as its ids'
    bytes (four a character unless all three are ASCII) and 40, the most its numbers and string lengths take, so a
    record stays well under a broker's 1 MB.

    >>> from streams.core.events import TaskStart
    >>> start = TaskStart("j", "t", 0, "n1", 5)
    >>> records = forwarded_rows([("task-events", 1, 7, start), ("task-events", 1, 9, start),
    ...                           ("job-events", 1, 4, start)])
    >>> [(r.source, r.offsets, r.kinds) for r in map(codec.decode, records)]
    [('task-events:1', (7, 9), (0, 0)), ('job-events:1', (4,), (0,))]
    """
    out: list[bytes] = []
    run: list[tuple[int, TaskEvent]] = []
    place: tuple[str, int] | None = None
    source, size = "", 0
    for topic, partition, offset, event in read:
        job, task, node = event.job_id, event.task_id, event.node_id
        weight = len(job) + len(task) + len(node)
        if not (job.isascii() and task.isascii() and node.isascii()):
            weight *= 4  # a character is at most four bytes of UTF-8
        weight += 40
        if place != (topic, partition) or size + weight > FORWARD_MAX_BYTES:
            if run:
                out.append(codec.encode(rows_record(source, run)))
            run, size = [], 0
            place, source = (topic, partition), f"{topic}:{partition}"
        run.append((offset, event))
        size += weight
    if run:
        out.append(codec.encode(rows_record(source, run)))
    return out


def forwarded(read: Iterable[tuple[str, int, int, bytes, TaskEvent]], batches: bool) -> list[bytes]:
    """What a normaliser sends the ranking of task events read as (topic, partition, offset, value, event): rows
    (``forwarded_rows``), or with ``batches`` (``LAGGARD_FORWARD_FORMAT=batches``) the events' bytes as read
    (``forwarded_batches``), which rankings before session 23 read."""
    if batches:
        return forwarded_batches((topic, partition, offset, value) for topic, partition, offset, value, _ in read)
    return forwarded_rows((topic, partition, offset, event) for topic, partition, offset, _, event in read)


def take_forwarded(stage: RankStage, record: TaskRows | TaskEventBatch, timestamp_s: float | None
                   ) -> tuple[int, list[DeadLetter]]:
    """A forwarded record to the ranking's ``stage``: how many of its task events were repeats, and the dead letters
    of those refused (``refused_rows``; ``refused_forwarded`` for a ``TaskEventBatch``, from a worker before session
    23)."""
    if isinstance(record, TaskRows):
        again, refused_at = stage.observe_rows(record)
        return again, refused_rows(record, refused_at, timestamp_s)
    again, refused = stage.observe_batch(record)
    return again, refused_forwarded(record, refused, timestamp_s)


def refused_rows(rows: TaskRows, refused: list[tuple[int, Row, str]], timestamp_s: float | None) -> list[DeadLetter]:
    """The dead letters of the rows of a forwarded ``TaskRows`` the ranking refused (``RankStage.observe_rows``): each
    under its place on its source topic, the row itself (a ``TaskRows`` of one row, exactly the values refused), the
    reason saying it came forwarded.

    >>> from streams.core.events import TaskStart
    >>> from streams.core.task_rows import rows_record
    >>> rows = rows_record("task-events:2", [(5, TaskStart("j", "t", 0, "n1", -1))])
    >>> [letter] = refused_rows(rows, [(5, rows.row(0), "negative ts_us: -1")], None)
    >>> (letter.source_topic, letter.partition, letter.offset, letter.reason), codec.decode(letter.value) == rows
    (('task-events', 2, 5, 'forwarded to the ranking: negative ts_us: -1'), True)
    """
    topic, partition = _place(rows.source)
    return [dead_letter(topic, partition, offset, codec.encode_key(row[2]),
                        codec.encode(_one_row(rows.source, offset, row)),
                        f"forwarded to the ranking: {reason}", timestamp_s)
            for offset, row, reason in refused]


def _place(source: str) -> tuple[str, int]:
    """A forwarded record's ``topic:partition`` (-1 for a partition that is not a number)."""
    topic, _, partition = source.rpartition(":")
    return topic, int(partition) if partition.isdigit() else -1


def _one_row(source: str, offset: int, row: Row) -> TaskRows:
    ts, kind, job, task, node, value, ppm = row
    return TaskRows(source, (offset,), (ts,), (kind,), (job,), (task,), (node,), (value,), (ppm,))


def forwarded_batches(read: Iterable[tuple[str, int, int, bytes]]) -> list[bytes]:
    """The ``TaskEventBatch`` records forwarding ``read`` as rankings before session 23 read them
    (``LAGGARD_FORWARD_FORMAT=batches``, for a rolling upgrade): valid task events as (topic, partition, offset,
    value as read), one record per run of one source partition and at most ``FORWARD_MAX_BYTES`` of events (an event
    larger than that in a record of its own), in the order read.

    >>> from streams.core.events import TaskStart
    >>> value = codec.encode(TaskStart("j", "t", 0, "n1", 5))
    >>> batches = forwarded_batches([("task-events", 1, 7, value), ("task-events", 1, 9, value),
    ...                              ("job-events", 1, 4, value)])
    >>> [(b.source, b.offsets) for b in map(codec.decode, batches)]
    [('task-events:1', (7, 9)), ('job-events:1', (4,))]
    """
    out: list[bytes] = []
    offsets: list[int] = []
    values: list[bytes] = []
    source, size = "", 0
    for topic, partition, offset, value in read:
        here = f"{topic}:{partition}"
        if values and (here != source or size + len(value) > FORWARD_MAX_BYTES):
            out.append(codec.encode_forwarded(source, offsets, values))
            offsets, values, size = [], [], 0
        source = here
        offsets.append(offset)
        values.append(value)
        size += len(value)
    if values:
        out.append(codec.encode_forwarded(source, offsets, values))
    return out


def refused_forwarded(batch: TaskEventBatch, refused: list[tuple[int, TaskEvent, str]], timestamp_s: float | None
                      ) -> list[DeadLetter]:
    """The dead letters of the events of a forwarded batch the ranking refused (``RankStage.observe_batch``): each
    under its place on its source topic, the event as the codec writes it, the reason saying it came forwarded.

    >>> from streams.core.events import TaskStart
    >>> bad = TaskStart("j", "t", 0, "n1", -1)
    >>> [(d.source_topic, d.partition, d.offset, d.reason) for d in refused_forwarded(
    ...     TaskEventBatch("task-events:2", (5,), (bad,)), [(5, bad, "negative ts_us: -1")], None)]
    [('task-events', 2, 5, 'forwarded to the ranking: negative ts_us: -1')]
    """
    topic, partition = _place(batch.source)
    return [dead_letter(topic, partition, offset, codec.encode_key(event.job_id),
                        codec.encode(event), f"forwarded to the ranking: {reason}", timestamp_s)
            for offset, event, reason in refused]
