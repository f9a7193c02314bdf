"""ML-NA on a real broker: the worker with policy mlna publishes node-classes, readable with the .avsc alone."""

from __future__ import annotations

import io
from pathlib import Path

import fastavro
import pytest

from streams.kafka_clients import read_to_end
from streams.serde import codec
from streams.settings import Settings
from tests.integration.support import decoded, fresh_broker, replay, running_worker, wait_for

SPEC = "drifting:nodes=40,days=4,load=60,persistent=0.1,episodic=0,intermittent=0,seed=3"
# A "day" of 6 h, a "month" of one day, a window of one sub-period: three periods close in the four days.
ENV = {"LAGGARD_POLICY": "mlna", "LAGGARD_MLNA_SUB_PERIOD_S": "21600", "LAGGARD_MLNA_PERIOD": "4",
       "LAGGARD_WINDOW_SIZE_S": "21600", "LAGGARD_MAX_FRACTION": "0.3"}
DAY_US = 86_400_000_000


def plain_avro(value: bytes) -> dict:
    """Decode one record with fastavro and schemas/io.laggard.NodeClass.avsc alone: the single-object header
    (C3 01, the CRC-64-AVRO fingerprint of the writer schema) checked, then the body."""
    schema = fastavro.schema.load_schema(str(Path(codec.SCHEMA_DIR) / "io.laggard.NodeClass.avsc"))
    canonical = fastavro.schema.to_parsing_canonical_form(schema)
    assert value[:2] == b"\xc3\x01"
    assert value[2:10].hex() == fastavro.schema.fingerprint(canonical, "CRC-64-AVRO")
    return fastavro.schemaless_reader(io.BytesIO(value[10:]), schema, None)


def test_the_mlna_worker_publishes_node_classes_plain_avro_can_read(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    persistent = ["node-06", "node-10", "node-13", "node-16"]  # the generator's truth for seed 3 (4 of 40)
    log = tmp_path / "worker.log"

    def third_day(records: list) -> set[str]:
        return {row["node_id"] for row in map(plain_avro, (r.value for r in records))
                if row["period_start_us"] == 2 * DAY_US}

    with fresh_broker(tmp_path / "broker") as bootstrap, running_worker(bootstrap, tmp_path, log):
        replay(bootstrap, SPEC)
        records = wait_for(lambda: list(read_to_end(Settings(bootstrap_servers=bootstrap), "node-classes")),
                           # a period's classes are sent node by node, keyed over the topic's 4 partitions whose
                           # batches reach the broker apart: 38 of the day's 40 (in-process) may be read while a
                           # persistent node's class is still on its way, so wait for the classes asserted on too
                           lambda rs: len(nodes := third_day(rs)) >= 38 and nodes >= set(persistent),
                           240, "node classes of three closed periods", log)
        # delta v2 (it lists node-06) is sent after the third day's classes, on its own topic: one fresh-clone
        # run read the deltas between the two and found v1 alone
        deltas = wait_for(lambda: decoded(bootstrap, "blacklist-deltas"), lambda ds: len(ds) >= 2, 60,
                          "the blacklist deltas of the second and third day", log)

    rows = [plain_avro(r.value) for r in records]
    assert all(r.key.decode() == row["node_id"] for r, row in zip(records, rows, strict=True))  # compaction key
    assert {row["period_start_us"] for row in rows} >= {0, DAY_US, 2 * DAY_US}
    last = {row["node_id"]: row for row in rows if row["period_start_us"] == 2 * DAY_US}
    assert len(last) >= 38  # every node that ran a task that day
    assert all(last[n]["weak"] and last[n]["predicted_weak"] and last[n]["weak_probability"] >= 0.4
               for n in persistent)  # fmt: skip
    assert sum(row["predicted_weak"] for row in last.values()) <= 12
    assert last["node-10"]["reason"].startswith("weak cluster ")
    assert {d.policy for d in deltas} == {"mlna"}
    assert [d.version for d in deltas] == list(range(1, len(deltas) + 1))
    assert set(persistent) <= {e.node_id for d in deltas for e in d.added}
