"""The rank_nodes agent's own code across a partition handover A -> B -> A, driven with FAKE stream, topics and
table (stand-ins: a real two-worker rebalance cannot be steered to move one partition on cue; the shared dict
plays a perfectly recovered changelog table, and the published list the blacklist topics).

What the handover must not do: publish a version twice, or publish a delta against a base consumers never had.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from producers.registry import open_trace
from streams.agents import rank
from streams.config import ranking_config
from streams.core.events import BlacklistSnapshot, NodeSummary, NormalizedTask, Progress
from streams.core.stages import NormalizeStage
from streams.serde import codec
from streams.settings import Settings

SETTINGS = Settings(policy="pcores-top-k", significance_floor=None, max_fraction=0.1, min_tasks=3)
CONFIG = ranking_config(SETTINGS)


def _feed() -> list[bytes]:
    stage = NormalizeStage(0, 1, CONFIG.period_us, 3_600_000_000, wait_for_job_events=True,
                           window_us=CONFIG.window_size_us)
    records: list[Any] = []
    for event in open_trace("synthetic:nodes=30,slow=3,jobs=300,slowdown=1.4,seed=2"):
        _, summaries, progress = stage.process(event)
        records += summaries + ([progress] if progress else [])
    return [codec.encode(r) for r in records]


FEED = _feed()


class FakeCluster:
    """The shared parts two workers see: the checkpoint table and the blacklist topics."""

    def __init__(self) -> None:
        self.table: dict[bytes, bytes] = {}
        self.published: list[tuple[int, list[str], list[str]]] = []
        self.snapshots: list[BlacklistSnapshot] = []


class FakeTopic:
    def __init__(self, cluster: FakeCluster, kind: str) -> None:
        self.cluster, self.kind = cluster, kind

    def get_topic_name(self) -> str:
        return f"blacklist-{self.kind}"

    async def send(self, key: bytes, value: bytes) -> asyncio.Future[None]:
        record = codec.decode(value)
        if self.kind == "deltas":
            self.cluster.published.append((record.version, sorted(e.node_id for e in record.added),
                                           sorted(e.node_id for e in record.removed)))
        elif self.kind == "snapshot":
            self.cluster.snapshots.append(record)
        return _acknowledged()


def _acknowledged() -> asyncio.Future[None]:
    """A send the broker has acknowledged."""
    future = asyncio.get_running_loop().create_future()
    future.set_result(None)
    return future


class FakeEvent:
    """A Faust event's one part the agent reads (a class: Faust keeps a weak reference to the current event)."""

    def __init__(self, message: Any) -> None:
        self.message = message


class FakeStream:
    def __init__(self, start: int, stop: int) -> None:
        self.start, self.stop, self.acked = start, stop, set()

    def noack(self) -> FakeStream:
        return self

    async def events(self) -> Any:
        for offset in range(self.start, self.stop):
            message = SimpleNamespace(topic="ranking-feed", partition=0, offset=offset, key=b"c",
                                      value=FEED[offset], timestamp=0, generation_id=1)
            yield FakeEvent(message)

    async def noack_take(self, max_: int, within: float) -> Any:
        batch: list[Any] = []
        async for event in self.events():
            batch.append(event)
            if len(batch) == min(max_, 7):  # small batches: a handover falls between and inside them
                yield batch
                batch = []
        if batch:
            yield batch

    async def ack(self, event: Any) -> None:
        self.acked.add(event.message.offset)


class FakeWorker:
    """One worker: the real agent function, registered on a fake app that records the revocation handler."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.handlers: list[Any] = []
        agents: dict[str, Any] = {}
        self.timers: list[Any] = []  # registered, not run: this scenario has no idle partition
        app = SimpleNamespace(agent=lambda topic, name: lambda fn: agents.setdefault(name, fn),
                              timer=lambda interval, **kw: lambda fn: self.timers.append(fn) or fn,
                              on_partitions_revoked=SimpleNamespace(connect=self.handlers.append),
                              flow_control=SimpleNamespace(is_active=lambda: True), consumer_generation_id=1)
        wiring = SimpleNamespace(
            ranking_feed=None, settings=SETTINGS, partitions=1, ranking_config=CONFIG, cluster_id="default",
            node_scores=SimpleNamespace(send=lambda **kw: asyncio.sleep(0, _acknowledged()),
                                        get_topic_name=lambda: "node-scores"),
            dead_letters=None, progress=None,
            blacklist_deltas=FakeTopic(cluster, "deltas"), blacklist_snapshot=FakeTopic(cluster, "snapshot"),
            rank_checkpoints=cluster.table, ranking_feed_types=(NodeSummary, NormalizedTask, Progress),
            published_snapshot=lambda: max(cluster.snapshots, key=lambda s: s.version, default=None))
        rank.register(app, wiring)
        self.agent = agents["rank_nodes"]

    async def run(self, start: int, stop: int) -> int:
        """Process offsets [start, stop); return the offset Faust would commit (first un-acked)."""
        stream = FakeStream(start, stop)
        await self.agent(stream)
        committed = start
        while committed in stream.acked:
            committed += 1
        return committed

    async def revoke(self) -> None:
        for handler in self.handlers:
            await handler(None, [SimpleNamespace(topic="ranking-feed", partition=0)])


def test_a_feed_handed_over_and_back_publishes_what_one_worker_would() -> None:
    async def scenario() -> tuple[list[Any], list[Any]]:
        n = len(FEED)
        shared = FakeCluster()
        a, b = FakeWorker(shared), FakeWorker(shared)
        committed = await a.run(0, n // 3)
        await a.revoke()
        committed = await b.run(committed, 2 * n // 3)
        await b.revoke()
        await a.run(committed, n)
        alone = FakeCluster()
        await FakeWorker(alone).run(0, n)
        return shared.published, alone.published

    handed_over, alone = asyncio.run(scenario())
    versions = [v for v, _, _ in handed_over]
    assert len(alone) >= 3, "the scenario publishes several deltas"
    assert versions == sorted(set(versions)), f"a version was published twice: {versions}"
    assert handed_over == alone
