"""Faust's own floor: records per CPU second of agents that do nothing, beside kafka-python's raw consume.

The worker's ceiling is what Faust costs per message before the core does anything. This probe loads ``N``
pre-encoded Google events on a broker of its own (4 partitions), consumes them once with kafka-python (no
decoding) and then with Faust agents in a subprocess each: ``take`` (one agent, ``noack_take(2000, 0.05)``,
ack each event: what laggard's agents do), ``take_decode`` (the same plus the Avro decode of every record) and
``two_take`` (two such agents on the topic, as the worker has two on task-events). Rates are per CPU second of
the consuming process, so they mean the same on a loaded machine (wall-clock rates do not); one JSON document
on stdout.

    python -m laggard.bench.faust_floor [N]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

TOPIC = "faust-floor"
PARTITIONS = 4
VARIANTS = ("take", "take_decode", "two_take")
GOOGLE = "google2011-events:{traces}/google2011-task-events"


def load(bootstrap: str, n: int) -> None:
    """``n`` Avro-encoded Google events on ``TOPIC``, keyed by job."""
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    from producers.registry import open_trace
    from streams.serde import codec
    from streams.settings import Settings

    KafkaAdminClient(bootstrap_servers=bootstrap).create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50, batch_size=512 * 1024)
    trace = open_trace(GOOGLE.format(traces=Settings().traces_dir))
    for i, event in enumerate(trace):
        if i >= n:
            break
        producer.send(TOPIC, key=event.job_id.encode(), value=codec.encode(event))
    producer.flush()
    producer.close()


def raw_consume(bootstrap: str, n: int) -> dict[str, float]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, auto_offset_reset="earliest", group_id="raw",
                             enable_auto_commit=False)
    count, wall0, cpu0 = 0, 0.0, 0.0
    while count < n:
        for records in consumer.poll(1000, max_records=10_000).values():
            if count == 0:
                wall0, cpu0 = time.perf_counter(), time.process_time()
            count += len(records)
    result = {"wall_s": time.perf_counter() - wall0, "cpu_s": time.process_time() - cpu0}
    consumer.close()
    return result


def faust_agent(bootstrap: str, n: int, variant: str, datadir: str) -> None:
    """Run in a subprocess: consume ``n`` records per agent, write the times to ``datadir``/times.json, exit
    (a file: Faust's worker takes over stdout)."""
    import faust

    from streams.serde import codec

    app = faust.App(f"faust-floor-{variant}", broker=f"kafka://{bootstrap}", key_serializer="raw",
                    value_serializer="raw", consumer_auto_offset_reset="earliest", web_enabled=False,
                    datadir=datadir, topic_partitions=PARTITIONS, stream_wait_empty=False)
    topic = app.topic(TOPIC, key_type=bytes, value_type=bytes, partitions=PARTITIONS)
    agents = 2 if variant == "two_take" else 1
    state: dict[str, float] = {"n": 0}

    def count(k: int) -> None:
        if not state["n"]:
            state["wall0"], state["cpu0"] = time.perf_counter(), time.process_time()
        state["n"] += k
        if state["n"] >= n * agents:
            times = {"wall_s": time.perf_counter() - state["wall0"], "cpu_s": time.process_time() - state["cpu0"]}
            (Path(datadir) / "times.json").write_bytes(orjson.dumps(times))
            os._exit(0)

    async def body(stream: Any) -> None:
        async for batch in stream.noack_take(2000, 0.05):
            if variant == "take_decode":
                for event in batch:
                    codec.decode(event.message.value)
            for event in batch:
                await stream.ack(event)
            count(len(batch))

    for i in range(agents):
        app.agent(topic, name=f"floor{i}")(body)
    sys.argv = [sys.argv[0]]
    faust.Worker(app, loglevel="WARNING", quiet=True).execute_from_commandline()


def main(n: int) -> dict[str, Any]:
    from laggard import kafka_local

    work = Path(tempfile.mkdtemp(prefix="laggard-faust-floor-"))
    port, controller = kafka_local.free_ports(2)
    broker = kafka_local.Broker(port=port, controller_port=controller, data_dir=work / "broker")
    kafka_local.start(broker)
    try:
        load(broker.bootstrap, n)
        runs = {"raw_kafka_python": raw_consume(broker.bootstrap, n)}
        for variant in VARIANTS:
            datadir = work / variant
            datadir.mkdir()
            subprocess.run([sys.executable, "-m", "laggard.bench.faust_floor", "--agent", broker.bootstrap, str(n),
                            variant, str(datadir)], capture_output=True, timeout=1800, check=False)
            runs[variant] = orjson.loads((datadir / "times.json").read_bytes())
    finally:
        kafka_local.stop(broker)
    raw = n / runs["raw_kafka_python"]["cpu_s"]
    for run in runs.values():
        run["per_cpu_s"] = n / run["cpu_s"]
        run["per_wall_s"] = n / run["wall_s"]
        run["of_raw_per_cpu_s"] = run["per_cpu_s"] / raw
    return {"records": n, "partitions": PARTITIONS, "runs": runs, "load_average": os.getloadavg()}


if __name__ == "__main__":
    if sys.argv[1:2] == ["--agent"]:
        faust_agent(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
    else:
        print(orjson.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 60_000)).decode())
