"""Side by side: direct-engine variants on the same pre-loaded records, interleaved, in one run.

The machine is noisy and shared: a figure is only worth comparing with one measured beside it. This starts a
broker of its own, pre-loads the first ``N`` Google task/job events once (2 partitions, as the bench's Kafka
stage), measures the raw consume rate (kafka-python, no decoding), then runs each variant's ``DirectWorker`` in a
subprocess of its own (a fresh consumer group each time), ``rounds`` times in turn, until its consumer has read
every record. A variant is a source tree (``PYTHONPATH``: main's code beside a branch's) and optional
assignments to module constants (``streams.engine.worker.BATCH_MAX=10000``) or settings of its worker
(``LAGGARD_WORKER_ROLE=statistics``: in its environment, as written); ``TREE:EXTRA`` puts a directory of
extra packages after the tree on the path. A variant is done when every record was read by the stage that
read most of them (the normalising one; the predicting one of a prediction-role worker). One JSON document on
stdout: per variant the median events per wall second and per CPU second of the worker process, and their share of the
raw consume rate; progress on stderr.

    python -m laggard.bench.direct_ab [--events N] [--rounds R] TREE[,MODULE.NAME=VALUE...] ...
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from laggard.bench.broker import fresh_topics, own_broker
from laggard.bench.common import google_events_spec, say
from laggard.bench.kafka import PARTITIONS, consume, encoded, produce
from producers.registry import open_trace
from streams.settings import Settings

# Runs in the variant's tree: only what every version of the direct engine has (DirectWorker, EVENTS_IN).
CHILD = r"""
import importlib, json, sys, threading, time
from streams import metrics
from streams.settings import Settings
config = json.loads(sys.argv[1])
for name, value in config["patch"].items():
    module, attr = name.rsplit(".", 1)
    setattr(importlib.import_module(module), attr, value)
from streams.engine.worker import DirectWorker
settings = Settings(bootstrap_servers=config["bootstrap"], topic_partitions=config["partitions"],
                    app_id=config["app_id"], stall_timeout_s=0.0)
def read_so_far():
    by_reader = {}
    for f in metrics.EVENTS_IN.collect():
        for s in f.samples:
            if s.name.endswith("_total") and s.labels["reader"] in ("normalise_tasks", "predict_stragglers"):
                by_reader[s.labels["reader"]] = by_reader.get(s.labels["reader"], 0) + s.value
    return max(by_reader.values(), default=0)
worker = DirectWorker(settings, config["partitions"])
def stop_when_read():
    while read_so_far() < config["events"]:
        time.sleep(0.05)
    worker.stopping = True
threading.Thread(target=stop_when_read, daemon=True).start()
wall, cpu = time.perf_counter(), time.process_time()
worker.run()
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
print(json.dumps({"wall_s": wall, "cpu_s": cpu}))
"""


def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    tree, *assignments = re.split(r",(?=[A-Za-z_][\w.]*=)", text)  # a comma before NAME=: JSON values keep theirs
    patch: dict[str, Any] = {}
    for assignment in assignments:
        name, _, value = assignment.partition("=")
        patch[name] = value if name.startswith("LAGGARD_") else json.loads(value)
    return tree, patch


def run_variant(bootstrap: str, tree: str, patch: dict[str, Any], events: int, app_id: str) -> dict[str, float]:
    settings = {name: value for name, value in patch.items() if name.startswith("LAGGARD_")}
    patch = {name: value for name, value in patch.items() if name not in settings}
    config = {"bootstrap": bootstrap, "partitions": PARTITIONS, "app_id": app_id, "events": events, "patch": patch}
    paths = [str(Path(path).resolve()) for path in tree.split(":")]  # the tree, then any extra packages
    env = dict(os.environ, PYTHONPATH=":".join(paths), LAGGARD_LOG_LEVEL="WARNING", **settings)
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(config)], env=env, capture_output=True,
                          text=True, timeout=900, cwd=paths[0])
    if done.returncode != 0:
        raise RuntimeError(f"variant {tree} {patch} failed:\n{done.stderr[-3000:]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def consume_confluent(bootstrap: str, total: int, timeout_s: float = 300) -> float | None:
    """Records per second of reading ``total`` records of task-events + job-events with confluent-kafka
    (librdkafka), no decoding, as ``consume`` does with kafka-python; None when it is not installed."""
    try:
        from confluent_kafka import OFFSET_BEGINNING, Consumer
        from confluent_kafka import TopicPartition as ConfluentPartition
    except ImportError:
        return None
    client = Consumer({"bootstrap.servers": bootstrap, "group.id": f"raw-{time.time_ns()}",
                       "enable.auto.commit": False})
    try:
        client.assign([ConfluentPartition(topic, p, OFFSET_BEGINNING)
                       for topic in ("task-events", "job-events") for p in range(PARTITIONS)])
        count, started = 0, time.perf_counter()
        while count < total:
            if time.perf_counter() - started > timeout_s:
                raise RuntimeError(f"read {count} of {total} records within {timeout_s:.0f} s")
            count += sum(1 for m in client.consume(num_messages=5000, timeout=0.5) if m.error() is None)
        return count / (time.perf_counter() - started)
    finally:
        client.close()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m laggard.bench.direct_ab")
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("variants", nargs="+")
    args = parser.parse_args(argv)
    variants = [parse_variant(v) for v in args.variants]
    settings = Settings()
    records = encoded(list(itertools.islice(open_trace(google_events_spec(settings)), args.events)))
    figures: dict[str, list[dict[str, float]]] = {v: [] for v in args.variants}
    with tempfile.TemporaryDirectory(prefix="laggard-ab-") as workdir, own_broker(Path(workdir)) as broker:
        own = settings.model_copy(update={"bootstrap_servers": broker.bootstrap, "topic_partitions": PARTITIONS})
        fresh_topics(own, PARTITIONS)
        produce(own, records)
        raw = [consume(own, len(records))]
        raw_confluent = [consume_confluent(broker.bootstrap, len(records))]
        for round_ in range(args.rounds):
            for name, (tree, patch) in zip(args.variants, variants, strict=True):
                result = run_variant(broker.bootstrap, tree, patch, len(records), f"ab-{round_}-{time.time_ns()}")
                say(f"round {round_}: {name}: {len(records) / result['wall_s']:.0f} ev/s wall, "
                    f"{len(records) / result['cpu_s']:.0f} ev/CPU s")
                figures[name].append(result)
            raw.append(consume(own, len(records)))
            raw_confluent.append(consume_confluent(broker.bootstrap, len(records)))
    raw_rate = statistics.median(raw)
    out: dict[str, Any] = {"events": len(records), "rounds": args.rounds, "raw_consume_per_s": raw,
                           "raw_consume_confluent_per_s": raw_confluent,
                           "load_average": os.getloadavg(), "variants": {}}
    for name, results in figures.items():
        per_wall = statistics.median(len(records) / r["wall_s"] for r in results)
        per_cpu = statistics.median(len(records) / r["cpu_s"] for r in results)
        out["variants"][name] = {"per_wall_s": per_wall, "per_cpu_s": per_cpu,
                                 "share_of_raw_consume": per_wall / raw_rate, "runs": results}
    sys.stdout.write(orjson.dumps(out).decode() + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
