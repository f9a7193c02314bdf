"""The floor under one direct worker: what consuming, decoding and producing its outputs cost with no computation.

Issue 18 asks one worker for >= 25 % of the raw consume rate. Before cutting the worker's own costs, this measures
what no worker on this stack can avoid, in one process and in CPU seconds (the machine is shared): a broker of its
own, the first ``N`` Google task/job events pre-loaded (2 partitions, as the bench's Kafka stage), then one after
another on the same records:

* ``raw``: kafka-python ``poll(max_records=5000)``, nothing else (the bench's consume floor);
* ``decode``: the same plus the Avro decode of every record (``codec.decode``, what the worker does);
* ``outputs``: the same plus encoding and sending the outputs a statistics worker really sent for these events
  (read back from its output topics: the node-samples records, one per final z-value, the summaries and
  progress marks on ranking-feed, the node scores, deltas, snapshots), spread over the input as it is
  consumed, and a flush at the end, through the worker's producer (streams.batch_producer): the floor, with no
  computation;
* ``outputs_kafka_python``: the same through the kafka-python producer the worker used before (h45, session 10);
* ``worker``: the direct statistics worker itself (``--role statistics``), in this process, over the same
  records (it is run first: its outputs are the floor's).

    python -m laggard.bench.worker_floor [N] [--rounds R] [--worker-only] [--role all]

(``--worker-only``: the worker alone, e.g. under a sampling profiler; ``--role all``: the default worker, the
statistics and the straggler prediction (``prediction_method`` at its default), for the prediction's cost beside
the statistics worker's on the same records (session 16). The floor's loops are a statistics worker's outputs
whatever the role.)

Prints one JSON document: records, output records per topic, and for each loop records per CPU second and per
wall second, and its share of ``raw``; ``digests``: per output topic, the worker's records and a hash of them.
"""

from __future__ import annotations

import hashlib
import itertools
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from laggard.bench.broker import fresh_topics, inputs_from_start, own_broker
from laggard.bench.common import google_events_spec, say
from laggard.bench.kafka import PARTITIONS, encoded, produce
from producers.registry import open_trace
from streams import kafka_clients, metrics
from streams.serde import codec
from streams.serde import topics as registry
from streams.settings import Settings

OUTPUT_TOPICS = (registry.NODE_SAMPLES, registry.RANKING_FEED, registry.NODE_SCORES, registry.NODE_CLASSES,
                 registry.BLACKLIST_DELTAS, registry.BLACKLIST_SNAPSHOT, registry.DEAD_LETTERS,
                 registry.STRAGGLER_PREDICTIONS)
Output = tuple[str, bytes | None, Any]  # topic, key, decoded record (encoded again in the loop)


def run_worker(settings: Settings, total: int, role: str = "statistics") -> dict[str, float]:
    """The direct worker of ``role`` over the pre-loaded records until it has read them all and ranked every
    progress mark it sent; its CPU and wall. (Stopping once the inputs are read, as ``direct_ab`` does, leaves the
    rankings of a catch-up's last periods in or out by chance: 0 or 28,692 node scores in two runs.)"""
    from streams.engine.worker import DirectWorker

    worker = DirectWorker(settings.model_copy(update={"worker_role": role}), PARTITIONS)
    start = _counts()

    tick = worker.tick

    def tick_then_judge() -> None:
        # In the worker's loop after each batch's processing: from a thread of its own, the check could see the last
        # inputs read but not processed, the ranking level with a feed still lacking their marks, and stop early.
        tick()
        read, fed, ranked = (now - before for now, before in zip(_counts(), start, strict=True))
        if read >= total and fed > 0 and ranked >= fed:
            worker.stopping = True  # the loop ends here: the last ranking included

    worker.tick = tick_then_judge  # type: ignore[method-assign]
    wall, cpu = time.perf_counter(), time.process_time()
    worker.run()
    return {"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall}


def _counts() -> tuple[float, float, float]:
    """Input records the normaliser read, ranking-feed records sent, and those the ranking read, so far."""
    read = ranked = fed = 0.0
    for family in metrics.EVENTS_IN.collect():
        for sample in family.samples:
            if sample.name.endswith("_total"):
                reader = sample.labels["reader"]
                read += sample.value if reader == "normalise_tasks" else 0.0
                ranked += sample.value if reader == "rank_nodes" else 0.0
    for family in metrics.EVENTS_OUT.collect():
        fed += sum(s.value for s in family.samples
                   if s.name.endswith("_total") and s.labels.get("topic") == registry.RANKING_FEED.name)
    return read, fed, ranked


def worker_outputs(settings: Settings) -> list[Output]:
    """What the worker sent, topic by topic (the order within a topic kept)."""
    return [(topic.name, record.key, codec.decode(record.value))
            for topic in OUTPUT_TOPICS for record in kafka_clients.read_to_end(settings, topic.name)]


def digests(settings: Settings) -> dict[str, str]:
    """Per output topic, ``count:in order:as a set``: hashes of every record (partition, key, value bytes), in
    each partition's order and sorted. Two trees' workers over the same records are compared by these (session
    16). Within one tree, node-samples' order and ranking-feed's progress marks vary from run to run (which
    partition's batch comes first); the deltas, snapshots and node scores do not."""
    out = {}
    for topic in OUTPUT_TOPICS:
        records = sorted(kafka_clients.read_to_end(settings, topic.name), key=lambda r: (r.partition, r.offset))
        rows = [orjson.dumps([r.partition, (r.key or b"").hex(), (r.value or b"").hex()]) for r in records]
        ordered, unordered = hashlib.sha256(b"".join(rows)), hashlib.sha256(b"".join(sorted(rows)))
        out[topic.name] = f"{len(records)}:{ordered.hexdigest()[:12]}:{unordered.hexdigest()[:12]}"
    return out


def interleaved(outputs: list[Output], total: int) -> list[list[Output]]:
    """``outputs`` spread over ``total`` input records: element i is sent after consuming input record i."""
    per: list[list[Output]] = [[] for _ in range(total)]
    for index, output in enumerate(outputs):
        per[min(total - 1, index * total // max(1, len(outputs)))].append(output)
    return per


def consume_loop(settings: Settings, total: int, each: Callable[[Any, int], None] | None) -> dict[str, float]:
    """Read ``total`` input records from the beginning, calling ``each(record, index)``; CPU and wall seconds."""
    with inputs_from_start(settings) as client:
        count = 0
        wall, cpu = time.perf_counter(), time.process_time()
        while count < total:
            for records in client.poll(timeout_ms=500, max_records=5000).values():
                if each is not None:
                    for record in records:
                        each(record, count)
                        count += 1
                else:
                    count += len(records)
        return {"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall}


def outputs_loop(settings: Settings, total: int, per: list[list[Output]], client: str = "batch") -> dict[str, float]:
    """Consume, decode, and encode and send each record's share of the worker's outputs; flush at the end.

    ``client``: ``batch``, the worker's producer (streams.batch_producer, its options); ``kafka-python``, the
    kafka-python producer it used before (session 10, h45), for the comparison in one run."""
    from streams.batch_producer import BatchProducer
    from streams.engine.keys import RememberingPartitioner
    from streams.engine.worker import OUTPUT_OPTIONS, PROMPT_TOPICS

    # the kafka-python producer as the worker had it (linger 50 ms, 1 MB batches, no compression, keys hashed once)
    producer: Any = (BatchProducer(settings, **OUTPUT_OPTIONS, prompt_topics=PROMPT_TOPICS) if client == "batch"
                     else kafka_clients.producer(settings, linger_ms=50, batch_size=1024 * 1024, compression_type=None,
                                                 partitioner=RememberingPartitioner()))
    decode, encode, send = codec.decode, codec.encode, producer.send

    def each(record: Any, index: int) -> None:
        decode(record.value)
        for topic, key, value in per[index]:
            send(topic, key=key, value=encode(value))

    try:
        result = consume_loop(settings, total, each)
        wall, cpu = time.perf_counter(), time.process_time()
        producer.flush()
        measured = {"cpu_s": result["cpu_s"] + time.process_time() - cpu,
                    "wall_s": result["wall_s"] + time.perf_counter() - wall}
    finally:
        producer.close()
    if getattr(producer, "failed", 0):  # the batch producer counts them (kafka-python's flush raised instead)
        raise SystemExit(f"worker floor: {producer.failed:,} outputs not acknowledged ({producer.first_error}): "
                         "the floor would count work the broker never took")
    return measured


def main(argv: list[str]) -> None:
    n = int(argv[0]) if argv and argv[0].isdigit() else 100_000
    rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else 2
    role = argv[argv.index("--role") + 1] if "--role" in argv else "statistics"
    settings = Settings(prediction_method="off") if role == "statistics" else Settings()
    records = encoded(list(itertools.islice(open_trace(google_events_spec(settings)), n)))
    with tempfile.TemporaryDirectory(prefix="laggard-floor-") as workdir, own_broker(Path(workdir)) as broker:
        own = settings.model_copy(update={"bootstrap_servers": broker.bootstrap, "topic_partitions": PARTITIONS,
                                          "app_id": "floor", "stall_timeout_s": 0.0})
        fresh_topics(own, PARTITIONS)
        produce(own, records)
        say(f"worker floor: the {role} worker over {len(records)} records")
        loops: dict[str, list[dict[str, float]]] = {"worker": [run_worker(own, len(records), role)]}
        if "--worker-only" in argv:
            rounds = 0
        outputs = worker_outputs(own)
        topic_digests = digests(own)
        per = interleaved(outputs, len(records))
        for _ in range(rounds):
            for name, loop in (("raw", lambda: consume_loop(own, len(records), None)),
                               ("decode", lambda: consume_loop(own, len(records), lambda r, i: codec.decode(r.value))),
                               ("outputs", lambda: outputs_loop(own, len(records), per)),
                               ("outputs_kafka_python", lambda: outputs_loop(own, len(records), per, "kafka-python"))):
                say(f"worker floor: {name}")
                loops.setdefault(name, []).append(loop())
    sys.stdout.write(orjson.dumps({**report(len(records), outputs, loops), "digests": topic_digests}).decode() + "\n")


def report(total: int, outputs: list[Output], loops: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    """Records per CPU and per wall second of each loop (the best round), and each as a share of ``raw``."""
    best = {name: min(runs, key=lambda run: run["cpu_s"]) for name, runs in loops.items()}
    per_cpu = {name: total / run["cpu_s"] for name, run in best.items()}
    raw = per_cpu.get("raw")
    return {"records": total, "outputs": dict(Counter(topic for topic, _, _ in outputs)),
            "per_cpu_s": per_cpu, "per_wall_s": {name: total / run["wall_s"] for name, run in best.items()},
            "of_raw_cpu": {name: rate / raw for name, rate in per_cpu.items()} if raw else None,
            "rounds": loops}


if __name__ == "__main__":
    main(sys.argv[1:])
