"""The one topic registry: each topic's name, key, value records, partitions and cleanup policy (SPEC 2).

>>> TASK_EVENTS.key_for(TaskStart("j1", "t1", 0, "n1", 0))
'j1'
>>> [topic.name for topic in TOPICS if topic.compacted]
['node-scores', 'blacklist-snapshot', 'node-classes']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streams.core import events as ev
from streams.core.events import TaskStart  # noqa: F401  (used by the doctest)


@dataclass(frozen=True)
class Topic:
    """A Kafka topic of laggard and the records it carries."""

    name: str
    key_field: str
    value_types: tuple[type, ...]
    partitions: int | None
    compacted: bool = False
    doc: str = ""

    def key_for(self, record: Any, cluster_id: str = "default") -> str:
        """The record's key on this topic (cluster id for the blacklist topics)."""
        if self.key_field == "cluster_id":
            return str(getattr(record, "cluster_id", cluster_id))
        if self.key_field == "original":
            raise ValueError("dead letters keep their original key")
        return str(getattr(record, self.key_field))

    def config(self) -> dict[str, str]:
        if self.compacted:
            # Keep the latest value per key; roll segments often so compaction can run on small topics.
            return {"cleanup.policy": "compact", "segment.ms": "600000", "min.cleanable.dirty.ratio": "0.1"}
        return {"cleanup.policy": "delete"}


TASK_EVENTS = Topic(
    "task-events", "job_id", (ev.TaskStart, ev.TaskCheckpoint, ev.TaskFinish), None,
    doc="task starts, checkpoints and finishes from replayers or a real cluster",
)
JOB_EVENTS = Topic("job-events", "job_id", (ev.JobStart, ev.JobFinish), None, doc="job submissions and ends")
NODE_SAMPLES = Topic(
    "node-samples", "node_id", (ev.NormalizedTask,), None, doc="finished tasks' z-values, keyed by node"
)
STRAGGLER_PREDICTIONS = Topic(
    "straggler-predictions", "job_id", (ev.StragglerPrediction,), None, doc="tasks flagged as stragglers"
)
NODE_SCORES = Topic(
    "node-scores", "node_id", (ev.NodeScore,), None, compacted=True,
    doc="each node's window statistics, when they change",
)
NODE_CLASSES = Topic(
    "node-classes", "node_id", (ev.NodeClass,), None, compacted=True,
    doc="ML-NA: each node's class in the last closed period and its probability of being weak in the next",
)
# One cluster id is one key: a single partition keeps every delta of a cluster in order.
BLACKLIST_DELTAS = Topic(
    "blacklist-deltas", "cluster_id", (ev.BlacklistDelta,), 1, doc="blacklist changes adapters follow"
)
BLACKLIST_SNAPSHOT = Topic(
    "blacklist-snapshot", "cluster_id", (ev.BlacklistSnapshot,), 1, compacted=True,
    doc="full current blacklist; adapters resynchronise from it",
)
# Internal: each partition's per-node summaries (moments per node and bucket, one record per partition and period)
# and progress, on ONE partition, so that one ranking agent sees the whole cluster and can rank a period only once
# every partition of task-events has passed it. Its volume follows the active nodes per period, not the task rate.
# Single samples (NormalizedTask) are still accepted: records written before summaries existed, and what the
# ranking gets under a detector that learns from samples. Under a detector that watches the task events themselves
# (streams.core.ranker.watches_tasks: the running-task detector) every valid task event is forwarded too, before
# the marks it leads to, in TaskRows records (one per input batch and source partition: the values the ranking takes
# of each event, in columns, with its offset there), which ties this topic's bytes, not its records, to the task
# rate (docs/architecture.md). Still read: TaskEventBatch records (the events' own bytes; workers before session 23)
# and, from workers before the batches, one record per event with its place in the header SOURCE_HEADER.
RANKING_FEED = Topic(
    "ranking-feed", "cluster_id",
    (ev.NodeSummary, ev.Progress, ev.TaskRows, ev.TaskEventBatch, ev.NormalizedTask, ev.TaskStart, ev.TaskCheckpoint,
     ev.TaskFinish), 1,
    doc="internal: per-node summaries and progress for the ranking (and task events, for a detector watching them: "
        "as TaskRows; TaskEventBatch and single ones from workers before it)",
)
SOURCE_HEADER = "laggard-source"  # on a forwarded task event: b"TOPIC:PARTITION:OFFSET" it was read at (source_header)
DEAD_LETTERS = Topic(
    "dead-letters", "original", (ev.DeadLetter,), None, doc="records that failed to decode or validate"
)

TOPICS: tuple[Topic, ...] = (
    TASK_EVENTS, JOB_EVENTS, NODE_SAMPLES, STRAGGLER_PREDICTIONS,
    NODE_SCORES, BLACKLIST_DELTAS, BLACKLIST_SNAPSHOT, RANKING_FEED, DEAD_LETTERS, NODE_CLASSES,
)
BY_NAME: dict[str, Topic] = {topic.name: topic for topic in TOPICS}
# Keyed alike (by job id) and read together: partition k of one is merged with partition k of the other, so a job's
# task events and job events meet only when both topics have the same partition count (Kafka Streams' co-partitioning).
CO_PARTITIONED: tuple[Topic, ...] = (TASK_EVENTS, JOB_EVENTS)


def topic_for(record: Any) -> Topic:
    """The topic a record type is published to."""
    for topic in TOPICS:
        if type(record) in topic.value_types:
            return topic
    raise KeyError(f"no topic carries {type(record).__name__}")


KeyFunction = Callable[[Any], str]


def source_header(topic: str, partition: int, offset: int) -> list[tuple[str, bytes]]:
    """The header of a task event forwarded to ``ranking-feed``: where it was read (the normaliser reads task-events
    and job-events, and takes a task event from either), by which the ranking drops what a restarted normaliser
    forwards again (``RankStage.observe``).

    >>> source_of(source_header("task-events", 3, 1234))
    ('task-events:3', 1234)
    """
    return [(SOURCE_HEADER, b"%s:%d:%d" % (topic.encode(), partition, offset))]


def source_of(headers: Any) -> tuple[str, int] | None:
    """The source partition (``topic:partition``) and offset a forwarded task event names (``source_header``);
    None without the header. ``headers``: kafka-python's list of (name, value) pairs, or a mapping (Faust gives
    either)."""
    pairs = headers.items() if hasattr(headers, "items") else headers or ()
    for name, value in pairs:
        if name == SOURCE_HEADER:
            source, offset = bytes(value).rsplit(b":", 1)
            return source.decode(), int(offset)
    return None
