"""One fixture per schema, pinned to the exact bytes on the wire.

A change of these bytes breaks every consumer that decodes by fingerprint: if it is intended, regenerate with
`LAGGARD_REGEN_GOLDEN=1 pytest tests/unit/serde/test_golden_bytes.py` and say why in the commit.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streams.core import events as ev
from streams.serde import codec

GOLDEN = Path(__file__).parent / "golden"
ENTRY = ev.BlacklistEntry("node-17", 0, 12, 1.25, 0.5, 0.93, 1.57, "slow: ci_low 0.93 > floor 0.25")
FIXTURES: dict[type, object] = {
    ev.TaskStart: ev.TaskStart("job-1", "7", 1, "node-17", 1_000_000, True, "map"),
    ev.TaskCheckpoint: ev.TaskCheckpoint("job-1", "7", 1, "node-17", 2_000_000, 1_000_000, {"cpu": 0.5, "ev": 1.0}),
    ev.TaskFinish: ev.TaskFinish("job-1", "7", 1, "node-17", 3_000_000, 2_000_000, ev.Status.EVICTED),
    ev.JobStart: ev.JobStart("job-1", 0, 120),
    ev.JobFinish: ev.JobFinish("job-1", 9_000_000),
    ev.NormalizedTask: ev.NormalizedTask("job-1", "7", 1, "node-17", 3_000_000, 2_000_000, 1.5, False, 9_000_000),
    ev.Progress: ev.Progress(3, 4, 300_000_000),
    ev.NodeMoments: ev.NodeMoments("node-17", 300_000_000, 12, 0.75, 3.5),
    ev.NodeSummary: ev.NodeSummary(3, 4, 600_000_000, 300_000_000,
                                   (ev.NodeMoments("node-17", 300_000_000, 12, 0.75, 3.5),),
                                   (ev.NodeMoments("node-3", 0, 2, -0.5, 0.125),)),
    ev.TaskEventBatch: ev.TaskEventBatch("task-events:3", (41, 43), (
        ev.TaskStart("job-1", "7", 1, "node-17", 1_000_000, True, "map"),
        ev.TaskFinish("job-1", "7", 1, "node-17", 3_000_000, 2_000_000, ev.Status.SUCCEEDED))),
    ev.TaskRows: ev.TaskRows("task-events:3", (41, 43, 44), (1_000_000, 2_000_000, 3_000_000), (0, 3, 1),
                             ("job-1",) * 3, ("7",) * 3, ("node-17",) * 3, (-1, 1_000_000, 2_000_000), (0, 500_000, 0)),
    ev.NodeScore: ev.NodeScore("node-17", 0, 3_600_000_000, 12, 1.25, 0.5, 0.93, 1.57, 1.1),
    ev.StragglerPrediction: ev.StragglerPrediction(
        "job-1", "7", 1, "node-17", 2_000_000, 1_000_000, 4e6, 8e6, 6e6, 0.5, "nurd"
    ),
    ev.NodeClass: ev.NodeClass("node-17", 0, 86_400_000_000, 4, 2, 2, True, 0.91, True, "forest", 96, 0.84, 1.3,
                               5, 7, "weak cluster 2 of 4 in 5 of the last 7 days, predicted weak next period "
                               "with p = 0.91"),
    ev.BlacklistEntry: ENTRY,
    ev.RemovedEntry: ev.RemovedEntry("node-3", "no recent evidence"),
    ev.BlacklistDelta: ev.BlacklistDelta(
        "prod", 42, 3_600_000_000, "pcores", 0, 3_600_000_000, (ENTRY,), (ev.RemovedEntry("node-3", "recovered"),),
        40,
    ),
    ev.BlacklistSnapshot: ev.BlacklistSnapshot("prod", 42, 3_600_000_000, "pcores", 0, 3_600_000_000, (ENTRY,), 40),
    ev.DeadLetter: ev.DeadLetter("task-events", 2, 1234, b"job-1", b"\x00garbage", "not Avro", 5_000_000),
}


@pytest.mark.parametrize("record_type", codec.RECORD_TYPES, ids=lambda t: t.__name__)
def test_golden_bytes(record_type: type) -> None:
    path = GOLDEN / f"{record_type.__name__}.hex"
    data = codec.encode(FIXTURES[record_type])
    if os.environ.get("LAGGARD_REGEN_GOLDEN"):
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(data.hex() + "\n")
    assert data.hex() == path.read_text().strip()
    assert codec.decode(bytes.fromhex(path.read_text().strip())) == FIXTURES[record_type]
    if record_type is ev.TaskEventBatch:  # what a normaliser writes: the events' bytes as read, framed
        batch = FIXTURES[record_type]
        assert isinstance(batch, ev.TaskEventBatch)
        values = [codec.encode(e) for e in batch.events]
        assert codec.encode_forwarded(batch.source, list(batch.offsets), values) == data


@pytest.mark.parametrize("record_type", [ev.BlacklistDelta, ev.BlacklistSnapshot], ids=lambda t: t.__name__)
def test_bytes_of_the_previous_schema_version_still_decode(record_type: type) -> None:
    """Records written before `nodes_seen` existed (compacted topics keep them) decode with its default."""
    import dataclasses

    old = bytes.fromhex((GOLDEN / "previous" / f"{record_type.__name__}.v1.hex").read_text().strip())
    assert old[:10] != codec.codec_for(record_type).header, "the old writer had another fingerprint"
    assert codec.decode(old) == dataclasses.replace(FIXTURES[record_type], nodes_seen=0)
