"""Where replayed events go: the one Kafka sink, JSON lines on a stream, or nowhere; and replay pacing.

``KafkaSink`` (``producers.kafka_sink``) publishes task events to ``task-events`` and job events to
``job-events``, keyed by job id (so one job's events stay in order on one partition), values Avro-encoded by
``streams.serde.codec.encode``, in whole batches through aiokafka.

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
from typing import Protocol, TextIO

import orjson

from streams.core.events import Event


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
    """The best codec this kafka-python can use without packages it does not ship with (the bench's kafka-python
    producers; the replayer's own sink compresses nothing, see ``producers.kafka_sink``)."""
    from kafka import codec

    return "lz4" if codec.has_lz4() else "gzip"


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
    unsent: Event | None = None  # read, then interrupted before its send: not among ``events``

    @property
    def events_per_second(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else 0.0


class Interrupts:
    """A handler for SIGINT and SIGTERM during a replay: a KeyboardInterrupt at once, except between an event's send
    and its count, where it waits for the count (so the result's ``events`` is exactly what the sink was handed); a
    second signal there (a send that hangs on its broker) does not wait. ``signal`` is the last one received."""

    def __init__(self) -> None:
        self.sending = False
        self.signal: int | None = None

    def __call__(self, signum: int, frame: object) -> None:
        again = self.signal is not None
        self.signal = signum
        if not self.sending or again:
            raise KeyboardInterrupt


def replay(
    events: Iterable[Event],
    sink: Sink,
    pacer: Pacer | None = None,
    limit: int | None = None,
    progress: Callable[[int, float], None] | None = None,
    progress_every: int = 2000,
    interrupts: Interrupts | None = None,
) -> ReplayResult:
    """Send ``events`` (at most ``limit``) to ``sink`` at the pace of ``pacer``; always closes the sink.

    ``progress(count, seconds)`` is called every ``progress_every`` events. Ctrl-C ends the replay early
    and cleanly: what was sent is flushed and the result says ``interrupted``. With ``interrupts`` installed as
    the signal handler, a signal never falls between an event's send and its count.
    """
    started = time.perf_counter()
    count = 0
    interrupted = False
    unsent: Event | None = None
    guard = interrupts if interrupts is not None else Interrupts()
    try:
        for event in events if limit != 0 else ():
            unsent = event
            if pacer is not None:
                pacer.wait(event.ts_us)
            guard.sending = True
            sink.send(event)
            count += 1
            unsent = None
            guard.sending = False
            if guard.signal is not None:
                raise KeyboardInterrupt
            if progress is not None and count % progress_every == 0:
                progress(count, time.perf_counter() - started)
            if count == limit:
                break  # before pulling one more event from the reader
    except KeyboardInterrupt:
        interrupted = True
    finally:
        sink.close()
    return ReplayResult(count, time.perf_counter() - started, interrupted, unsent if interrupted else None)


def __getattr__(name: str) -> object:
    # The Kafka sink loads aiokafka and kafka-python: only when it is asked for, not for the null or stdout sinks.
    if name == "KafkaSink":
        from producers.kafka_sink import KafkaSink

        return KafkaSink
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
