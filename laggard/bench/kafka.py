"""The Kafka stage: raw produce/consume floors of the broker, then ``laggard worker`` throughput and latency.

One broker of the bench's own serves every scenario; between scenarios all topics are deleted and created
afresh, and each scenario's workers have an app id (consumer group, changelog topics) of their own.

Throughput: the first ``kafka_events`` events of the Google 2011 task-events trace (a replay in event-time
order, keyed by job id as ``laggard replay`` keys them) are encoded once and pre-loaded to task-events and
job-events (the produce floor: pre-encoded bytes, the replayer's producer settings, no processing), read back
once with kafka-python (the consume floor: no decoding), then the workers start. The sustained rate is measured
from the workers' progress marks (see ``ProgressWatch``) until they are done or the scenario's time is up.
"""

from __future__ import annotations

import bisect
import time
from pathlib import Path
from typing import Any

from kafka.structs import TopicPartition

from laggard.bench.broker import (
    Workers,
    broker_peak_mb,
    fresh_topics,
    inputs_from_start,
    own_broker,
)
from laggard.bench.common import Sizes, rate, say
from laggard.bench.latency import live_latency
from producers.sink import compression_type
from streams import kafka_clients
from streams.config import SECOND_US, partition_for
from streams.core.events import Event, JobFinish, JobStart, NodeScore, Progress
from streams.serde import codec
from streams.serde import topics as registry
from streams.settings import Settings

PARTITIONS = 2  # task-events partitions in every scenario: one worker, then two workers


def encoded(events: list[Event]) -> list[tuple[str, bytes, bytes]]:
    """(topic, key, value) of each event, as ``producers.sink.KafkaSink`` would send it."""
    job_types = (JobStart, JobFinish)
    return [(registry.JOB_EVENTS.name if isinstance(e, job_types) else registry.TASK_EVENTS.name,
             codec.encode_key(e.job_id), codec.encode(e)) for e in events]  # fmt: skip


def produce(settings: Settings, records: list[tuple[str, bytes, bytes]], compression: str | None = "default") -> float:
    """Records per second of producing pre-encoded records with the replayer's producer settings (its
    compression unless ``compression`` names another: None for none)."""
    codec_name = compression_type() if compression == "default" else compression
    producer = kafka_clients.producer(settings, compression_type=codec_name, linger_ms=50,
                                      batch_size=512 * 1024)  # fmt: skip
    try:
        started = time.perf_counter()
        for topic, key, value in records:
            producer.send(topic, key=key, value=value)
        producer.flush()
        return rate(len(records), time.perf_counter() - started)
    finally:
        producer.close()


def consume(settings: Settings, total: int, timeout_s: float = 300) -> float:
    """Records per second of reading ``total`` records of task-events + job-events, no decoding."""
    with inputs_from_start(settings) as client:
        count = 0
        started = time.perf_counter()
        while count < total:
            if time.perf_counter() - started > timeout_s:
                raise RuntimeError(f"read {count} of {total} records within {timeout_s:.0f} s")
            for records in client.poll(timeout_ms=500, max_records=5000).values():
                count += len(records)
        return rate(count, time.perf_counter() - started)


def counted(marks: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The (broker ms, processed) marks from the first that counts a processed event on.

    >>> counted([(10, 0), (20, 0), (30, 5), (40, 5)])
    [(30, 5), (40, 5)]
    >>> counted([(10, 0)])
    []
    """
    for index, (_, processed) in enumerate(marks):
        if processed > 0:
            return marks[index:]
    return []


MIN_SPAN_MS = 1_000  # a sustained rate over less than this is a burst, not a rate


def sustained(marks: list[tuple[int, int]], started_ms: float) -> tuple[float, str]:
    """Events per second from the counted (broker ms, processed) ``marks``, and the basis it was measured on.

    Between the first and the last counted mark when they span at least ``MIN_SPAN_MS`` and count more events;
    otherwise the marks came in one burst (the broker stamps a batch of marks with one append time: CI once saw
    a tiny run's every mark at the same millisecond and measured 0 events/s), and the rate is taken from the
    workers' start, start-up included: a lower bound, said so in the basis.

    >>> sustained([(10_000, 100), (12_000, 500)], 0)
    (200.0, 'between marks')
    >>> sustained([(10_000, 100), (10_000, 500)], 8_000)
    (250.0, 'from start')
    """
    (t0, c0), (t1, c1) = marks[0], marks[-1]
    if c1 > c0 and t1 - t0 >= MIN_SPAN_MS:
        return rate(c1 - c0, (t1 - t0) / 1000), "between marks"
    return rate(c1, max(t1 - started_ms, 1.0) / 1000), "from start"


class ProgressWatch:
    """How many pre-loaded events the workers have normalised, from the Progress marks on ranking-feed, and how
    many the ranking has ranked, from the window ends of the node scores it publishes.

    A normalising partition publishes Progress(partition, watermark) each time its event time passes a
    ranking boundary; by then it has processed every event of its partition at or before the watermark. With
    the events' partitions and times known (they were pre-loaded here), each mark is a count of processed
    events at the mark's broker timestamp. Events after a partition's last boundary never show; a partition
    is done when it reached that boundary. (Committed offsets would do too, but the worker commits only at
    its agents' checkpoints, and the prediction agent checkpoints every 2000 events of a partition.)

    The ranking ranks boundary B once every partition's marks passed it, so an event before B is through the whole
    pipeline once a node score of the window ending at B is out (a ranking publishes the scores that changed: on
    Google's thousands of nodes, every period). In a catch-up the worker reads ranking-feed behind its task
    partitions, so the marks count events the ranking has not yet seen (session 20: a one-worker run ended with the
    ranking about half way); ``ranked_marks`` count the whole pipeline.
    """

    def __init__(self, settings: Settings, events: list[Event], period_us: int) -> None:
        partitions = settings.topic_partitions
        times: dict[int, list[int]] = {p: [] for p in range(partitions)}
        for event in events:
            times[partition_for(event.job_id, partitions)].append(event.ts_us)
        self.times = {p: sorted(ts) for p, ts in times.items()}
        self.visible = {p: bisect.bisect_left(ts, (ts[-1] // period_us) * period_us) if ts else 0
                        for p, ts in self.times.items()}  # fmt: skip
        self.watermarks: dict[int, int] = {}
        self.marks: list[tuple[int, int]] = []  # (broker ms, processed) at each mark
        # the last boundary the ranking can rank: every partition's last (the ranking waits for the slowest)
        self.last_boundary = min(((ts[-1] // period_us) * period_us for ts in self.times.values() if ts), default=0)
        self.ranked_us = -1  # the latest window end of a node score
        self.ranked_marks: list[tuple[int, int]] = []  # (broker ms, ranked) at each later window end
        self.consumer = kafka_clients.consumer(settings)
        scores = registry.NODE_SCORES.name
        if kafka_clients.await_partitions(self.consumer, (scores,)):  # else nothing would ever count as ranked
            raise RuntimeError(f"the broker's metadata names no partition of {scores} after 30 s")
        self.consumer.assign([TopicPartition(registry.RANKING_FEED.name, 0)] + [
            TopicPartition(scores, p) for p in sorted(self.consumer.partitions_for_topic(scores))])

    # What the watch reads of ranking-feed and node-scores; the rest (forwarded task events in ~256 KiB records,
    # summaries) is skipped by its header, not decoded: decoding it took a third of a core from the workers it
    # measures (session 22, two workers on two cores).
    WANTED = frozenset(codec.codec_for(kind).header for kind in (Progress, NodeScore))

    def poll(self) -> None:
        for records in self.consumer.poll(timeout_ms=200, max_records=10_000).values():
            for record in records:
                if record.value is None or bytes(record.value[: codec.HEADER_SIZE]) not in self.WANTED:
                    continue
                decoded = codec.decode(record.value)
                if isinstance(decoded, Progress):
                    self.watermarks[decoded.partition] = max(decoded.ts_us,
                                                             self.watermarks.get(decoded.partition, -1))
                    self.marks.append((record.timestamp, self.processed))
                elif isinstance(decoded, NodeScore) and decoded.window_end_us > self.ranked_us:
                    self.ranked_us = decoded.window_end_us
                    self.ranked_marks.append((record.timestamp, self.ranked))

    @property
    def ranked(self) -> int:
        """Events before the last boundary ranked (every partition's)."""
        return sum(bisect.bisect_left(ts, self.ranked_us) for ts in self.times.values()) if self.ranked_us >= 0 else 0

    @property
    def last_ranked_ms(self) -> int:
        """The broker time of the last ranking seen (-1 before any)."""
        return self.ranked_marks[-1][0] if self.ranked_marks else -1

    @property
    def ranking_done(self) -> bool:
        return self.ranked_us >= self.last_boundary

    @property
    def counted_marks(self) -> list[tuple[int, int]]:
        return counted(self.marks)

    @property
    def processed(self) -> int:
        return sum(bisect.bisect_right(self.times[p], w) for p, w in self.watermarks.items())

    @property
    def done(self) -> bool:
        return all(bisect.bisect_right(self.times[p], self.watermarks.get(p, -1)) >= self.visible[p]
                   for p in self.times)  # fmt: skip

    def close(self) -> None:
        self.consumer.close()


def watch(settings: Settings, workers: Workers, events: list[Event], window_s: float) -> dict[str, Any]:
    """Follow the workers' progress until they and their ranking are done, ``window_s`` has passed since their first
    mark, or neither a mark nor a ranking came for ``idle_s``; the sustained rates are measured between the first
    and the last counted mark, and the first and the last ranking (see ``sustained``). CPU is counted to the end of
    the watch: the ranking's catch-up included."""
    progress = ProgressWatch(settings, events, round(settings.ranking_period_s * SECOND_US))
    idle_s = min(60.0, max(8.0, window_s / 2))  # long enough to sit out a rebalance of two workers
    try:
        while not (progress.done and progress.ranking_done):
            workers.check_alive()
            progress.poll()
            now_ms = time.time() * 1000
            # marks that count no pre-loaded event yet (a watermark before a partition's first event) are
            # start-up: the window and the idle limit run from the first mark that counts one (CI once ended
            # a tiny run on such marks alone and divided by a rate of 0)
            counted = progress.counted_marks
            if not counted:
                if now_ms / 1000 - workers.started_wall > 180:
                    raise RuntimeError(f"workers of {workers.app_id} processed none of the pre-loaded events "
                                       "within 180 s by their progress marks")
                continue
            first_ms, last_ms = counted[0][0], max(counted[-1][0], progress.last_ranked_ms)
            if now_ms - first_ms >= window_s * 1000 or now_ms - last_ms >= idle_s * 1000:
                break
    finally:
        progress.close()
    usage = workers.usage()
    counted = progress.counted_marks
    if not counted:  # done without a counting mark: every event was after its partition's last boundary
        raise RuntimeError(f"workers of {workers.app_id} finished before any progress mark counted an event; "
                           "the bench needs more events than one ranking period")
    (t0, _), (t1, c1) = counted[0], counted[-1]
    seconds = t1 / 1000 - workers.started_wall
    per_s, basis = sustained(counted, workers.started_wall * 1000)
    cpu = [c for c in usage["cpu_seconds"] if c is not None]
    return {**ranked_figures(progress, counted[0], t1, workers.started_wall),
            "workers": workers.count, "partitions": settings.topic_partitions, "events": len(events), "processed": c1,
            "finished": progress.done, "marks": len(progress.marks), "seconds_from_start": seconds,
            "startup_seconds": t0 / 1000 - workers.started_wall,
            "sustained_per_s": per_s, "sustained_basis": basis,
            "overall_per_s": rate(c1, seconds),
            "worker_cpu_percent": 100 * sum(cpu) / (time.time() - workers.started_wall),
            # per CPU second of the workers (start-up included): comparable on a shared machine, where wall-clock
            # rates depend on what else runs
            "processed_per_worker_cpu_s": rate(c1, sum(cpu)),
            # after a restart the CPU, CPU % and peak memory figures count the restarted worker's second life only
            "restarts": workers.restarts,
            "worker_peak_mb": usage["peak_mb"]}  # fmt: skip


def ranked_figures(progress: ProgressWatch, first_mark: tuple[int, int], normalised_ms: int,
                   started_wall: float) -> dict[str, Any]:
    """The whole pipeline's figures: events ranked, at what rate, and how long after the last counted mark the last
    ranking came (the ranking's lag behind the normalising at the end of a catch-up).

    ``ranked_per_s`` is the rate the targets use: the events ranked after the first counted progress mark
    (``first_mark``: broker ms, events normalised by then), over the time from that mark to the last ranking. It
    leaves start-up out and counts the ranking's tail in. ``ranked_sustained_per_s`` (between the first and the
    last ranking) is kept beside it, but it is not a pace: a catch-up's rankings come in bursts, and where the first
    burst falls moved two workers over one between 0.8x and 1.5x in session 21.

    >>> class Watch:
    ...     ranked_marks, ranking_done = [(20_000, 4_000), (30_000, 9_000)], True
    >>> figures = ranked_figures(Watch(), (10_000, 1_000), 25_000, 5.0)
    >>> figures["ranked_per_s"], figures["ranked_sustained_per_s"], figures["ranking_lag_s"]
    (400.0, 500.0, 5.0)
    """
    marks = counted(progress.ranked_marks)
    if not marks:
        return {"ranked": 0, "ranking_finished": False, "ranked_per_s": None, "ranked_per_s_basis": None,
                "ranked_sustained_per_s": None, "ranked_basis": None, "ranking_lag_s": None}
    per_s, basis = sustained(marks, started_wall * 1000)
    done = progress.ranking_done  # a ranking cut off by the window has no lag to tell yet
    (t0, c0), (t1, c1) = first_mark, marks[-1]
    # a tiny run can rank everything within a second of its first mark: then from the workers' start, as ``sustained``
    spans = c1 > c0 and t1 - t0 >= MIN_SPAN_MS
    overall = rate(c1 - c0, (t1 - t0) / 1000) if spans else rate(c1, max(t1 - started_wall * 1000, 1.0) / 1000)
    return {"ranked": c1, "ranking_finished": done, "ranked_per_s": overall,
            "ranked_per_s_basis": "first mark to last ranking" if spans else "from start",
            "ranked_sustained_per_s": per_s, "ranked_basis": basis,
            "ranking_lag_s": (t1 - normalised_ms) / 1000 if done else None}


def scenario(workdir: Path, settings: Settings, events: list[Event], records: list[tuple[str, bytes, bytes]],
             count: int, window_s: float, measure_consume: bool, engine: str = "faust",
             role: str = "all") -> dict[str, Any]:
    """Fresh topics, pre-load, (consume floor,) run ``count`` workers and watch them."""
    fresh_topics(settings, settings.topic_partitions)
    say(f"pre-loading {len(records)} events to task-events/job-events")
    result: dict[str, Any] = {"preload_per_s": produce(settings, records)}
    if measure_consume:
        say("reading them back (consume floor)")
        result["consume_per_s"] = consume(settings, len(records))
    workers = Workers(workdir, settings, f"bench-{engine}-{role}-{count}w-{int(time.time())}", count, engine, role,
                      restart_stalled=True)
    say(f"running {count} {engine} worker(s) ({role}) for at most {window_s:.0f} s after their first progress mark")
    workers.start()
    try:
        result.update(watch(settings, workers, events, window_s))
    finally:
        workers.stop()
    return result


def compression_floors(settings: Settings, records: list[tuple[str, bytes, bytes]]) -> dict[str, float]:
    """Produce rate of the same records with each codec kafka-python has here (the replayer takes the fastest)."""
    from kafka import codec as kafka_codec

    codecs: list[str | None] = [None, "gzip"] + (["lz4"] if kafka_codec.has_lz4() else [])
    rates = {}
    for name in codecs:
        fresh_topics(settings, settings.topic_partitions)
        say(f"produce floor with compression {name or 'none'}")
        rates[name or "none"] = produce(settings, records, name)
    return rates


def scenarios(workdir: Path, settings: Settings, sizes: Sizes, events: list[Event]) -> dict[str, Any]:
    """The floors, then each engine's one worker, two workers and live latency on the same records."""
    records = encoded(events)
    by_codec = compression_floors(settings, records[:50_000])
    one = scenario(workdir, settings, events, records, 1, sizes.kafka_window_s, measure_consume=True)
    two = scenario(workdir, settings, events, records, 2, sizes.kafka_window_s, measure_consume=False)
    fresh_topics(settings, settings.topic_partitions)
    latency = live_latency(workdir, settings, sizes)
    direct = {"one_worker": scenario(workdir, settings, events, records, 1, sizes.kafka_window_s,
                                     measure_consume=True, engine="direct"),
              "two_workers": scenario(workdir, settings, events, records, 2, sizes.kafka_window_s,
                                      measure_consume=False, engine="direct"),
              # the statistics path alone (--role statistics: prediction deployed apart), beside the `all` worker
              "statistics_one_worker": scenario(workdir, settings, events, records, 1, sizes.kafka_window_s,
                                                measure_consume=True, engine="direct", role="statistics")}
    fresh_topics(settings, settings.topic_partitions)
    direct["latency"] = live_latency(workdir, settings, sizes, engine="direct")
    direct["consume_per_s"] = direct["one_worker"].pop("consume_per_s")  # measured again beside it
    direct["one_worker"].pop("preload_per_s")
    direct["two_workers"].pop("preload_per_s")
    statistics = direct["statistics_one_worker"]
    statistics.pop("preload_per_s")
    floor = statistics["consume_per_s"]  # the consume floor measured beside this scenario
    statistics["to_consume_floor"] = statistics["sustained_per_s"] / floor if floor else None
    return {
        "source": f"Google 2011 task events, the first {len(events)} in event-time order, pre-loaded",
        "floors": {"records": len(records), "compression": compression_type() or "none",
                   "produce_per_s": one.pop("preload_per_s"), "consume_per_s": one.pop("consume_per_s"),
                   "produce_per_s_by_compression": by_codec},
        "one_worker": one,
        "two_workers": two,
        "latency": latency,
        "direct": direct,  # the same scenarios on `laggard worker --engine direct`
    }  # fmt: skip


def kafka_stage(workdir: Path, settings: Settings, sizes: Sizes, events: list[Event],
                bootstrap: str | None) -> dict[str, Any]:
    """Every Kafka figure, on a broker started and stopped here (or the empty broker at ``bootstrap``)."""
    if bootstrap is not None:
        external = settings.model_copy(update={"bootstrap_servers": bootstrap, "topic_partitions": PARTITIONS})
        check_empty(external)
        return {"broker": bootstrap, **scenarios(workdir, external, sizes, events), "broker_peak_mb": None}
    with own_broker(workdir) as broker:
        own = settings.model_copy(update={"bootstrap_servers": broker.bootstrap, "topic_partitions": PARTITIONS})
        result = scenarios(workdir, own, sizes, events)
        return {"broker": f"own, {broker.bootstrap}", **result, "broker_peak_mb": broker_peak_mb(broker)}


def check_empty(settings: Settings) -> None:
    """The bench deletes and recreates topics: it takes a broker given to it only when that holds none."""
    client = kafka_clients.admin(settings)
    try:
        topics = sorted(name for name in client.list_topics() if not name.startswith("__"))
    finally:
        client.close()
    if topics:
        shown = ", ".join(topics[:5]) + (" ..." if len(topics) > 5 else "")
        raise BenchRefused(f"the broker at {settings.bootstrap_servers} already has topics ({shown}); the bench "
                           "deletes and recreates topics, so give it an empty broker or leave out --bootstrap")


class BenchRefused(RuntimeError):
    """A user mistake found inside a stage; the message is one line for the user."""
