"""Side by side: direct-engine variants on the same pre-loaded records, interleaved, in one run.

The machine is noisy and shared: a figure is only worth comparing with one measured beside it. This starts a
broker of its own, pre-loads the first ``N`` Google task/job events once (2 partitions, as the bench's Kafka
stage), measures the raw consume rate (kafka-python, no decoding), then runs each variant's ``DirectWorker`` in a
subprocess of its own (a fresh consumer group each time), ``rounds`` times in turn, until its consumer has read
every record and, for a role that ranks, the ranking has read every progress mark the worker sent (as
``worker_floor``: stopping once the inputs are read left a catch-up's last rankings in or out by how the client
happened to interleave the topics, and librdkafka interleaves them otherwise than kafka-python).
A variant is a source tree (``PYTHONPATH``: main's code beside a branch's) and optional assignments
to module constants (``streams.engine.worker.BATCH_MAX=10000``) or settings of its worker
(``LAGGARD_WORKER_ROLE=statistics``: in its environment, as written); ``TREE:EXTRA`` puts a directory of
extra packages after the tree on the path. Every record counts as read when the stage that reads most of them
(the normalising one; the predicting one of a prediction-role worker) has read it. One JSON document on
stdout: per variant the median events per wall second and per CPU second of the worker process, and their share of the
raw consume rate (wall by wall, CPU by the raw reader's CPU); progress on stderr.

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
from streams.serde import topics as registry
from streams.settings import Settings

INPUTS = frozenset({registry.TASK_EVENTS.name, registry.JOB_EVENTS.name})
# Runs in the variant's tree: only what every version of the direct engine has (DirectWorker, EVENTS_IN).
CHILD = r"""
import importlib, json, sys, time
from streams import metrics
from streams.settings import Settings
config = json.loads(sys.argv[1])
for name, value in config["patch"].items():
    module, attr = name.rsplit(".", 1)
    setattr(importlib.import_module(module), attr, value)
from streams.engine.worker import DirectWorker
settings = Settings(bootstrap_servers=config["bootstrap"], topic_partitions=config["partitions"],
                    app_id=config["app_id"], stall_timeout_s=0.0)
def so_far():
    by_reader, fed = {}, 0
    for f in metrics.EVENTS_IN.collect():
        for s in f.samples:
            if s.name.endswith("_total"):
                by_reader[s.labels["reader"]] = by_reader.get(s.labels["reader"], 0) + s.value
    for f in metrics.EVENTS_OUT.collect():
        fed += sum(s.value for s in f.samples if s.name.endswith("_total") and s.labels["topic"] == "ranking-feed")
    read = max(by_reader.get("normalise_tasks", 0), by_reader.get("predict_stragglers", 0))
    return read, fed, by_reader.get("rank_nodes", 0)
worker = DirectWorker(settings, config["partitions"])
ranks = getattr(worker, "rank", None) is not None
def done():
    read, fed, ranked = so_far()
    return read >= config["events"] and (not ranks or (fed > 0 and ranked >= fed))
# Judged in the worker's own loop, after each batch's processing (tick follows process): judged from another
# thread, it could see the last inputs read but not yet processed, the ranking level with a feed that lacked their
# marks, and stop the worker before any ranking (seen with forwarded batches, whose feed the ranking keeps up with).
tick = worker.tick
def tick_then_judge():
    tick()
    if done():
        worker.stopping = True  # the loop ends here: every feed record sent was read and processed
worker.tick = tick_then_judge
wall, cpu = time.perf_counter(), time.process_time()
worker.run()
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
sent = {s.labels["topic"]: s.value for f in metrics.EVENTS_OUT.collect() for s in f.samples
        if s.name.endswith("_total") and not s.labels["topic"].endswith("-checkpoints")}
print(json.dumps({"wall_s": wall, "cpu_s": cpu, "outputs": sent}))  # the same work: the same outputs
"""


def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    tree, *assignments = re.split(r",(?=[A-Za-z_][\w.]*=)", text)  # a comma before NAME=: JSON values keep theirs
    patch: dict[str, Any] = {}
    for assignment in assignments:
        name, _, value = assignment.partition("=")
        patch[name] = value if name.startswith("LAGGARD_") else json.loads(value)
    return tree, patch


def run_variant(bootstrap: str, tree: str, patch: dict[str, Any], events: int, app_id: str) -> dict[str, Any]:
    settings = {name: value for name, value in patch.items() if name.startswith("LAGGARD_")}
    patch = {name: value for name, value in patch.items() if name not in settings}
    config = {"bootstrap": bootstrap, "partitions": PARTITIONS, "app_id": app_id, "events": events, "patch": patch}
    paths = [str(Path(path).resolve()) for path in tree.split(":")]  # the tree, then any extra packages
    env = dict(os.environ, PYTHONPATH=":".join(paths), LAGGARD_LOG_LEVEL="WARNING", **settings)
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(config)], env=env, capture_output=True,
                          text=True, timeout=900, cwd=paths[0])
    if done.returncode != 0:
        raise RuntimeError(f"variant {tree} {patch} failed:\n{done.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
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
    figures: dict[str, list[dict[str, Any]]] = {v: [] for v in args.variants}
    with tempfile.TemporaryDirectory(prefix="laggard-ab-") as workdir, own_broker(Path(workdir)) as broker:
        own = settings.model_copy(update={"bootstrap_servers": broker.bootstrap, "topic_partitions": PARTITIONS})
        fresh_topics(own, PARTITIONS)
        produce(own, records)
        raw: list[float] = []
        raw_cpu: list[float] = []
        raw_confluent: list[float | None] = []
        raw_confluent_cpu: list[float | None] = []

        def read_raw() -> None:  # both clients' raw consume, wall and CPU of this process (the reader alone)
            started = time.process_time()
            raw.append(consume(own, len(records)))
            raw_cpu.append(len(records) / (time.process_time() - started))
            started = time.process_time()
            rate = consume_confluent(broker.bootstrap, len(records))
            raw_confluent.append(rate)
            raw_confluent_cpu.append(None if rate is None else len(records) / (time.process_time() - started))

        read_raw()
        for round_ in range(args.rounds):
            for name, (tree, patch) in zip(args.variants, variants, strict=True):
                # The pre-loaded inputs stay; every other topic is new: a run's ranking, in a group of its own,
                # would otherwise read the earlier runs' feed from its start, their progress marks and summaries
                # among it (it ranked boundaries ahead of its own data, and the delta counts varied by round).
                fresh_topics(own, PARTITIONS, keep=INPUTS)
                result = run_variant(broker.bootstrap, tree, patch, len(records), f"ab-{round_}-{time.time_ns()}")
                say(f"round {round_}: {name}: {len(records) / result['wall_s']:.0f} ev/s wall, "
                    f"{len(records) / result['cpu_s']:.0f} ev/CPU s")
                figures[name].append(result)
            read_raw()
    raw_rate, raw_cpu_rate = statistics.median(raw), statistics.median(raw_cpu)
    out: dict[str, Any] = {"events": len(records), "rounds": args.rounds, "raw_consume_per_s": raw,
                           "raw_consume_per_cpu_s": raw_cpu, "raw_consume_confluent_per_s": raw_confluent,
                           "raw_consume_confluent_per_cpu_s": raw_confluent_cpu,
                           "load_average": os.getloadavg(), "variants": {}}
    for name, results in figures.items():
        per_wall = statistics.median(len(records) / r["wall_s"] for r in results)
        per_cpu = statistics.median(len(records) / r["cpu_s"] for r in results)
        # the share in CPU seconds too: on a shared machine wall rates move with the load, CPU rates much less
        out["variants"][name] = {"per_wall_s": per_wall, "per_cpu_s": per_cpu,
                                 "share_of_raw_consume": per_wall / raw_rate,
                                 "share_of_raw_consume_cpu": per_cpu / raw_cpu_rate, "runs": results}
    sys.stdout.write(orjson.dumps(out).decode() + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
