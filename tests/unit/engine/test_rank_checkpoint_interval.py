"""The direct engine's ranking checkpoints at most every ``CHECKPOINT_MIN_S`` of wall time when it publishes (a
catch-up publishes dozens of rankings a second, and each checkpoint writes the whole window state), through the
worker's ``Spacing`` as the other states: one due sooner is written once its time has passed, even if no record
comes. A worker killed after publications its last checkpoint does not cover resumes from that checkpoint: it
publishes no blacklist version twice, and its deltas and final snapshot are the uninterrupted run's."""

from __future__ import annotations

from typing import Any

import pytest

from producers.registry import open_trace
from streams.agents.envelope import pack
from streams.core.events import BlacklistDelta, BlacklistSnapshot
from streams.engine import hosts
from streams.engine.hosts import FEED_TYPES, Decoded, RankHost, decode
from streams.engine.store import CHECKPOINT_MIN_S, Spacing
from streams.serde import codec
from streams.settings import Settings
from tests.unit.engine.test_predict_host import Raw
from tests.unit.engine.test_running_policy_forwarding import PARTITIONS, Outbox, normalised

TRACE = "synthetic:nodes=20,slow=2,jobs=60,tasks=10-20,interarrival=90,seed=1,slowdown=3"
SETTINGS: dict[str, Any] = {"policy": "pcores", "ranking_period_s": 60}
POLL = 20  # feed records per take


class Clock:
    """time.monotonic for the host: one second per take."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The host's wall clock, advanced by hand."""
    fake = Clock()
    monkeypatch.setattr(hosts.time, "monotonic", fake)
    return fake


@pytest.fixture(scope="module")
def feed() -> list[Decoded]:
    records = normalised(list(open_trace(TRACE)), **SETTINGS).on("ranking-feed")
    return [decode(Raw("ranking-feed", 0, i, value=codec.encode(record)), FEED_TYPES)
            for i, (record, _) in enumerate(records)]


class Run:
    """A ranking host over ``feed`` from checkpoint ``saved`` (``published``: the consumers' latest snapshot),
    ``POLL`` records a take and a second apart; each checkpoint the worker would write (``DirectWorker.process``
    and its loop's ``overdue``, spaced by ``min_s``) packed as it does. Stops after ``stop_after`` takes (a SIGKILL:
    nothing more is checkpointed); ``idle_takes`` more seconds pass with no record after the last take."""

    def __init__(self, feed: list[Decoded], clock: Clock, monkeypatch: pytest.MonkeyPatch,
                 saved: dict[str, bytes] | None = None, published: BlacklistSnapshot | None = None,
                 stop_after: int | None = None, min_s: float = CHECKPOINT_MIN_S, idle_takes: int = 0) -> None:
        self.sent = Outbox()
        host = RankHost(Settings(**SETTINGS), PARTITIONS, self.sent)  # type: ignore[arg-type]
        monkeypatch.setattr(hosts.kafka_clients, "latest_snapshot", lambda settings, **_: published)
        host.load({0}, saved or {})
        self.dues: list[bool] = []
        self.published: list[bool] = []  # whether the take published (sent anything)
        self.delta_takes: list[bool] = []  # whether it published a delta
        self.saved = dict(saved or {})
        self.saved_offsets: dict[str, int] = {}  # of the last checkpoint written here
        spacing, slot = Spacing(min_s), host.slots[0]
        for n, start in enumerate(range(0, len(feed), POLL)):
            if stop_after is not None and n == stop_after:
                break
            clock.now += 1.0
            sent_before, deltas_before = len(self.sent.records), len(self.on("blacklist-deltas"))
            due = host.take(feed[start:start + POLL], lambda: None)
            # as DirectWorker.process and its loop: at once, else spaced, else overdue (at_once implies due)
            spaced = spacing.ready([slot] if due else [], clock.now)
            written = bool(host.at_once or spaced or spacing.overdue(clock.now))
            self.dues.append(written)
            self.published.append(len(self.sent.records) > sent_before)
            self.delta_takes.append(len(self.on("blacklist-deltas")) > deltas_before)
            if written:
                self.write(spacing, slot, clock.now)
        for _ in range(idle_takes if stop_after is None else 0):
            clock.now += 1.0
            if spacing.overdue(clock.now):
                self.write(spacing, slot, clock.now)

    def write(self, spacing: Spacing, slot: Any, now: float) -> None:
        self.saved = {slot.key: pack(slot.state.snapshot(), slot.offsets)}
        self.saved_offsets = dict(slot.offsets)
        spacing.queued([slot], now)

    def on(self, topic: str) -> list[Any]:
        return [record for record, _ in self.sent.on(topic)]


def test_a_killed_ranking_resumes_from_a_checkpoint_before_its_last_publications_without_repeating_a_version(
    feed: list[Decoded], clock: Clock, monkeypatch: pytest.MonkeyPatch,
) -> None:
    whole = Run(feed, clock, monkeypatch)
    expected: list[BlacklistDelta] = whole.on("blacklist-deltas")
    assert len(expected) >= 2, "the trace lists and unlists nodes over several versions"
    assert 0 < sum(whole.dues) < sum(whole.published), "publications a second apart: not each checkpointed"

    # killed right after a take that published a delta and was not checkpointed (an earlier take was)
    kill = next(n for n in range(1, len(whole.dues)) if whole.delta_takes[n - 1] and not whole.dues[n - 1])
    first = Run(feed, clock, monkeypatch, stop_after=kill)
    published: list[BlacklistSnapshot] = first.on("blacklist-snapshot")
    second = Run(feed, clock, monkeypatch, first.saved, published[-1] if published else None)
    before, after = first.on("blacklist-deltas"), second.on("blacklist-deltas")

    redone = {(s.node_id, s.window_end_us) for s in first.on("node-scores")} & {
        (s.node_id, s.window_end_us) for s in second.on("node-scores")}
    assert redone, "the resumed ranking ranked again what the killed one had published"
    versions = [d.version for d in before + after]
    assert len(versions) == len(set(versions)), "no version published twice"
    assert before + after == expected
    assert (first.on("blacklist-snapshot") + second.on("blacklist-snapshot"))[-1] == whole.on(
        "blacklist-snapshot")[-1]


def test_every_publication_checkpoints_when_they_are_further_apart_than_the_interval(
    feed: list[Decoded], clock: Clock, monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = Run(feed, clock, monkeypatch)
    assert run.dues != run.published  # a second apart, 5 s: some publications wait for the next checkpoint
    run = Run(feed, clock, monkeypatch, min_s=0.5)
    assert run.dues == run.published and any(run.dues)  # the former rule: every publication


def test_the_last_publications_of_a_catch_up_are_checkpointed_once_their_time_has_passed_with_no_record_after(
    feed: list[Decoded], clock: Clock, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Session 21's open point: the ranking's own gate dropped a publication that came within 5 s of the last
    checkpoint, so the end of a catch-up stayed unsaved until the next period's publication, minutes later live (a
    crash then redid it all). Through the worker's spacing it is written once its 5 s have passed."""
    # a catch-up that ends within 5 s of a checkpoint: the feed cut after some take
    ends = [feed[:cut] for cut in range(POLL, len(feed), POLL)]
    cut = next(part for part in ends if Run(part, clock, monkeypatch).saved_offsets != end_of(part))
    assert Run(cut, clock, monkeypatch, idle_takes=10).saved_offsets == end_of(cut)


def end_of(feed: list[Decoded]) -> dict[str, int]:
    """The ranking state's source offsets after the whole ``feed``: its last record's."""
    return {"ranking-feed:0": len(feed) - 1}


def test_a_ranking_made_without_an_idle_partition_is_checkpointed_at_once(
    feed: list[Decoded], clock: Clock, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found in review: a ranking made because a normalising partition was declared idle depends on the wall
    clock, so a restart would not make it again from the log (the partition's marks are there by then) and the
    next delta would be computed against another blacklist. Such a take checkpoints even within the interval."""
    monkeypatch.setattr(hosts.kafka_clients, "latest_snapshot", lambda settings, **_: None)
    only_zero = [item for item in feed if getattr(item.record, "partition", 0) == 0]  # partition 1 falls silent
    host = RankHost(Settings(**SETTINGS, idle_stream_timeout_s=2), PARTITIONS, Outbox())  # type: ignore[arg-type]
    host.idle._clock = clock  # the engine's idle clock on the same fake wall clock
    host.load({0}, {})
    idle_takes = []
    for start in range(0, len(only_zero), POLL):
        clock.now += 1.0
        sent_before = len(host.outbox.records)  # type: ignore[attr-defined]
        due = host.take(only_zero[start:start + POLL], lambda: None)
        if len(host.outbox.records) > sent_before:  # type: ignore[attr-defined]
            idle_takes.append(due and host.at_once)
    assert idle_takes, "partition 1's silence let the ranking publish"
    assert all(idle_takes), "every take that ranked without the idle partition made its checkpoint due at once"
