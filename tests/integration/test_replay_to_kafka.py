"""Replaying to the real broker lands every event: the records of each partition are, in order, exactly the
key and Avro value of the events that Kafka's default partitioner puts there.

The Google trace is replayed up to ``LIMIT`` events (its first ~10 % of events, with 4 partitions, several
full batches each). The events go to topics named for this test run, so other tests writing to
``task-events`` cannot change what is read.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter, defaultdict
from itertools import islice
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from laggard.cli import cli
from producers import kafka_sink
from producers.registry import open_trace
from producers.sink import KafkaSink, replay
from streams import kafka_clients
from streams.config import partition_for
from streams.core.events import JobFinish, JobStart
from streams.serde import codec
from streams.serde.topics import JOB_EVENTS, TASK_EVENTS, Topic
from streams.settings import Settings

LIMIT = 100_000


def _consume_all(
    settings: Settings, topics: list[str], expected: int, records: dict[tuple[str, int], list[Any]] | None = None
) -> tuple[Counter[str], list[str]]:
    """Count records per topic until ``expected`` arrived or nothing came for 15 s; collect problems, and
    each partition's (key, value) in order into ``records``."""
    consumer = kafka_clients.consumer(settings, *topics, consumer_timeout_ms=15_000)
    counts: Counter[str] = Counter()
    problems: list[str] = []
    last_ts: dict[str, int] = {}
    try:
        for message in consumer:
            counts[message.topic] += 1
            if records is not None:
                records[(message.topic, message.partition)].append((message.key, message.value))
            record = codec.decode(message.value)
            if codec.decode_key(message.key) != record.job_id:
                problems.append(f"key {message.key!r} is not job {record.job_id}")
            key = f"{message.topic}/{record.job_id}"
            if record.ts_us < last_ts.get(key, 0):
                problems.append(f"{key} went back in time at offset {message.offset}")
            last_ts[key] = record.ts_us
            if sum(counts.values()) >= expected:
                break
    finally:
        consumer.close()
    return counts, problems


def _expected_records(events: list[Any], topics: tuple[Topic, Topic]) -> dict[tuple[str, int], list[Any]]:
    """What Kafka's default partitioner (murmur2 of the job id) and the codec make of ``events``, per partition."""
    expected: dict[tuple[str, int], list[Any]] = defaultdict(list)
    for event in events:
        topic = topics[1] if isinstance(event, JobStart | JobFinish) else topics[0]
        partition = partition_for(event.job_id, topic.partitions or 1)
        expected[(topic.name, partition)].append((event.job_id.encode(), codec.encode(event)))
    return expected


def test_google_trace_replayed_to_kafka_lands_every_event(
    bootstrap: str, traces_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kafka_sink, "MAX_ROUTES", 50)  # the route cache is cleared again and again on the way
    settings = Settings(bootstrap_servers=bootstrap)
    topics = _fresh_topics(settings, "replay", task_partitions=4)
    trace = open_trace(f"google2011-events:{traces_dir / 'google2011-task-events'}")
    sink = KafkaSink(settings, task_topic=topics[0].name, job_topic=topics[1].name)
    result = replay(trace, sink, limit=LIMIT)
    assert result.events == trace.events == LIMIT
    assert (sink.sent, sink.failed) == (LIMIT, 0)

    records: dict[tuple[str, int], list[Any]] = defaultdict(list)
    counts, problems = _consume_all(settings, [t.name for t in topics], LIMIT, records)
    assert problems == []
    events = list(islice(open_trace(f"google2011-events:{traces_dir / 'google2011-task-events'}"), LIMIT))
    expected = _expected_records(events, topics)
    assert sorted(records) == sorted(expected)  # the same partitions hold records ...
    for partition, found in records.items():  # ... and each holds exactly its events' records, in order
        assert found == expected[partition], partition
    job_events = trace.events - trace.tasks - sum(trace.finished.values())
    assert counts == {topics[0].name: trace.tasks + sum(trace.finished.values()), topics[1].name: job_events}


def test_replay_command_publishes_to_the_standard_topics(bootstrap: str) -> None:
    args = ["replay", "--trace", "synthetic:nodes=12,slow=2,jobs=30,seed=4", "--bootstrap", bootstrap, "--json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.stderr
    summary = orjson.loads(result.stdout)
    assert summary["kafka"]["topics"] == [TASK_EVENTS.name, JOB_EVENTS.name]
    assert summary["kafka"]["acknowledged"] == summary["events"] > 0
    assert summary["kafka"]["failed"] == 0


def test_a_paced_record_is_on_the_broker_before_the_replay_ends(bootstrap: str) -> None:
    """A slow replay (``--speed``) must not hold records until a batch fills: the sink sends a batch once it
    has waited ``linger_ms``, without a further event and without ``close()``."""
    settings = Settings(bootstrap_servers=bootstrap)
    topics = _fresh_topics(settings, "linger", task_partitions=2)
    sink = KafkaSink(settings, task_topic=topics[0].name, job_topic=topics[1].name)
    try:
        sink.send(JobStart("j1", 5))
        deadline = time.monotonic() + 10
        while sink.sent == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        on_broker = [codec.decode(r.value) for r in kafka_clients.read_to_end(settings, topics[1].name)]
    finally:
        sink.close()
    assert on_broker == [JobStart("j1", 5)]


def _fresh_topics(settings: Settings, name: str, task_partitions: int) -> tuple[Topic, Topic]:
    """A task-events and a job-events topic (2 partitions) of this test's own, keyed as the standard ones."""
    run = uuid.uuid4().hex[:8]
    topics = (
        Topic(f"test-{name}-{run}-task-events", "job_id", TASK_EVENTS.value_types, task_partitions),
        Topic(f"test-{name}-{run}-job-events", "job_id", JOB_EVENTS.value_types, 2),
    )
    kafka_clients.create_topics(settings, topics)
    return topics
