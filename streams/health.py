"""Liveness and readiness of a long-running process, served over HTTP with its Prometheus metrics.

``ReadProgress`` judges a consumer from what it read and what the broker holds. A process is *live* unless a
partition it reads has records waiting and nothing was read from it for ``stall_after_s`` (or it holds no
partition that long while records wait on its topics with no committed progress): a worker whose client wedged
after a broker restart fails it, so a supervisor (Kubernetes' liveness probe, or the worker's own watchdog)
restarts it. It is *ready* when every partition it holds is caught up to within one ranking period: nothing
waiting, or the record it reads was written at most ``ready_within_s`` ago.

>>> progress = ReadProgress(stall_after_s=60, ready_within_s=300)
>>> tp = ("task-events", 0)
>>> verdict = progress.judge({tp}, ends={tp: 10}, committed={}, now=0.0, wall=1000.0)
>>> verdict.live, verdict.ready, verdict.lag
(None, 'task-events[0]: 10 records waiting, none read yet', {('task-events', 0): 10})
>>> progress.judge({tp}, ends={tp: 10}, committed={}, now=61.0, wall=1061.0).live
'task-events[0]: 10 records waiting and none read for 61 s'
>>> progress.read(tp, offset=9, written_at=1060.0, now=62.0)
>>> verdict = progress.judge({tp}, ends={tp: 10}, committed={}, now=63.0, wall=1063.0)
>>> verdict.live, verdict.ready, verdict.lag
(None, None, {('task-events', 0): 0})
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from streams import metrics

log = logging.getLogger(__name__)
Partition = tuple[str, int]  # (topic, partition)


@dataclass(frozen=True)
class Verdict:
    """What ``ReadProgress.judge`` found: why not live, why not ready (None: fine), and the lag per partition."""

    live: str | None
    ready: str | None
    lag: dict[Partition, int] = field(default_factory=dict)


class ReadProgress:
    """Per partition: the offset last read, when, and the write time of that record."""

    def __init__(self, stall_after_s: float, ready_within_s: float) -> None:
        self.stall_after_s = stall_after_s
        self.ready_within_s = ready_within_s
        self._next: dict[Partition, int] = {}
        self._read_at: dict[Partition, float] = {}
        self._written_at: dict[Partition, float] = {}
        self._waiting_since: dict[Partition, float] = {}
        self._unassigned_since: float | None = None
        self._committed_seen: dict[Partition, tuple[int, float]] = {}

    def read(self, tp: Partition, offset: int, written_at: float, now: float) -> None:
        """A record at ``offset`` of ``tp`` was read at monotonic time ``now``; Kafka wrote it at ``written_at``
        (unix seconds)."""
        self._next[tp] = offset + 1
        self._read_at[tp] = now
        self._written_at[tp] = written_at
        self._waiting_since.pop(tp, None)

    def unreachable(self, now: float) -> None:
        """The broker could not be asked: nobody could have read meanwhile, so every wait starts over from now."""
        self._waiting_since = dict.fromkeys(self._waiting_since, now)
        self._read_at = dict.fromkeys(self._read_at, now)
        self._unassigned_since = None if self._unassigned_since is None else now
        self._committed_seen = {tp: (offset, now) for tp, (offset, _) in self._committed_seen.items()}

    def judge(self, assigned: Iterable[Partition], ends: Mapping[Partition, int], committed: Mapping[Partition, int],
              now: float, wall: float) -> Verdict:
        """Live and ready from the partitions held now, their end offsets and the group's committed offsets."""
        held = sorted(set(assigned))
        lag = {tp: max(0, ends[tp] - self._next.get(tp, committed.get(tp, 0))) for tp in held if tp in ends}
        live = self._unassigned_problem(held, ends, committed, now)
        ready = None if held or live is None else live
        for tp, waiting in lag.items():
            name = f"{tp[0]}[{tp[1]}]"
            if not waiting:
                self._waiting_since.pop(tp, None)
                continue
            since = max(self._read_at.get(tp, -math.inf), self._waiting_since.setdefault(tp, now))
            if live is None and now - since > self.stall_after_s:
                live = f"{name}: {waiting} records waiting and none read for {now - since:.0f} s"
            if ready is None:
                written = self._written_at.get(tp)
                if written is None:
                    ready = f"{name}: {waiting} records waiting, none read yet"
                elif wall - written > self.ready_within_s:
                    ready = f"{name}: {waiting} records waiting; reading one written {wall - written:.0f} s ago"
        return Verdict(live, ready, lag)

    def _unassigned_problem(self, held: list[Partition], ends: Mapping[Partition, int],
                            committed: Mapping[Partition, int], now: float) -> str | None:
        """A member that holds nothing while the group's committed offsets stand still behind the end: wedged
        outside its group (a healthy spare replica sees the others commit, or nothing waiting)."""
        if held:
            self._unassigned_since = None
            return None
        since = self._unassigned_since = now if self._unassigned_since is None else self._unassigned_since
        stuck = 0
        for tp, end in ends.items():
            offset = committed.get(tp, 0)
            previous, moved_at = self._committed_seen.get(tp, (offset, now))
            moved_at = now if previous != offset else moved_at
            self._committed_seen[tp] = (offset, moved_at)
            if end > offset and now - moved_at > self.stall_after_s:
                stuck += end - offset
        if stuck and now - since > self.stall_after_s:
            return f"no partition assigned for {now - since:.0f} s while {stuck} records wait uncommitted"
        return None


class Health:
    """The latest verdict, and a heartbeat of the event loop (a blocked loop answers no probe truthfully)."""

    def __init__(self, stall_after_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.stall_after_s = stall_after_s
        self._clock = clock
        self._beat = clock()
        self._live: str | None = None
        self._ready: str | None = "starting"
        self.set(None, "starting")  # the gauges say what the probes say from the start (laggard_live was 0)

    def beat(self) -> None:
        self._beat = self._clock()

    def set(self, live: str | None, ready: str | None) -> None:
        self._live, self._ready = live, ready
        metrics.LIVE.set(0 if self.live() else 1)
        metrics.READY.set(0 if self.ready() else 1)

    def live(self) -> str | None:
        """Why the process is not live, None when it is."""
        silent = self._clock() - self._beat
        if silent > self.stall_after_s:
            return f"no health check ran for {silent:.0f} s (event loop blocked)"
        return self._live

    def ready(self) -> str | None:
        """Why the process is not ready, None when it is."""
        return self.live() or self._ready


def serve(port: int, health: Health, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """Serve ``/metrics``, ``/livez`` and ``/readyz`` on ``host:port`` from a daemon thread (0: a free port, see
    ``server.server_port``). A probe answers 200 ``ok`` or 503 with the reason."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the name http.server calls
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._answer(200, generate_latest(), CONTENT_TYPE_LATEST)
            elif path in ("/livez", "/readyz"):
                problem = health.live() if path == "/livez" else health.ready()
                self._answer(503 if problem else 200, (problem or "ok").encode() + b"\n", "text/plain")
            else:
                self._answer(404, b"/metrics, /livez or /readyz\n", "text/plain")

        def _answer(self, code: int, body: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # a probe every few seconds is not news

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="laggard-health", daemon=True).start()
    log.info("metrics and probes on http://%s:%d/metrics (/livez, /readyz)", host, server.server_port)
    return server


class BurstFilter(logging.Filter):
    """Lets through the first of a run of similar records (same logger, same text but for numbers) and then one
    per ``every_s`` seconds with the count of those held back: a broker that is away for a minute is a few lines
    in the log, not thousands of connection errors.

    >>> times = iter([0.0, 1.0, 2.0, 31.0]).__next__
    >>> burst = BurstFilter(every_s=30.0, clock=times)
    >>> records = [logging.LogRecord("aiokafka", logging.ERROR, "", 0, f"connect to port {p} failed", None, None)
    ...            for p in (1, 2, 3, 4)]
    >>> [burst.filter(r) for r in records]
    [True, False, False, True]
    """

    def __init__(self, every_s: float = 30.0, min_level: int = logging.WARNING,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.every_s, self.min_level, self._clock = every_s, min_level, clock
        self._seen: dict[tuple[str, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        decided = getattr(record, "laggard_burst", None)  # one filter on several handlers decides once
        if decided is None:
            decided = self._decide(record)
            record.laggard_burst = decided
        return bool(decided)

    def _decide(self, record: logging.LogRecord) -> bool:
        if record.levelno < self.min_level or not record.name.startswith(("aiokafka", "kafka", "faust.transport")):
            return True
        key = (record.name, re.sub(r"\d+", "N", str(record.msg)))
        now = self._clock()
        first, held = self._seen.get(key, (None, 0))
        if first is not None and now - first < self.every_s:
            self._seen[key] = (first, held + 1)
            return False
        self._seen[key] = (now, 0)
        if held and first is not None:
            # a line of its own: the record itself stays as its library made it
            logging.getLogger("laggard.clients").warning(
                "%d lines like the next held back in the last %.0f s (%s)", held, now - first, record.name)
        return True


class CoordinatorNotYet(logging.Filter):
    """aiokafka logs an ERROR when the broker has no group coordinator yet, which is what every broker's first
    start looks like for a second while it creates its offsets topic (a new user's first ``laggard worker`` showed
    it): the client retries and joins. In the process's first ``young_s`` seconds the line becomes a WARNING that
    says so; later it stays an ERROR (a coordinator broker down, an offsets topic offline).

    >>> failed = ("[Error 15] GroupCoordinatorNotAvailableError",)
    >>> record = logging.LogRecord("aiokafka.consumer.group_coordinator", logging.ERROR, "", 0,
    ...                            "Group Coordinator Request failed: %s", failed, None)
    >>> CoordinatorNotYet().filter(record), record.levelname, "a broker's first start" in record.getMessage()
    (True, 'WARNING', True)
    >>> later = logging.LogRecord(record.name, logging.ERROR, "", 0, "Group Coordinator Request failed: %s", failed,
    ...                           None)
    >>> CoordinatorNotYet(young_s=0.0).filter(later), later.levelname  # an old process: an outage, not a start
    (True, 'ERROR')
    """

    def __init__(self, young_s: float = 120.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._clock, self._until = clock, clock() + young_s

    def filter(self, record: logging.LogRecord) -> bool:
        if (record.levelno == logging.ERROR and record.name.startswith("aiokafka") and self._clock() < self._until
                and str(record.msg).startswith("Group Coordinator Request failed")
                and "GroupCoordinatorNotAvailable" in record.getMessage()):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.msg, record.args = ("%s (no group coordinator yet: a broker's first start creates it within "
                                       "seconds); retrying ...", (record.getMessage(),))
        return True


_SLOW_STEP = re.compile(r"^Task .* ran for (\d+\.\d+)s \(>[\d.]+s threshold\)\. It is blocking the event loop")


def not_a_short_slow_step(record: logging.LogRecord, below_s: float = 1.0) -> bool:
    """kafka-python 3 warns when one step of its IO thread took over 0.1 s. In a worker busy with its own work that
    is the GIL held by the work, not a client fault (a new user saw it at every start): kept from 1 s on.

    >>> record = logging.LogRecord("kafka.net.selector", logging.WARNING, "", 0, "Task <t> ran for 0.153s (>0.100s "
    ...                            "threshold). It is blocking the event loop -- likely a tight sync loop", None, None)
    >>> not_a_short_slow_step(record), not_a_short_slow_step(record, below_s=0.1)
    (False, True)
    """
    found = _SLOW_STEP.match(record.getMessage()) if record.name == "kafka.net.selector" else None
    return found is None or float(found.group(1)) >= below_s


def quiet_client_bursts(handlers: Iterable[logging.Handler], every_s: float = 30.0) -> None:
    """Put one ``BurstFilter``, shared, a ``CoordinatorNotYet`` and ``not_a_short_slow_step`` on each handler
    (idempotent)."""
    burst = BurstFilter(every_s)
    for handler in handlers:
        if not any(isinstance(existing, BurstFilter) for existing in handler.filters):
            handler.addFilter(CoordinatorNotYet())
            handler.addFilter(not_a_short_slow_step)
            handler.addFilter(burst)
