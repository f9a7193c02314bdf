"""What the worker's prediction costs per event, in process, without a broker: stepping, and its checkpoints.

The direct worker's ``PredictHost`` steps one ``PredictStage`` per partition over batches of records and
checkpoints it every ``PREDICT_CHECKPOINT_EVERY`` records at least (``predict_checkpoint_due_after``): the
snapshot, then the envelope (``pack``: JSON, zlib). This does the same over the first ``N`` Google task/job events
(2 partitions by the job key's CRC-32, batches of 500, a checkpoint after 2,000 records or half the held events),
and prints CPU microseconds per event of each part, the flags and the checkpoints' compressed sizes (session 16).

    python -m laggard.bench.prediction_cost [N] [METHOD]
"""

from __future__ import annotations

import itertools
import sys
import time
import zlib

import orjson

from laggard.bench.common import google_events_spec
from producers.registry import open_trace
from streams.agents.envelope import pack
from streams.config import prediction_context
from streams.core.events import Event
from streams.core.prediction.fleet import PredictorFleet
from streams.core.prediction.stage import PredictStage, predict_checkpoint_due_after
from streams.settings import Settings

BATCH, EVERY, PARTITIONS = 500, 2000, 2


def measure(parts: dict[int, list[Event]], method: str, settings: Settings) -> dict[str, float]:
    cpu = {"step": 0.0, "snapshot": 0.0, "pack": 0.0}
    flags, sizes = 0, []
    for partition, events in parts.items():
        stage = PredictStage(PredictorFleet(method, prediction_context(settings)), partition,
                             wait_for_job_events=True)
        held = 0
        for index in range(0, len(events), BATCH):
            started = time.process_time()
            flags += len(stage.process_batch(events[index:index + BATCH]))
            stepped = time.process_time()
            cpu["step"] += stepped - started
            held += len(events[index:index + BATCH])
            if held >= predict_checkpoint_due_after(stage.pending, EVERY):
                held = 0
                state = stage.snapshot()
                snapped = time.process_time()
                sizes.append(len(pack(state, {})))
                cpu["snapshot"] += snapped - stepped
                cpu["pack"] += time.process_time() - snapped
        flags += len(stage.flush())
    total = sum(len(events) for events in parts.values())
    return {**{f"{part}_us": seconds / total * 1e6 for part, seconds in cpu.items()}, "events": total,
            "flags": flags, "checkpoints": len(sizes), "checkpoint_mean_kb": sum(sizes) / max(1, len(sizes)) / 1024,
            "checkpoint_max_kb": max(sizes, default=0) / 1024}


def main(argv: list[str]) -> None:
    n = int(argv[0]) if argv else 200_000
    method = argv[1] if len(argv) > 1 else "select"
    settings = Settings()
    parts: dict[int, list[Event]] = {p: [] for p in range(PARTITIONS)}
    for event in itertools.islice(open_trace(google_events_spec(settings)), n):
        parts[zlib.crc32(event.job_id.encode()) % PARTITIONS].append(event)
    sys.stdout.write(orjson.dumps({"method": method, **measure(parts, method, settings)}).decode() + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
