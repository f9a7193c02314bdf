"""10,000 bad records of every kind an operator meets, interleaved with a real (synthetic) trace in task-events and
job-events: the worker never crashes, every bad record is in dead-letters with its reason and source offset, and the
final snapshot is the clean run's."""

from __future__ import annotations

import copy
import io
import math
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import fastavro
import pytest

from laggard import kafka_local
from producers.registry import open_trace
from streams import kafka_clients
from streams.core.events import DeadLetter, Event, JobFinish, JobStart, Status, TaskCheckpoint, TaskFinish
from streams.serde import codec
from streams.settings import Settings
from tests.integration.operations.support import (
    PARTITIONS,
    final_snapshot,
    get,
    own_broker,
    scrape,
    start,
    stop,
    wait_until,
)
from tests.integration.support import decoded

SPEC = "synthetic:nodes=40,slow=3,jobs=300,seed=3"
BAD = 10_000
TASKS, JOBS = "task-events", "job-events"


def _finish(rng: random.Random, **changes: object) -> TaskFinish:
    base = {"job_id": f"fuzz-{rng.randrange(10**6)}", "task_id": "t", "attempt": 0, "node_id": "node-1",
            "ts_us": 10_000_000, "duration_us": 1_000, "status": Status.SUCCEEDED}
    return TaskFinish(**{**base, **changes})  # type: ignore[arg-type]


def _unknown_status(rng: random.Random) -> bytes:
    """A TaskFinish whose status enum index is past the last symbol (what a newer, unknown writer would send)."""
    finish = codec.codec_for(TaskFinish)
    schema = copy.deepcopy(finish.schema)
    field = next(f for f in schema["fields"] if f["name"] == "status")
    field["type"]["symbols"] = [*field["type"]["symbols"], "LOST_IN_SPACE"]
    body = finish.to_dict(_finish(rng))
    body["status"] = "LOST_IN_SPACE"
    buffer = io.BytesIO()
    buffer.write(finish.header)
    fastavro.schemaless_writer(buffer, schema, body)
    return buffer.getvalue()


def _kinds() -> dict[str, tuple[str, Callable[[random.Random], bytes]]]:
    """kind -> (topic, maker of one bad value)."""
    good = codec.encode(_finish(random.Random(0)))
    return {
        "truncated-avro": (TASKS, lambda r: good[: r.randrange(3, len(good) - 1)]),
        "wrong-fingerprint": (TASKS, lambda r: codec.MAGIC + r.randbytes(8) + good[codec.HEADER_SIZE:]),
        "random-bytes": (JOBS, lambda r: r.randbytes(r.randrange(1, 300))),
        "empty": (TASKS, lambda r: b""),
        "json": (JOBS, lambda r: b'{"job_id": "j1", "ts_us": 5, "kind": "JobStart"}'),
        "negative-duration": (TASKS, lambda r: codec.encode(_finish(r, duration_us=-5))),
        "finish-before-start": (TASKS, lambda r: codec.encode(_finish(r, ts_us=10, duration_us=1_000))),
        "nan-feature": (TASKS, lambda r: codec.encode(TaskCheckpoint(
            f"fuzz-{r.randrange(10**6)}", "t", 0, "node-1", 10_000_000, 5, {"cpu_rate": math.nan}))),
        "unknown-status": (TASKS, _unknown_status),
        "negative-time-job": (JOBS, lambda r: codec.encode(JobStart(f"fuzz-{r.randrange(10**6)}", -1))),
        "negative-declared-tasks": (JOBS, lambda r: codec.encode(JobStart("fuzz-j", 5, declared_tasks=-3))),
    }


def _huge(rng: random.Random) -> bytes:
    """Half a megabyte of node name in a record that is invalid anyway (empty task id)."""
    return codec.encode(_finish(rng, task_id="", node_id="n" * 500_000))


def _publish(bootstrap: str) -> tuple[int, set[tuple[str, int, int]], Counter[str]]:
    """The trace as the replayer keys it, a bad record after every third valid one; (valid, where bad, kinds)."""
    settings = Settings(bootstrap_servers=bootstrap)
    producer = kafka_clients.producer(settings, max_request_size=2 * 1024 * 1024)
    rng, kinds = random.Random(19), _kinds()
    names = sorted(kinds)
    bad_futures, sent = [], Counter[str]()
    valid = 0

    def send_bad() -> None:
        index = len(bad_futures)
        if index % 500 == 499:
            kind, topic, value = "huge-string", TASKS, _huge(rng)
        else:
            kind = names[index % len(names)]
            topic, make = kinds[kind]
            value = make(rng)
        sent[kind] += 1
        bad_futures.append(producer.send(topic, key=f"fuzz-{rng.randrange(1000)}".encode(), value=value))

    events: list[Event] = list(open_trace(SPEC))
    every = max(1, len(events) // BAD)
    for position, event in enumerate(events):
        topic = JOBS if isinstance(event, JobStart | JobFinish) else TASKS
        producer.send(topic, key=codec.encode_key(event.job_id), value=codec.encode(event))
        valid += 1
        if position % every == 0 and len(bad_futures) < BAD:
            send_bad()
    while len(bad_futures) < BAD:
        send_bad()
    producer.flush()
    where = set()
    for future in bad_futures:
        metadata = future.get(timeout=60)
        where.add((metadata.topic, metadata.partition, metadata.offset))
    producer.close()
    return valid, where, sent


@pytest.mark.timeout(900)
def test_ten_thousand_bad_records_are_dead_letters_and_change_nothing(tmp_path: Path) -> None:
    expected = final_snapshot(SPEC)
    (metrics_port,) = kafka_local.free_ports(1)
    log = tmp_path / "worker.log"
    with own_broker(tmp_path / "broker") as broker:
        bootstrap = broker.bootstrap
        worker = start(["worker", "--bootstrap", bootstrap, "--partitions", str(PARTITIONS), "--web-port", "0",
                        "--metrics-port", str(metrics_port)], log, LAGGARD_DATA_DIR=str(tmp_path / "faust"))
        try:
            wait_until(lambda: get(metrics_port, "/livez")[0] == 200, 120, "the worker's /livez", log)
            _, where, sent = _publish(bootstrap)
            def all_letters() -> list[DeadLetter] | None:
                found = decoded(bootstrap, "dead-letters")
                return found if len(found) >= BAD else None

            letters: list[DeadLetter] = wait_until(all_letters, 600, f"{BAD} dead letters", log, every_s=5)
            snapshots = wait_until(
                lambda: [s for s in decoded(bootstrap, "blacklist-snapshot") if s.version >= expected.version],
                300, "the final snapshot", log, every_s=3)
            samples = scrape(metrics_port)
            assert worker.poll() is None, "the worker is still running"
        finally:
            stop(worker)

    assert sum(sent.values()) == BAD and len(sent) == 12, sent
    assert len(letters) == BAD, "exactly the bad records, once each"
    assert {(d.source_topic, d.partition, d.offset) for d in letters} == where, "each with its source offset"
    assert all(d.reason for d in letters)
    reasons = " ".join(d.reason for d in letters)
    for words in ("unknown writer schema fingerprint", "not Avro", "starts with nothing", "negative duration_us",
                  "finish before start", "not a finite number", "corrupt TaskFinish body", "negative ts_us",
                  "negative declared_tasks", "empty job_id or task_id"):
        assert words in reasons, words
    counted = sum(v for (name, _), v in samples.items() if name == "laggard_dead_letters_total")
    assert counted == BAD, "laggard_dead_letters_total counts them too"
    final = snapshots[-1]
    assert (final.version, final.node_ids) == (expected.version, expected.node_ids)
    assert [(e.node_id, e.n, e.mean, e.ci_low) for e in final.nodes] == [
        (e.node_id, e.n, e.mean, e.ci_low) for e in expected.nodes]
