"""Prometheus metrics of every long-running laggard process (the worker, each adapter), all named ``laggard_*``.

The metrics live in prometheus_client's default registry, as that library intends: a process declares them by
importing this module and serves them with ``streams.health.serve``. The workers' own unlabelled series (seeks
back; and the ranking's duration, lag, nodes seen and version published) are registered only by a worker
(``for_worker``): an adapter's /metrics said "laggard_delta_version_published 0" of versions it never publishes,
and a prediction-only worker serves none of the ranking's. Label values are bounded by the code, never by the
data: a dead letter's reason is reduced to its kind (``reason_kind``), topics and agents are laggard's own.

>>> reason_kind("unknown writer schema fingerprint 00ffaa11bb22cc33")
'unknown-writer-schema-fingerprint'
>>> reason_kind("feature 'cpu_rate' is not a finite number: nan")
'feature-is-not-a-finite-number'
>>> reason_kind("12 trailing bytes after the record body")
'trailing-bytes-after-the-record-body'
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable

from prometheus_client import REGISTRY, Counter, Gauge, Histogram

EVENTS_IN = Counter("laggard_events_in", "Records read, per topic and the agent or adapter that read them",
                    ["topic", "reader"])
EVENTS_OUT = Counter("laggard_events_out", "Records sent, per topic", ["topic"])
DEAD_LETTERS = Counter("laggard_dead_letters", "Records sent to dead-letters, per source topic and kind of reason",
                       ["topic", "reason"])
CONSUMER_LAG = Gauge("laggard_consumer_lag_records", "Records on a partition this process reads and has not read yet",
                     ["topic", "partition"])
RANKING_DURATION = Histogram("laggard_ranking_duration_seconds",
                             "Wall time of a ranking step that published (one or more ranking periods)",
                             buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0), registry=None)
PERIOD_LAG = Gauge("laggard_period_lag_seconds",
                   "Wall time minus the event time of the end of the latest ranked window (how far the ranking "
                   "runs behind the cluster; large during a replay of an old trace)", registry=None)
NODES_SEEN = Gauge("laggard_nodes_seen", "Nodes the ranking saw in its latest window (the running policy: or judged "
                   "over its longest scale), the count the cap is a fraction of", registry=None)
NODES_LISTED = Gauge("laggard_nodes_listed", "Nodes on the blacklist: published (worker) or applied (adapter)",
                     ["process"])
DELTA_PUBLISHED = Gauge("laggard_delta_version_published", "Latest blacklist version the ranking published",
                        registry=None)
DELTA_APPLIED = Gauge("laggard_delta_version_applied", "Latest blacklist version the adapter applied", ["adapter"])
ADAPTER_REFUSALS = Counter("laggard_adapter_refusals", "Blacklist versions refused as a whole (the cap)", ["adapter"])
ADAPTER_STATE_UNSAVED = Counter("laggard_adapter_state_unsaved", "Changes applied whose state file could not be "
                                "saved (a restart applies them again)", ["adapter"])
ADAPTER_ERRORS = Counter("laggard_adapter_errors", "Changes the scheduler did not take (retried)", ["adapter"])
PREDICTOR_FLAGS = Counter("laggard_predictor_flags", "Tasks flagged as stragglers, per prediction method",
                          ["method"])
LAST_PROGRESS = Gauge("laggard_last_progress_timestamp_seconds",
                      "Unix time of the latest record read (or of the latest check that found nothing to read)")
OFFSET_SEEKS_BACK = Counter("laggard_offset_seeks_back", "Partitions sought back because a record came after one "
                            "its state never took (skipped at a rebalance), or a hole in the log accepted",
                            registry=None)
LATE_EVENTS = Gauge("laggard_late_events", "Task and job events that came for a job already final (after its "
                    "JobFinish or idle timeout, or a job id used again) and were not scored, per task-events "
                    "partition this process normalises now (a JobFinish is never counted: it carries nothing to "
                    "score); the partition's count since its state began, checkpoints included", ["partition"],
                    registry=None)
LIVE = Gauge("laggard_live", "1 when the liveness check passes")
READY = Gauge("laggard_ready", "1 when the readiness check passes")

_RANKING = (RANKING_DURATION, PERIOD_LAG, NODES_SEEN, DELTA_PUBLISHED)


def late_events(partition: int, count: int) -> None:
    """``LATE_EVENTS`` of a partition this process normalises."""
    LATE_EVENTS.labels(str(partition)).set(count)


def forget_late_events(partitions: Iterable[int]) -> None:
    """Partitions this process no longer normalises: their series go (their next owner serves them)."""
    for partition in partitions:
        with contextlib.suppress(KeyError):
            LATE_EVENTS.remove(str(partition))
_registered: set[object] = set()


def for_worker(ranks: bool = True) -> None:
    """Serve a worker's own series too: its seeks back, and with ``ranks`` (not a prediction-only worker) the
    ranking's; once per process (they are counted whether served or not)."""
    for metric in (OFFSET_SEEKS_BACK, LATE_EVENTS, *(_RANKING if ranks else ())):
        if metric not in _registered:
            REGISTRY.register(metric)
            _registered.add(metric)


_DETAIL = re.compile(r"\([^)]*\)|'[^']*'|\"[^\"]*\"|\b[0-9a-f]{8,}\b|\d+")


def reason_kind(reason: str) -> str:
    """The kind of a dead letter's reason, as a bounded label: its words before any detail."""
    head = _DETAIL.sub(" ", reason.split(":", 1)[0].lower())
    words = re.findall(r"[a-z_]+", head)
    return "-".join(words)[:60] or "invalid"
