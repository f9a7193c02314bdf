"""task-events and job-events are read together, partition k with partition k: their partition counts must agree.

A producer that writes task-events before any worker ran auto-creates it with the broker's default partition count
(1 on the project's broker). Before this test existed, the worker then created job-events with its own default (4)
and ran on the mismatch without a word: a job's task events and job events never met, and no delta came.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from streams.kafka_clients import partition_counts
from streams.serde.topics import JOB_EVENTS, TASK_EVENTS
from streams.settings import Settings
from tests.integration.support import LAGGARD, fresh_broker


def _laggard(bootstrap: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env_args = ["--bootstrap", bootstrap] if args[0] == "replay" else []
    return subprocess.run([*LAGGARD, *args, *env_args], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={"PATH": "/usr/bin:/bin", "LAGGARD_BOOTSTRAP_SERVERS": bootstrap,
                               "LAGGARD_DATA_DIR": str(tmp_path / "data")})


def test_a_job_events_topic_created_after_task_events_takes_its_partition_count(tmp_path: Path) -> None:
    with fresh_broker(tmp_path / "broker") as bootstrap:
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        producer.send(TASK_EVENTS.name, key=b"j", value=b"written before any worker ran").get(timeout=30)
        producer.close()
        settings = Settings(bootstrap_servers=bootstrap)
        assert partition_counts(settings, [TASK_EVENTS.name]) == {TASK_EVENTS.name: 1}  # the broker's default

        created = _laggard(bootstrap, tmp_path, "topics", "create")
        assert created.returncode == 0, created.stderr
        assert partition_counts(settings, [TASK_EVENTS.name, JOB_EVENTS.name]) == {
            TASK_EVENTS.name: 1, JOB_EVENTS.name: 1}
        assert "warning" not in created.stderr


def test_the_worker_and_the_replayer_refuse_topics_with_different_partition_counts(tmp_path: Path) -> None:
    with fresh_broker(tmp_path / "broker") as bootstrap:
        client = KafkaAdminClient(bootstrap_servers=bootstrap)
        client.create_topics([NewTopic(TASK_EVENTS.name, 4, 1), NewTopic(JOB_EVENTS.name, 2, 1)])
        client.close()

        for args in (("worker", "--web-port", "0"), ("replay", "--trace", "synthetic:nodes=5,jobs=5")):
            result = _laggard(bootstrap, tmp_path, *args)
            assert result.returncode != 0, f"laggard {args[0]} ran on mismatched topics"
            lines = result.stderr.strip().splitlines()
            assert "Traceback" not in result.stderr
            assert any("task-events has 4 partitions and job-events has 2 partitions" in line for line in lines), \
                result.stderr
