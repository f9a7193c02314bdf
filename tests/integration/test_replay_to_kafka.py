"""Replaying to the real broker lands every event: a consumer counts what the replay summary says it sent.

The Google trace is replayed up to ``LIMIT`` events (its first ~14 % by time): kafka-python publishes roughly
5-10 thousand records per second on a small machine, so the whole trace (979,065 events) would take minutes.
The events go to topics named for this test run, so other tests writing to ``task-events`` cannot change the
count.
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import orjson
from click.testing import CliRunner

from laggard.cli import cli
from producers.registry import open_trace
from producers.sink import KafkaSink, replay
from streams import kafka_clients
from streams.serde import codec
from streams.serde.topics import JOB_EVENTS, TASK_EVENTS, Topic
from streams.settings import Settings

LIMIT = 100_000


def _consume_all(settings: Settings, topics: list[str], expected: int) -> tuple[Counter[str], list[str]]:
    """Count records per topic until ``expected`` arrived or nothing came for 15 s; collect problems."""
    consumer = kafka_clients.consumer(settings, *topics, consumer_timeout_ms=15_000)
    counts: Counter[str] = Counter()
    problems: list[str] = []
    last_ts: dict[str, int] = {}
    try:
        for message in consumer:
            counts[message.topic] += 1
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


def test_google_trace_replayed_to_kafka_lands_every_event(bootstrap: str, traces_dir: Path) -> None:
    settings = Settings(bootstrap_servers=bootstrap)
    run = uuid.uuid4().hex[:8]
    topics = (
        Topic(f"test-replay-{run}-task-events", "job_id", TASK_EVENTS.value_types, 4),
        Topic(f"test-replay-{run}-job-events", "job_id", JOB_EVENTS.value_types, 2),
    )
    kafka_clients.create_topics(settings, topics)
    trace = open_trace(f"google2011-events:{traces_dir / 'google2011-task-events'}")
    sink = KafkaSink(settings, task_topic=topics[0].name, job_topic=topics[1].name)
    result = replay(trace, sink, limit=LIMIT)
    assert result.events == trace.events == LIMIT
    assert (sink.sent, sink.failed) == (LIMIT, 0)

    counts, problems = _consume_all(settings, [t.name for t in topics], LIMIT)
    assert problems == []
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
