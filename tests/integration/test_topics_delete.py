"""`laggard topics delete`: starting over on the same broker. A second trace replayed through the topics of a first
one was ranked on top of the first one's state (its jobs, its node statistics, its blacklist versions); deleting the
deployment's topics and groups between them makes the second run publish what it publishes on a broker of its own.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from kafka.admin import KafkaAdminClient, NewTopic

from streams.kafka_clients import partition_counts
from streams.serde.topics import JOB_EVENTS, TASK_EVENTS, TOPICS
from streams.settings import Settings
from tests.integration.support import LAGGARD, decoded, fresh_broker, replay, running_worker, wait_for
from tests.integration.test_stream_pipeline import PARTITIONS, in_process, summary

FIRST = "synthetic:nodes=30,slow=3,jobs=80,seed=11"
SECOND = "synthetic:nodes=24,slow=2,jobs=80,seed=12"
DIRECT = ("--engine", "direct", "--partitions", str(PARTITIONS))


def _laggard(bootstrap: str, *args: str, app_id: str = "laggard") -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LAGGARD, *args, "--bootstrap", bootstrap], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, env={**os.environ, "LAGGARD_APP_ID": app_id})


def _topics(bootstrap: str) -> set[str]:
    client = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return set(client.list_topics()) - {"__consumer_offsets"}
    finally:
        client.close()


def test_a_second_trace_after_topics_delete_publishes_what_it_publishes_alone(tmp_path: Path) -> None:
    second_deltas, second_final, _ = in_process(SECOND)
    assert second_final.version >= 1
    with fresh_broker(tmp_path / "broker") as bootstrap:
        with running_worker(bootstrap, tmp_path / "w1", tmp_path / "first.log", *DIRECT):
            replay(bootstrap, FIRST)
            wait_for(lambda: decoded(bootstrap, "blacklist-snapshot"), bool, 180, "the first trace's blacklist",
                     tmp_path / "first.log")
            refused = _laggard(bootstrap, "topics", "delete", "--yes")
            assert refused.returncode == 1 and "consumers are running (group laggard reads " in refused.stderr
            # another app id's delete would take the registry topics the running worker reads: refused too
            other = _laggard(bootstrap, "topics", "delete", "--yes", app_id="staging")
            assert other.returncode == 1 and "group laggard reads " in other.stderr and "task-events" in other.stderr
            assert "laggard-checkpoints" in _topics(bootstrap), "nothing deleted while the worker runs"

        asked = _laggard(bootstrap, "topics", "delete")  # no terminal to ask on: says what it would delete
        assert asked.returncode == 2 and "add --yes" in asked.stderr and "laggard-checkpoints" in asked.stderr
        done = _laggard(bootstrap, "topics", "delete", "--yes")
        assert done.returncode == 0, done.stderr
        assert "consumer groups: laggard" in done.stdout
        assert not _topics(bootstrap) & ({t.name for t in TOPICS} | {"laggard-checkpoints"}), _topics(bootstrap)

        with running_worker(bootstrap, tmp_path / "w2", tmp_path / "second.log", *DIRECT):
            replay(bootstrap, SECOND)
            snapshots = wait_for(lambda: decoded(bootstrap, "blacklist-snapshot"),
                                 lambda ss: bool(ss) and ss[-1].version >= second_final.version, 180,
                                 "the second trace's final blacklist", tmp_path / "second.log")
        deltas = decoded(bootstrap, "blacklist-deltas")
    assert summary(deltas) == summary(second_deltas), "versions from 1, the second trace's nodes only"
    assert snapshots[-1].node_ids == second_final.node_ids


def test_a_mismatched_job_events_is_deleted_alone_and_created_again_with_task_events_count(tmp_path: Path) -> None:
    """The worker's refusal of mismatched partition counts says "delete one of them": this is how."""
    with fresh_broker(tmp_path / "broker") as bootstrap:
        client = KafkaAdminClient(bootstrap_servers=bootstrap)
        client.create_topics([NewTopic(TASK_EVENTS.name, 4, 1), NewTopic(JOB_EVENTS.name, 2, 1)])
        client.close()
        unknown = _laggard(bootstrap, "topics", "delete", "--yes", "job-event")
        assert unknown.returncode == 2 and "not a topic of laggard" in unknown.stderr
        done = _laggard(bootstrap, "topics", "delete", "--yes", JOB_EVENTS.name)
        assert done.returncode == 0 and "deleted 1 topic(s): job-events" in done.stdout, done.stderr
        assert _topics(bootstrap) == {TASK_EVENTS.name}
        created = _laggard(bootstrap, "topics", "create", "--partitions", "2")
        assert created.returncode == 0, created.stderr
        assert created.stderr.strip().splitlines() == [
            "warning: --partitions 2 not applied to existing task-events: a topic keeps its count (`laggard topics "
            "delete` first to start over with another)",
            "note: job-events created with the partition count of the topic read with it, not --partitions 2"]
        settings = Settings(bootstrap_servers=bootstrap)
        assert partition_counts(settings, [TASK_EVENTS.name, JOB_EVENTS.name]) == {
            TASK_EVENTS.name: 4, JOB_EVENTS.name: 4}
