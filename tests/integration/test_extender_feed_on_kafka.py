"""The scheduler extender's live node status on the real broker: task starts, ends and node samples published to
the real topics reach the adviser's tracker, and after a stop the state file resumes it without reading twice.

Nodes are named per test run and event times lie after every other test's, so records of other tests on the
shared topics neither load these nodes nor age them out of the 5-minute window."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

from adapters.extender import LiveStatus
from adapters.extender_feed import StatusFeed
from streams import kafka_clients
from streams.core.avoidance.status import NodeStatusTracker
from streams.core.events import NormalizedTask, Status, TaskFinish, TaskStart
from streams.serde import codec
from streams.serde.topics import NODE_SAMPLES, TASK_EVENTS
from streams.settings import Settings

FAR = 10**15  # µs (about 31 years): later than any trace another test replays


def _publish(settings: Settings, records: list[object]) -> None:
    producer = kafka_clients.producer(settings)
    for record in records:
        topic = TASK_EVENTS if not isinstance(record, NormalizedTask) else NODE_SAMPLES
        producer.send(topic.name, key=codec.encode_key(topic.key_for(record)), value=codec.encode(record))
    producer.flush()
    producer.close()


def _until(check: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "the feed did not catch up in time"
        time.sleep(0.2)


def test_status_follows_the_topics_and_a_restart_resumes_from_the_state_file(bootstrap: str, tmp_path: Path) -> None:
    settings = Settings(bootstrap_servers=bootstrap)
    kafka_clients.create_topics(settings, (TASK_EVENTS, NODE_SAMPLES))
    node, job = f"it-node-{uuid.uuid4().hex[:8]}", f"it-job-{uuid.uuid4().hex[:8]}"
    starts = [TaskStart(job, str(i), 0, node, FAR + i * 1_000_000, task_type="compute", cpu_request=0.25)
              for i in range(3)]  # fmt: skip
    _publish(settings, [*starts, NormalizedTask(f"{job}-old", "0", 0, node, FAR + 2_000_000, 1_000_000, 1.2)])
    state = tmp_path / "extender-state.json"

    live = LiveStatus(NodeStatusTracker())
    feed = StatusFeed(settings, live, state, save_every_s=0.5)
    feed.start()
    try:
        _until(lambda: live.status(node, "compute").running == 3 and live.status(node, "compute").score_n == 1)
    finally:
        feed.stop()
    first = live.status(node, "compute")
    assert (first.cpu_requested, first.started_5m, first.score) == (0.75, 3, 1.2)

    _publish(settings, [TaskFinish(job, "0", 0, node, FAR + 5_000_000, 5_000_000, Status.SUCCEEDED)])
    again = LiveStatus.load(state)
    assert again is not None and again.status(node, "compute") == first  # the restart remembers what runs where
    feed = StatusFeed(settings, again, state)
    feed.start()
    try:
        _until(lambda: again.status(node, "compute").running == 2)
    finally:
        feed.stop()
    after = again.status(node, "compute")
    assert after.cpu_requested == 0.5
    assert after.started_5m == 3  # resumed from the saved offsets: the three starts were not read twice
