"""The one consumer loop every adapter shares: a thin kafka-python shell around ``adapters.follower``.

On start it reads the compacted ``blacklist-snapshot`` topic to its end and applies the cluster's latest
snapshot (a restart therefore always resynchronises), then follows ``blacklist-deltas`` from the offset saved
after the last applied delta (from the beginning on a first start; versions already applied are skipped). A
version gap resynchronises from the snapshot again. The state file is written after every applied change and
never in a dry run. When an applier fails, the change is retried (after ``retry_wait_s``, doubling up to ten
times that) and the version does not advance; with ``once`` the run stops there instead.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka import TopicPartition
from kafka.errors import KafkaError

from adapters import statefile
from adapters.base import Applier, ApplyError, prefix
from adapters.follower import Change, Follower, Gap, Refusal, Skip, Step
from streams import kafka_clients, metrics
from streams.core.events import BlacklistDelta, BlacklistSnapshot
from streams.errors import TopicMissing
from streams.health import Health, ReadProgress
from streams.serde import codec
from streams.serde.topics import BLACKLIST_DELTAS
from streams.settings import Settings

log = logging.getLogger("laggard.adapters")
HEALTH_CHECK_EVERY_S = 5.0


class _Stop(Exception):
    """End of a ``once`` run, or a stop request."""


@dataclass
class Outcome:
    """How a run ended: counts, and why it is not in sync when it is not."""

    applied: int = 0
    refused: int = 0
    skipped: int = 0
    undecodable: int = 0
    problem: str | None = None
    # The state file could not be saved after a change (a full disk): the scheduler has the change, a restart
    # applies again from the last saved version. Not a sync problem, but one the operator must act on.
    state_problem: str | None = None
    other_clusters: list[str] = field(default_factory=list)  # cluster ids of the records that were not ours
    version: int | None = None
    blacklist: list[str] = field(default_factory=list)

    @property
    def in_sync(self) -> bool:
        return self.problem is None and self.refused == 0


class BlacklistConsumer:
    """Feeds snapshot and delta records to a ``Follower`` and its changes to an ``Applier``."""

    def __init__(
        self,
        settings: Settings,
        follower: Follower,
        applier: Applier,
        state_path: Path,
        offsets: dict[int, int] | None = None,
        dry_run: bool = False,
        poll_timeout_s: float = 1.0,
        retry_wait_s: float = 5.0,
        stop: Callable[[], bool] = lambda: False,
        sleep: Callable[[float], None] = time.sleep,
        health: Health | None = None,
    ) -> None:
        self.settings = settings
        self.follower = follower
        self.applier = applier
        self.state_path = state_path
        self.offsets = dict(offsets or {})
        self.dry_run = dry_run
        self.poll_timeout_s = poll_timeout_s
        self.retry_wait_s = retry_wait_s
        self.stop = stop
        self.sleep = sleep
        self.once = False
        self.outcome = Outcome()
        self.health = health
        self.progress = ReadProgress(settings.stall_timeout_s or math.inf, settings.ranking_period_s)
        self._checked_at = -math.inf

    def run(self, once: bool = False) -> Outcome:
        """Resynchronise, then follow the deltas (until the end offsets seen at start, with ``once``)."""
        self.once = once
        try:
            self.resync()
            self._follow()
        except _Stop:
            pass
        state = self.follower.state
        self.outcome.version, self.outcome.blacklist = state.version, sorted(state.applied)
        return self.outcome

    def resync(self) -> Step | None:
        """Apply the cluster's latest snapshot (None when the topic holds none for it)."""
        snapshot = self._latest_snapshot()
        if snapshot is None:
            log.info("no snapshot for cluster %s yet: following the deltas", self.follower.cluster_id)
            return None
        log.info(
            "snapshot version %d of cluster %s: %d node(s)",
            snapshot.version,
            snapshot.cluster_id,
            len(snapshot.nodes),
        )
        return self._process(lambda: self.follower.on_snapshot(snapshot))

    def _latest_snapshot(self) -> BlacklistSnapshot | None:
        return kafka_clients.latest_snapshot(
            self.settings, self.follower.cluster_id, missing_ok=False,
            decode=lambda record: self._decode(record, BlacklistSnapshot), poll_timeout_s=self.poll_timeout_s)

    def _follow(self) -> None:
        consumer = kafka_clients.consumer(self.settings)
        try:
            partitions = self._partitions(consumer, BLACKLIST_DELTAS.name)
            consumer.assign(partitions)
            for tp in partitions:
                if tp.partition in self.offsets:
                    consumer.seek(tp, self.offsets[tp.partition])
                else:
                    consumer.seek_to_beginning(tp)
            end = consumer.end_offsets(partitions) if self.once else {}
            while not self.stop():
                batch = consumer.poll(timeout_ms=int(self.poll_timeout_s * 1000))
                for records in batch.values():
                    for record in records:
                        self._on_delta_record(record)
                self._check_health(consumer, partitions)
                if self.once and all(consumer.position(tp) >= end[tp] for tp in partitions):
                    return
        finally:
            kafka_clients.close_quietly(consumer)

    def _check_health(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        """Beat, and every few seconds judge the lag on the delta partitions (streams.health)."""
        if self.health is None:
            return
        self.health.beat()
        now = time.monotonic()
        if now - self._checked_at < HEALTH_CHECK_EVERY_S:
            return
        self._checked_at = now
        try:
            ends = {(tp.topic, tp.partition): end for tp, end in consumer.end_offsets(partitions).items()}
        except (KafkaError, OSError) as exc:
            self.progress.unreachable(now)
            self.health.set(None, f"the broker does not answer: {exc}")
            return
        held = [(tp.topic, tp.partition) for tp in partitions]
        verdict = self.progress.judge(held, ends, {}, now, time.time())
        for (topic, partition), lag in verdict.lag.items():
            metrics.CONSUMER_LAG.labels(topic, str(partition)).set(lag)
        if not any(verdict.lag.values()):
            metrics.LAST_PROGRESS.set(time.time())
        self.health.set(verdict.live, verdict.ready)

    def _on_delta_record(self, record: Any) -> None:
        metrics.EVENTS_IN.labels(record.topic, f"adapter-{self.applier.name}").inc()
        self.progress.read((record.topic, record.partition), record.offset, record.timestamp / 1000,
                           time.monotonic())
        delta = self._decode(record, BlacklistDelta)
        if delta is not None:
            step = self._process(lambda: self.follower.on_delta(delta))
            if isinstance(step, Gap):
                self._close_gap(delta, step)
        self.offsets[record.partition] = record.offset + 1

    def _close_gap(self, delta: BlacklistDelta, gap: Gap) -> None:
        log.warning("%s: resynchronising from the snapshot", gap.reason)
        wait = self.retry_wait_s
        while True:
            if isinstance(self.resync(), Refusal):
                log.error(
                    "delta version %d not applied either: the snapshot it would follow was refused",
                    delta.version,
                )
                return
            step = self._process(lambda: self.follower.on_delta(delta))
            if not isinstance(step, Gap):
                return
            problem = f"the snapshot is behind the deltas ({step.reason})"
            if self.once:
                self.outcome.problem = problem
                log.error("%s: stopping; run again once the ranking has written a newer snapshot", problem)
                raise _Stop
            log.warning("%s: reading it again in %.0f s", problem, wait)
            self._pause(wait)
            wait = min(wait * 2, self.retry_wait_s * 10)

    def _process(self, evaluate: Callable[[], Step]) -> Step:
        """Evaluate a record and act on the step; an applier failure is retried (or stops a ``once`` run)."""
        wait = self.retry_wait_s
        while True:
            try:
                known = self.applier.known_nodes()
                if known is not None:
                    self.follower.set_known(known)
                step = evaluate()
                self._act(step)
                return step
            except ApplyError as exc:
                metrics.ADAPTER_ERRORS.labels(self.applier.name).inc()
                version = self.follower.state.version
                log.error("change not applied (%s); the adapter stays at %s", exc,
                          "no version yet" if version is None else f"version {version}")
                if self.once:
                    self.outcome.problem = str(exc)
                    raise _Stop from exc
                log.info("trying again in %.0f s", wait)
                self._pause(wait)
                wait = min(wait * 2, self.retry_wait_s * 10)

    def _save_state(self) -> None:
        """The state file after a change applied. One that cannot be written (a full disk) does not end the
        adapter: the scheduler has the change, and a restart applies again from the last saved version (applying
        is idempotent), so it is an error in the log, not a stop."""
        try:
            statefile.save(self.state_path, self.follower.cluster_id,
                           statefile.SavedState(self.follower.state, self.offsets))
        except OSError as exc:
            self.outcome.state_problem = (f"state file {exc.filename or self.state_path} not saved "
                                          f"({exc.strerror or exc})")
            metrics.ADAPTER_STATE_UNSAVED.labels(self.applier.name).inc()
            log.error("%s: version %s is applied; a restart applies again from the last saved version",
                      self.outcome.state_problem, self.follower.state.version)
        else:
            self.outcome.state_problem = None

    def _act(self, step: Step) -> None:
        if isinstance(step, Change):
            self.applier.apply(step)
            self.follower.commit(step)
            self._log_actions(step)
            self.outcome.applied += 1
            if not self.dry_run:  # a dry run applies nothing: dashboards must not show it applied
                metrics.DELTA_APPLIED.labels(self.applier.name).set(step.version)
                metrics.NODES_LISTED.labels(f"adapter-{self.applier.name}").set(len(step.after))
                self._save_state()
        elif isinstance(step, Refusal):
            self.outcome.refused += 1
            metrics.ADAPTER_REFUSALS.labels(self.applier.name).inc()
            log.error(
                "REFUSED blacklist version %d as a whole: %s; nothing applied, state stays at %s",
                step.version,
                step.reason,
                "no version yet" if self.follower.state.version is None else f"version {self.follower.state.version}",
            )
        elif isinstance(step, Skip):
            # Records of other clusters share the topics; they are not this adapter's business (but a --cluster-id
            # with a typo follows nothing, and the summary names the clusters there are).
            if step.other_cluster is not None:
                if step.other_cluster not in self.outcome.other_clusters:
                    self.outcome.other_clusters.append(step.other_cluster)
                return
            self.outcome.skipped += 1
            log.info("skipped: %s", step.reason)

    def _log_actions(self, change: Change) -> None:
        would = prefix(self.dry_run)
        for entry in change.added:
            log.info(
                "%sblacklist %s (%s version %d): %s",
                would,
                entry.node_id,
                change.source,
                change.version,
                entry.reason,
            )
        for removed in change.removed:
            log.info(
                "%srelease %s (%s version %d): %s",
                would,
                removed.node_id,
                change.source,
                change.version,
                removed.reason,
            )
        log.info(
            "%s %s version %d through %s: %d node(s) blacklisted",
            "[dry-run] would apply" if self.dry_run else "applied",
            change.source,
            change.version,
            self.applier.name,
            len(change.after),
        )

    def _decode(self, record: Any, expected: type) -> Any:
        try:
            value = codec.decode(record.value)
        except codec.DecodeError as exc:
            self.outcome.undecodable += 1
            log.error(
                "%s[%d] offset %d does not decode (%s): skipped",
                record.topic,
                record.partition,
                record.offset,
                exc,
            )
            return None
        if not isinstance(value, expected):
            log.error(
                "%s[%d] offset %d holds a %s, not a %s: skipped",
                record.topic,
                record.partition,
                record.offset,
                type(value).__name__,
                expected.__name__,
            )
            return None
        return value

    def _partitions(self, consumer: Any, topic: str) -> list[TopicPartition]:
        ids = consumer.partitions_for_topic(topic)
        if not ids:
            raise TopicMissing(
                f"topic {topic} does not exist at {self.settings.bootstrap_servers} "
                "(create it with `laggard topics create`)"
            )
        return [TopicPartition(topic, partition) for partition in sorted(ids)]

    def _pause(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.stop():
                raise _Stop
            self.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
