"""Every flag and the meaning of every prediction checkpoint of a run, as one file: to hold two trees' predictions
equal (session 16, as ``ranking_digest`` holds their rankings).

A change meant to make the prediction cheaper must change no flag and no learned state. This steps one
``PredictStage`` per partition (2, by the job key's CRC-32, as a worker's stage sees its partition) over a trace
in batches of 500, as the direct worker's ``PredictHost`` does, and writes each batch's flags and, every 8
batches, the checkpoint: the merge buffer as saved, and the fleet's cluster state and every job's predictor
unpickled into plain data (floats as hex, objects by their attributes), so two builds that pickle the same state
differently still compare equal. The run then continues from that checkpoint restored into a new stage, as a
restarted worker would. Run it from each tree and ``cmp`` the files (with ``PYTHONHASHSEED=0``: sets are listed
sorted, but a job's pickled state may hold one in its hash order):

    python -m laggard.bench.prediction_digest SPEC LIMIT OUT [METHOD]
    PYTHONPATH=OTHER_TREE python -P laggard/bench/prediction_digest.py ...  # a tree without this module
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import pickle
import sys
import zlib
from pathlib import Path
from typing import Any

from producers.registry import open_trace
from streams.config import prediction_context
from streams.core.events import Event
from streams.core.prediction.fleet import PredictorFleet
from streams.core.prediction.stage import PredictStage
from streams.settings import Settings

BATCH = 500
PARTITIONS = 2


def plain(x: Any) -> Any:
    """Learned state as comparable data: floats exact (hex), sets sorted, objects by their attributes."""
    if isinstance(x, dict):
        return {str(k): plain(v) for k, v in sorted(x.items(), key=lambda kv: str(kv[0]))}
    if isinstance(x, list | tuple) or type(x).__name__ == "deque":
        return [plain(v) for v in x]
    if isinstance(x, set | frozenset):
        return sorted(map(str, x))
    if isinstance(x, float):
        return x.hex()
    if isinstance(x, int | str | bool) or x is None:
        return x
    if callable(x) and not hasattr(x, "__dict__"):
        return repr(x)
    if hasattr(x, "__getstate__") and (state := x.__getstate__()) is not None:
        return [type(x).__name__, plain(state)]
    state = vars(x) if hasattr(x, "__dict__") else x.__reduce_ex__(4)[1:3]
    return [type(x).__name__, plain(state)]


def unpickled(envelope: dict[str, Any] | None) -> Any:
    return None if envelope is None else plain(pickle.loads(base64.b64decode(envelope["state"])))


def checkpoint_line(stage: PredictStage, partition: int, index: int) -> tuple[str, dict[str, Any]]:
    state = stage.snapshot()
    fleet = state["fleet"]
    line = json.dumps(["checkpoint", partition, index, state["merge"], unpickled(fleet["cluster"]),
                       [[job, last, unpickled(envelope)] for job, last, envelope in fleet["jobs"]]], sort_keys=True)
    return line, json.loads(json.dumps(state))  # what the worker's table holds


def partition_lines(events: list[Event], partition: int, method: str, settings: Settings) -> list[str]:
    def fresh() -> PredictStage:
        return PredictStage(PredictorFleet(method, prediction_context(settings)), partition, wait_for_job_events=True)

    stage, lines = fresh(), []
    for index in range(0, len(events), BATCH):
        flags = stage.process_batch(events[index:index + BATCH])
        lines.append(json.dumps(["flags", partition, index, [repr(flag) for flag in flags]]))
        if (index // BATCH) % 8 == 7:
            line, saved = checkpoint_line(stage, partition, index)
            lines.append(line)
            stage = fresh()
            stage.restore(saved)  # continue from the checkpoint, as a restarted worker would
    lines.append(json.dumps(["flush", partition, [repr(flag) for flag in stage.flush()]]))
    return lines


def digest(spec: str, limit: int, method: str = "select") -> bytes:
    settings = Settings()
    parts: dict[int, list[Event]] = {p: [] for p in range(PARTITIONS)}
    for event in itertools.islice(open_trace(spec), limit):
        parts[zlib.crc32(event.job_id.encode()) % PARTITIONS].append(event)
    lines = [line for p, events in parts.items() for line in partition_lines(events, p, method, settings)]
    return "\n".join(lines).encode() + b"\n"


def main(argv: list[str]) -> None:
    spec, limit, out = argv[0], int(argv[1]), Path(argv[2])
    data = digest(spec, limit, argv[3] if len(argv) > 3 else "select")
    out.write_bytes(data)
    flags = data.count(b"StragglerPrediction(")
    checkpoints = data.count(b'["checkpoint"')
    sys.stdout.write(f"{out} {flags} flags {checkpoints} checkpoints sha256 {hashlib.sha256(data).hexdigest()[:16]}\n")


if __name__ == "__main__":
    main(sys.argv[1:])
