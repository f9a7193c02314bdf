"""The direct engine's ranking checkpoints at most every ``checkpoint_min_s`` of wall time when it publishes (a
catch-up publishes dozens of rankings a second, and each checkpoint writes the whole window state). A worker
killed after publications its last checkpoint does not cover resumes from that checkpoint: it publishes no
blacklist version twice, and its deltas and final snapshot are the uninterrupted run's."""

from __future__ import annotations

from typing import Any

import pytest

from producers.registry import open_trace
from streams.agents.envelope import pack
from streams.core.events import BlacklistDelta, BlacklistSnapshot
from streams.engine import hosts
from streams.engine.hosts import FEED_TYPES, Decoded, RankHost, decode
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
    ``POLL`` records a take and a second apart; each due checkpoint packed as the worker does. Stops after
    ``stop_after`` takes (a SIGKILL: nothing more is checkpointed)."""

    def __init__(self, feed: list[Decoded], clock: Clock, monkeypatch: pytest.MonkeyPatch,
                 saved: dict[str, bytes] | None = None, published: BlacklistSnapshot | None = None,
                 stop_after: int | None = None) -> None:
        self.sent = Outbox()
        host = RankHost(Settings(**SETTINGS), PARTITIONS, self.sent)  # type: ignore[arg-type]
        monkeypatch.setattr(hosts.kafka_clients, "latest_snapshot", lambda settings: published)
        host.load({0}, saved or {})
        self.dues: list[bool] = []
        self.published: list[bool] = []  # whether the take published (sent anything)
        self.delta_takes: list[bool] = []  # whether it published a delta
        self.saved = dict(saved or {})
        for n, start in enumerate(range(0, len(feed), POLL)):
            if stop_after is not None and n == stop_after:
                break
            clock.now += 1.0
            sent_before, deltas_before = len(self.sent.records), len(self.on("blacklist-deltas"))
            self.dues.append(host.take(feed[start:start + POLL], lambda: None))
            self.published.append(len(self.sent.records) > sent_before)
            self.delta_takes.append(len(self.on("blacklist-deltas")) > deltas_before)
            if self.dues[-1]:
                slot = host.slots[0]
                self.saved = {slot.key: pack(slot.state.snapshot(), slot.offsets)}

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
    monkeypatch.setattr(hosts, "RANK_CHECKPOINT_MIN_S", 0.5)
    run = Run(feed, clock, monkeypatch)
    assert run.dues == run.published and any(run.dues)  # the former rule: every publication


def test_a_ranking_made_without_an_idle_partition_is_checkpointed_at_once(
    feed: list[Decoded], clock: Clock, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found in review: a ranking made because a normalising partition was declared idle depends on the wall
    clock, so a restart would not make it again from the log (the partition's marks are there by then) and the
    next delta would be computed against another blacklist. Such a take checkpoints even within the interval."""
    monkeypatch.setattr(hosts.kafka_clients, "latest_snapshot", lambda settings: None)
    only_zero = [item for item in feed if getattr(item.record, "partition", 0) == 0]  # partition 1 falls silent
    host = RankHost(Settings(**SETTINGS, idle_stream_timeout_s=2), PARTITIONS, Outbox())  # type: ignore[arg-type]
    host.idle._clock = clock  # the engine's idle clock on the same fake wall clock
    host.load({0}, {})
    idle_takes = []
    for start in range(0, len(only_zero), POLL):
        clock.now += 1.0
        sent_before = len(host.outbox.records)  # type: ignore[attr-defined]
        host._last_due = clock.now  # a publication checkpointed just now: the interval never ends here
        due = host.take(only_zero[start:start + POLL], lambda: None)
        if len(host.outbox.records) > sent_before:  # type: ignore[attr-defined]
            idle_takes.append(due)
    assert idle_takes, "partition 1's silence let the ranking publish"
    assert all(idle_takes), "every take that ranked without the idle partition made its checkpoint due"
