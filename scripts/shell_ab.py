"""CPU of the direct statistics worker's own per-record work on fixed input, without a broker (docs/scale.md,
session 10).

The first N Google events, encoded as the replayer does and split per partition and topic as the worker reads them;
then, timed in CPU seconds: decode (``streams.engine.hosts.decode``), ``NormaliseHost.take`` in batches of 5,000
with its outputs encoded for a producer that keeps nothing, and each due checkpoint packed. The job events of a
partition come LAG batches after its task events (a catch-up read the task events ~4,000 s of event time ahead;
LAG 0: in step, as live). Run it from the tree to compare (the working directory comes first on the path).

    python scripts/shell_ab.py [N] [LAG]
"""

from __future__ import annotations

import itertools
import sys
import time
from typing import Any, NamedTuple

from laggard.bench.common import google_events_spec
from laggard.bench.kafka import encoded
from producers.registry import open_trace
from streams.agents.envelope import pack
from streams.config import partition_for
from streams.engine import hosts
from streams.engine.store import Outbox
from streams.settings import Settings

BATCH = 5000


class Record(NamedTuple):  # what the hosts read of kafka-python's ConsumerRecord
    topic: str
    partition: int
    offset: int
    key: bytes
    value: bytes
    timestamp: int


class Done:
    is_done, exception = True, None

    def failed(self) -> bool:
        return False


class NoProducer:
    """Counts what it is sent and keeps nothing."""

    def __init__(self) -> None:
        self.sent = 0

    def send(self, topic: str, key: bytes | None = None, value: bytes | None = None) -> Done:
        self.sent += 1
        return Done()

    def flush(self) -> None:
        pass


def batches(settings: Settings, n: int, lag: int) -> dict[int, list[list[Record]]]:
    """Each partition's records in the batches the worker would take them in."""
    events = list(itertools.islice(open_trace(google_events_spec(settings)), n))
    streams: dict[tuple[str, int], list[Record]] = {}
    for event, (topic, key, value) in zip(events, encoded(events), strict=True):
        stream = streams.setdefault((topic, partition_for(event.job_id, 2)), [])
        stream.append(Record(topic, partition_for(event.job_id, 2), len(stream), key, value, 0))
    out = {}
    for p in (0, 1):
        tasks, jobs = streams.get(("task-events", p), []), streams.get(("job-events", p), [])
        task_batches = [tasks[i:i + BATCH] for i in range(0, len(tasks), BATCH)]
        job_batches = [jobs[i:i + BATCH] for i in range(0, len(jobs), BATCH)]
        later = itertools.zip_longest(job_batches, task_batches[lag:])
        out[p] = task_batches[:lag] + [batch for pair in later for batch in pair if batch]
    return out


def main(argv: list[str]) -> dict[str, Any]:
    n, lag = (int(argv[0]) if argv else 100_000), (int(argv[1]) if len(argv) > 1 else 10)
    settings = Settings(prediction_method="off")
    work = batches(settings, n, lag)
    producer = NoProducer()
    host = hosts.NormaliseHost(settings, 2, Outbox(producer))  # type: ignore[arg-type]
    host.load({0, 1}, {})
    packed = checkpoints = 0
    cpu = time.process_time()
    for p, ordered in work.items():
        for batch in ordered:
            if host.take(p, [hosts.decode(record, hosts.TASK_TYPES) for record in batch]):
                slot = host.slots[p]
                packed += len(pack(slot.state.snapshot(), slot.offsets))
                checkpoints += 1
                slot.held = 0
    cpu = time.process_time() - cpu
    return {"events": n, "lag": lag, "cpu_s": round(cpu, 3), "per_cpu_s": round(n / cpu), "outputs": producer.sent,
            "checkpoints": checkpoints, "packed_mb": round(packed / 1e6, 1)}


if __name__ == "__main__":
    print(main(sys.argv[1:]))
