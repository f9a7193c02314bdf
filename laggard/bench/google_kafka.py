"""Google 2011 (every part under LAGGARD_TRACES_DIR) through Kafka and one worker, against ``laggard run``.

Issue 18's acceptance: the whole trace replayed through Kafka and the worker to the final snapshot in under
two minutes, and that snapshot equal to the in-process runner's on the same trace. This probe computes the
in-process result first (``LocalPipeline`` with the worker's partitions and live semantics: no end-of-trace
flush, as ``laggard run`` publishes what a live worker does), then starts a broker of its own, one worker of
the chosen engine, and ``laggard replay`` of the trace into it, and waits for the snapshot of the in-process
result's final version. Times are from the replay's start to the broker's append time of that snapshot. One
JSON document on stdout; progress on stderr.

    python -m laggard.bench.google_kafka [direct|faust] [--prediction off] [--role statistics] [--workers N]
                                         [--expected FILE]

``--role statistics`` runs the direct worker without prediction (``laggard worker --role statistics``: the
prediction role deployed apart), which the snapshot does not depend on. ``--workers N`` starts N workers in one
group (the 4 input partitions shared among them, the ranking on whichever holds ranking-feed's partition): the
worker's CPU, not the replay's, decides the time, and the product scales out by partitions.

With ``--expected FILE`` the in-process result is kept in FILE (and read from it when it exists), so the
in-process run can be done once, ahead, e.g. ``--in-process-only --expected FILE``.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import orjson
from kafka.structs import TopicPartition

from laggard import kafka_local
from laggard.bench.broker import LAGGARD, Workers, fresh_topics, own_broker
from laggard.bench.common import cpu_seconds, google_events_spec, say
from producers.registry import open_trace
from streams import kafka_clients
from streams.core.events import BlacklistSnapshot
from streams.local import LocalPipeline
from streams.serde import codec
from streams.serde import topics as registry
from streams.settings import Settings

PARTITIONS = 4
TIMEOUT_S = 1800.0


def in_process(settings: Settings, spec: str) -> tuple[BlacklistSnapshot, float, int]:
    """The in-process final snapshot, its wall time and the number of events."""
    started = time.perf_counter()
    trace = open_trace(spec)
    pipeline = LocalPipeline(settings, partitions=PARTITIONS)
    list(pipeline.run(trace, finish=False))
    return pipeline.blacklist, time.perf_counter() - started, pipeline.counts.events


class SnapshotWatch:
    """(broker append time ms, snapshot) of the records on blacklist-snapshot, read by one consumer kept open.

    Opening a consumer and reading the topic from its start on every look (what this bench did before session 10)
    cost the bench's process CPU every 2 s, on the cores the worker needs; the measured time is the broker's
    append time of the snapshot either way, so neither the look's period nor its cost enters the figure."""

    def __init__(self, settings: Settings) -> None:
        self._client = kafka_clients.consumer(settings)
        topic = registry.BLACKLIST_SNAPSHOT.name
        partitions = [TopicPartition(topic, p) for p in sorted(self._client.partitions_for_topic(topic) or ())]
        self._client.assign(partitions)
        self._client.seek_to_beginning(*partitions)

    def new(self, wait_s: float) -> list[tuple[int, BlacklistSnapshot]]:
        """The snapshots appended since the last call, waiting up to ``wait_s`` for the first."""
        found = []
        for records in self._client.poll(timeout_ms=int(wait_s * 1000)).values():
            found += [(record.timestamp, codec.decode(record.value)) for record in records]
        return found

    def close(self) -> None:
        self._client.close()


def same(a: BlacklistSnapshot, b: BlacklistSnapshot) -> bool:
    return (a.version, a.node_ids) == (b.version, b.node_ids) and [
        (e.node_id, e.n, e.mean, e.ci_low) for e in a.nodes] == [(e.node_id, e.n, e.mean, e.ci_low) for e in b.nodes]


def through_kafka(workdir: Path, settings: Settings, spec: str, engine: str, expected: BlacklistSnapshot,
                  role: str = "all", count: int = 1) -> dict[str, Any]:
    with own_broker(workdir) as broker:
        own = settings.model_copy(update={"bootstrap_servers": broker.bootstrap, "topic_partitions": PARTITIONS})
        fresh_topics(own, PARTITIONS)
        workers = Workers(workdir, own, f"google-{engine}", count, engine, role)
        workers.start()
        watch: SnapshotWatch | None = None
        replayer: _Replay | None = None
        try:
            watch = SnapshotWatch(own)  # inside the try: if it raises, the workers are still stopped
            workers.wait_ready()
            broker_cpu_start = cpu_seconds(kafka_local.status(broker) or 0) or 0.0
            say(f"replaying {spec} into {count} {engine} worker(s)")
            replayer = _Replay(spec, broker.bootstrap, workdir)
            found, loads = [], []
            while not found:
                workers.check_alive()
                replayer.check()
                if time.time() - replayer.started > TIMEOUT_S:
                    raise RuntimeError(f"no snapshot of version {expected.version} within {TIMEOUT_S:.0f} s")
                found = [(ms, s) for ms, s in watch.new(1.0) if s.version >= expected.version]
                loads.append(os.getloadavg()[0])
            replay = replayer.finish()
            usage = workers.usage()
            broker_cpu = (cpu_seconds(kafka_local.status(broker) or 0) or 0.0) - broker_cpu_start
        finally:
            if replayer is not None:
                replayer.stop()  # on an error path it may still run: it would outlive the bench and its broker
            if watch is not None:
                watch.close()
            workers.stop()
    assert replayer is not None
    at_ms, final = found[0]
    return {"engine": engine, "role": role, "workers": count, "replay_seconds": replay["wall_seconds"],
            "replay_cpu_seconds": replay["cpu_seconds"], "replay": replay["summary"],
            "final_snapshot_seconds_from_replay_start": at_ms / 1000 - replayer.started,
            "final_snapshot_seconds_after_replay_end": at_ms / 1000 - replayer.started - replay["wall_seconds"],
            "final_version": final.version, "equal_to_in_process": same(final, expected),
            "worker_cpu_seconds": sum(c or 0.0 for c in usage["cpu_seconds"]),
            "worker_cpu_seconds_each": usage["cpu_seconds"],
            "worker_peak_mb": max(m or 0.0 for m in usage["peak_mb"]),
            "broker_cpu_seconds_from_replay_start": round(broker_cpu, 1),
            "load_average_1min_max_during": round(max(loads), 2)}


class _Replay:
    """``laggard replay`` of the trace as a child process, started at once; it may end before or after the
    final snapshot (the worker publishes while the replay goes on). A thread waits for it, so its end is
    timed exactly whatever the main loop does; its output goes to files (a pipe nobody reads could fill)."""

    def __init__(self, spec: str, bootstrap: str, workdir: Path) -> None:
        self._out, self._err = workdir / "replay.json", workdir / "replay.log"
        self._cpu0 = _children_cpu()
        self.started = time.time()
        with open(self._out, "wb") as out, open(self._err, "wb") as err:
            self._process = subprocess.Popen([*LAGGARD, "replay", "--trace", spec, "--bootstrap", bootstrap, "--json"],
                                             stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        self.ended: float | None = None
        self._waiter = threading.Thread(target=self._wait, daemon=True)
        self._waiter.start()

    def _wait(self) -> None:
        self._process.wait()
        self.ended = time.time()
        say(f"replay done in {self.ended - self.started:.0f} s")

    def check(self) -> None:
        if self.ended is not None and self._process.returncode != 0:
            raise RuntimeError(f"replay failed: {self._err.read_text(errors='replace')[-2000:]}")

    def stop(self) -> None:
        """End the child if it still runs (the bench failed before it finished): terminate, then kill."""
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._waiter.join(5)

    def finish(self) -> dict[str, Any]:
        self._waiter.join(TIMEOUT_S)
        self.check()
        if self.ended is None:
            raise RuntimeError(f"replay still running after {TIMEOUT_S:.0f} s")
        return {"wall_seconds": self.ended - self.started, "cpu_seconds": round(_children_cpu() - self._cpu0, 2),
                "summary": orjson.loads(self._out.read_bytes() or b"{}")}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # waited-for children only: the replay, not the workers
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str]) -> None:
    engine = argv[0] if argv and argv[0] in ("direct", "faust") else "direct"
    overrides: dict[str, Any] = {}
    if "--prediction" in argv:
        overrides["prediction_method"] = argv[argv.index("--prediction") + 1]
    settings = Settings(**overrides)
    spec = google_events_spec(settings)
    os.environ.update({f"LAGGARD_{k.upper()}": str(v) for k, v in overrides.items()})  # the worker's too
    load_start = os.getloadavg()
    cache = Path(argv[argv.index("--expected") + 1]) if "--expected" in argv else None
    if cache is not None and cache.exists():
        kept = orjson.loads(cache.read_bytes())
        expected, local_s, events = codec.decode(bytes.fromhex(kept["snapshot"])), kept["seconds"], kept["events"]
    else:
        say("in-process run (laggard run's pipeline, 4 partitions, no end-of-trace flush)")
        expected, local_s, events = in_process(settings, spec)
        if cache is not None:
            cache.write_bytes(orjson.dumps({"snapshot": codec.encode(expected).hex(), "seconds": local_s,
                                            "events": events, "settings": overrides}))
    if "--in-process-only" in argv:
        return
    say(f"in-process: version {expected.version}, {len(expected.nodes)} nodes, {local_s:.0f} s, {events} events")
    workdir = tempfile.mkdtemp(prefix="laggard-google-")  # kept: the worker's log is there
    role = argv[argv.index("--role") + 1] if "--role" in argv else "all"
    count = int(argv[argv.index("--workers") + 1]) if "--workers" in argv else 1
    result = through_kafka(Path(workdir), settings, spec, engine, expected, role, count)
    document = {"trace": spec, "events": events, "settings": overrides, "partitions": PARTITIONS,
                "idle_stream_timeout_s": settings.idle_stream_timeout_s, "workdir": workdir,
                "in_process_seconds": local_s, "in_process_version": expected.version, **result,
                "load_average_start": [round(v, 2) for v in load_start],
                "load_average_end": [round(v, 2) for v in os.getloadavg()]}
    sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
