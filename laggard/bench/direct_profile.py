"""Where the direct engine's time goes: the worker in this process under cProfile, on pre-loaded Google events.

Starts a broker of its own, pre-loads the first ``N`` Google task/job events (as the bench's Kafka stage does,
2 partitions), runs ``DirectWorker`` until its consumer has read them all, and prints the top functions by
cumulative and by own time on stderr, and the rates (events per wall and per CPU second, the raw consume rate of
the same records beside them) as one JSON document on stdout.

    python -m laggard.bench.direct_profile [N] [--prediction off] [--role statistics]
"""

from __future__ import annotations

import cProfile
import io
import itertools
import pstats
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

from laggard.bench.broker import fresh_topics, own_broker
from laggard.bench.common import google_events_spec, say
from laggard.bench.kafka import PARTITIONS, consume, encoded, produce
from producers.registry import open_trace
from streams import metrics
from streams.settings import Settings


def read_so_far() -> float:
    return sum(sample.value for family in metrics.EVENTS_IN.collect() for sample in family.samples
               if sample.name.endswith("_total") and sample.labels["reader"] in ("normalise_tasks", "rank_nodes"))


def main(argv: list[str]) -> None:
    n = int(argv[0]) if argv and argv[0].isdigit() else 100_000
    overrides = {"prediction_method": argv[argv.index("--prediction") + 1]} if "--prediction" in argv else {}
    if "--role" in argv:
        overrides["worker_role"] = argv[argv.index("--role") + 1]
    settings = Settings(**overrides)
    events = list(itertools.islice(open_trace(google_events_spec(settings)), n))
    records = encoded(events)
    with tempfile.TemporaryDirectory(prefix="laggard-profile-") as workdir, own_broker(Path(workdir)) as broker:
        own = settings.model_copy(update={"bootstrap_servers": broker.bootstrap, "topic_partitions": PARTITIONS,
                                          "app_id": "profile", "stall_timeout_s": 0.0})
        fresh_topics(own, PARTITIONS)
        produce(own, records)
        raw = consume(own, len(records))
        from streams.engine.worker import DirectWorker

        worker = DirectWorker(own, PARTITIONS)
        done = threading.Event()

        def stop_when_read() -> None:
            while read_so_far() < len(records):
                time.sleep(0.2)
            worker.stopping = True
            done.set()

        threading.Thread(target=stop_when_read, daemon=True).start()
        profile = cProfile.Profile()
        wall, cpu = time.perf_counter(), time.process_time()
        profile.runcall(worker.run)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    for order in ("cumulative", "tottime"):
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats(order).print_stats(30)
        say(f"top by {order}:\n{out.getvalue()}")
    sys.stdout.write(orjson.dumps({"events": len(records), "settings": overrides, "raw_consume_per_s": raw,
                                   "wall_s": wall, "cpu_s": cpu, "per_wall_s": len(records) / wall,
                                   "per_cpu_s": len(records) / cpu, "finished": done.is_set()}).decode() + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
