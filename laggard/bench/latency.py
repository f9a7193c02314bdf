"""Finish-to-delta latency on a live synthetic cluster, from the broker's timestamps.

A ranking of boundary B (event time) can only happen once every partition of task-events and job-events has
passed B: a worker reports progress when both its streams reach B and the ranking waits for all partitions.
So a period's results are caused by the record that closed the period, and the TaskFinish events inside the
period wait for it. A synthetic cluster is replayed live at a fixed speed, so periods close in real time
(one period of P event seconds lasts P / speed wall seconds). All topics use broker append time, so every
time below is when the broker appended the record (no producer clocks involved). Two figures per output:

* ``close_to_output`` -- from the record that closed period B (the last of the per-partition, per-stream
  first records at or after B) to the first output of B: the pipeline's own delay;
* ``finish_to_output`` -- from each TaskFinish with event time in [B - P, B) to the output of B: what a
  scheduler waits after a task finished until the ranking of its period is readable; it includes waiting for
  the period to close, so its target is one period (P / speed wall seconds) plus 1 s.

Outputs are ``blacklist-deltas`` (only when the blacklist changed) and ``node-scores`` (every ranking in which
a node's statistics changed: nearly all of them in a live replay). Beside them, per ranked boundary,
``close_wait``: from the first input stream's first record at or after B to the closing record, i.e. how long
the slowest stream (a partition's job events when jobs rarely start or end) kept the period open after the
replay's clock passed B; ``finish_to_output`` is about one period plus ``close_wait`` plus ``close_to_output``.
"""

from __future__ import annotations

import bisect
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from laggard.bench.broker import INPUT_TOPICS, Workers
from laggard.bench.common import Sizes, say
from producers.registry import open_trace
from producers.sink import Pacer, compression_type
from streams import kafka_clients
from streams.config import SECOND_US
from streams.core.events import TaskFinish
from streams.serde import codec
from streams.serde import topics as registry
from streams.settings import Settings

DRAIN_S = 4.0
DEFINITION = __doc__.split("\n\n", 1)[1].strip() if __doc__ else ""


def produce_live(settings: Settings, spec: str, speed: float, seconds: float) -> int:
    """Replay ``spec`` at ``speed`` for ``seconds`` of wall time; the number of events sent."""
    producer = kafka_clients.producer(settings, compression_type=compression_type(), linger_ms=5)
    pacer = Pacer(speed=speed)
    sent = 0
    deadline = time.monotonic() + seconds
    try:
        for event in open_trace(spec):
            pacer.wait(event.ts_us)
            if time.monotonic() > deadline:
                break
            topic = registry.JOB_EVENTS.name if type(event).__name__.startswith("Job") else registry.TASK_EVENTS.name
            producer.send(topic, key=codec.encode_key(event.job_id), value=codec.encode(event))
            sent += 1
    finally:
        producer.flush()
        producer.close()
    return sent


def read_back(settings: Settings, topic: str) -> list[tuple[int, int, Any]]:
    """(partition, broker timestamp ms, record) of every record on ``topic``."""
    return [(r.partition, r.timestamp, codec.decode(r.value)) for r in kafka_clients.read_to_end(settings, topic)]


def closing_times(inputs: dict[tuple[str, int], list[tuple[int, int]]], boundary: int) -> tuple[int, int] | None:
    """Broker times (ms) at which the first and the last input stream passed ``boundary`` (the last closed the
    period); None if one never did.

    >>> closing_times({("a", 0): [(5, 100), (12, 140)], ("b", 0): [(11, 120)]}, 10)
    (120, 140)
    >>> closing_times({("a", 0): [(5, 100)], ("b", 0): [(11, 120)]}, 10) is None
    True
    """
    times = []
    for stream in inputs.values():  # (ts_us, broker ms) in offset order, ts_us non-decreasing
        index = bisect.bisect_left(stream, (boundary, -1))
        if index == len(stream):
            return None
        times.append(stream[index][1])
    return (min(times), max(times)) if times else None


def summarise(values_ms: list[float]) -> dict[str, Any]:
    if not values_ms:
        return {"n": 0}
    seconds = np.asarray(values_ms) / 1000
    return {"n": len(values_ms), "p50_s": float(np.percentile(seconds, 50)), "p99_s": float(np.percentile(seconds, 99)),
            "max_s": float(seconds.max()), "min_s": float(seconds.min())}  # fmt: skip


def latencies(inputs: dict[tuple[str, int], list[tuple[int, int]]], finishes: list[tuple[int, int]],
              outputs: dict[int, int], period_us: int) -> dict[str, Any]:
    """Both latencies for the boundaries in ``outputs`` (boundary -> first output's broker ms)."""
    close_ms: list[float] = []
    wait_ms: list[float] = []
    finish_ms: list[float] = []
    finish_times = [ts for ts, _ in finishes]
    for boundary, out_ms in sorted(outputs.items()):
        times = closing_times(inputs, boundary)
        if times is None:
            continue  # closed by the end of the run, not by an event
        reached, closed = times
        close_ms.append(out_ms - closed)
        wait_ms.append(closed - reached)
        low, high = bisect.bisect_left(finish_times, boundary - period_us), bisect.bisect_left(finish_times, boundary)
        finish_ms.extend(out_ms - broker_ms for _, broker_ms in finishes[low:high])
    return {"close_to_output": summarise(close_ms), "finish_to_output": summarise(finish_ms),
            "close_wait": summarise(wait_ms)}


def measure(settings: Settings, speed: float) -> dict[str, Any]:
    """Read the run back from the broker and compute the latencies of deltas and of rankings."""
    inputs: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    finishes: list[tuple[int, int]] = []
    for topic in INPUT_TOPICS:
        for partition, broker_ms, record in read_back(settings, topic):
            inputs[(topic, partition)].append((record.ts_us, broker_ms))
            if isinstance(record, TaskFinish):
                finishes.append((record.ts_us, broker_ms))
    finishes.sort()
    scores: dict[int, int] = {}
    for _, broker_ms, score in read_back(settings, registry.NODE_SCORES.name):
        scores[score.window_end_us] = min(broker_ms, scores.get(score.window_end_us, broker_ms))
    deltas = {delta.window_end_us: broker_ms for _, broker_ms, delta in
              read_back(settings, registry.BLACKLIST_DELTAS.name)}  # fmt: skip
    period_us = round(settings.ranking_period_s * SECOND_US)
    return {"period_wall_s": period_us / SECOND_US / speed, "rankings": len(scores), "deltas": len(deltas),
            "delta": latencies(inputs, finishes, deltas, period_us),
            "ranking": latencies(inputs, finishes, scores, period_us)}  # fmt: skip


def live_latency(workdir: Path, settings: Settings, sizes: Sizes, engine: str = "faust") -> dict[str, Any]:
    """Run one worker (of ``engine``), replay the synthetic cluster live into it, and measure."""
    workers = Workers(workdir, settings, f"bench-live-{engine}-{int(time.time())}", 1, engine)
    workers.start()
    try:
        workers.wait_ready()
        say(f"live: {sizes.live_spec} at {sizes.live_speed:g}x for {sizes.live_seconds:.0f} s")
        sent = produce_live(settings, sizes.live_spec, sizes.live_speed, sizes.live_seconds)
        time.sleep(DRAIN_S)  # the ranking of the last closed period may still be on its way
        workers.check_alive()
        usage = workers.usage()
    finally:
        workers.stop()
    result = measure(settings, sizes.live_speed)
    return {"trace": sizes.live_spec, "speed": sizes.live_speed, "seconds": sizes.live_seconds, "events": sent,
            "worker_peak_mb": usage["peak_mb"][0], **result, "definition": " ".join(DEFINITION.split())}
