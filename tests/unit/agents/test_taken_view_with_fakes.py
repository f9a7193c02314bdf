"""The caught-up grace on the Faust worker asks each agent's own view of what it took (streams.agents.taken), which
every revocation, assignment and seek makes unknown again; the app's one shared ``Backlog`` could not say that
(main kept the grace off the Faust worker for it: docs/scale.md, session 13's review).

Driven with a FAKE app (records the signal handlers and timers: no Faust worker runs in unit tests) and a FAKE
consumer (answers ends, records seeks; its seeks are wrapped by the real ``notify_seeks``); the agents' state life
cycle (``PartitionStates``: admit, contiguity, revocation) and ``caught_up_of`` are the real code. Each scenario
below would claim "caught up" from the shared backlog (which noted every record read, and kept positions across
seeks and rebalances), while records were about to be read again or this agent had not read them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable
from types import SimpleNamespace
from typing import Any

import pytest
from faust.types.tuples import TP

from streams.agents.checkpoint import PartitionStates, pack
from streams.agents.commit import replay_uncommitted
from streams.agents.idle_rules import IdleClock
from streams.agents.idleness import caught_up_of, grace_loop
from streams.agents.seeks import notify_seeks, views_of
from streams.agents.taken import TakenView
from streams.core.events import JobStart
from streams.core.stages import NormalizeStage
from streams.serde import codec
from streams.settings import Settings

JOB, TASK = "job-events", "task-events"
SETTINGS = Settings(caught_up_grace_s=0.5)


class FakeConsumer:
    """Faust's consumer, as far as the views need it: each partition's end (the broker's, and the high-water of
    its latest fetch, which may be older), and seeks."""

    def __init__(self, ends: dict[tuple[str, int], int]) -> None:
        self.ends = dict(ends)  # the broker's log ends
        self.fetched = dict(ends)  # the high-water of each partition's latest fetch
        self.committed: dict[TP, int | None] = {}
        self.seeks: list[tuple[TP, int]] = []
        self.assigned: set[TP] = set()

    def highwater(self, tp: TP) -> int | None:
        return self.fetched.get((tp.topic, tp.partition))

    async def highwaters(self, *tps: TP) -> dict[TP, int]:
        return {tp: self.ends[(tp.topic, tp.partition)] for tp in tps}

    async def seek_to_committed(self) -> dict[TP, int | None]:
        return {tp: self.committed.get(tp) for tp in self.assigned}

    async def seek_wait(self, partitions: dict[TP, int]) -> None:
        self.seeks.extend(partitions.items())

    async def _seek(self, partition: TP, offset: int) -> None:  # Faust's parameter names
        self.seeks.append((partition, offset))

    async def seek_to_beginning(self, *tps: TP) -> None:
        self.seeks.extend((tp, 0) for tp in tps)

    async def earliest_offsets(self, *tps: TP) -> dict[TP, int]:
        return {tp: 0 for tp in tps}


class FakeApp:
    consumer_generation_id = 1
    should_stop = False

    def __init__(self, consumer: FakeConsumer) -> None:
        self.revoked: list[Any] = []
        self.assigned: list[Any] = []
        self.timers: list[Callable[[], Any]] = []
        self.futures: list[asyncio.Future[Any]] = []
        self.on_partitions_revoked = SimpleNamespace(connect=self.revoked.append)
        self.on_partitions_assigned = SimpleNamespace(connect=self.assigned.append)
        self.flow_control = SimpleNamespace(is_active=lambda: True)
        self.consumer = notify_seeks(consumer, views_of(self))

    def timer(self, interval: float, name: str) -> Callable[[Callable[[], Any]], Callable[[], Any]]:
        return lambda fn: self.timers.append(fn) or fn

    async def assign(self, *tps: TP) -> None:
        """A rebalance's end, as Faust runs it: the assignment signal, then the seek to committed offsets."""
        self.consumer.assigned = set(tps)
        for handler in self.assigned:
            await handler(None, set(tps))
        await self.consumer.seek_to_committed()

    async def revoke(self, *tps: TP) -> None:
        for handler in self.revoked:
            await handler(None, set(tps))

    def add_future(self, coro: Any) -> asyncio.Future[Any]:
        """As mode's: the coroutine runs in a future of its own (the timers start their asks so)."""
        future = asyncio.ensure_future(coro)
        self.futures.append(future)
        return future

    async def ask_ends(self) -> None:
        """Every timer's step, and the asks they started, to their end."""
        for timer in self.timers:
            await timer()
        await asyncio.gather(*self.futures)
        self.futures.clear()


class FakeStream:
    def __init__(self) -> None:
        self.acked: list[int] = []

    async def ack(self, event: Any) -> None:
        self.acked.append(event.message.offset)


def job_event(offset: int, partition: int = 0) -> Any:
    message = SimpleNamespace(topic=JOB, partition=partition, offset=offset, tp=TP(JOB, partition), generation_id=1,
                              key=b"j", value=codec.encode(JobStart(f"j{offset}", 1_000 + offset)), timestamp=None)
    return SimpleNamespace(message=message)


class Agent:
    """One agent's states and its caught-up question, as normalise_tasks and predict_stragglers wire them."""

    def __init__(self, app: FakeApp, name: str, table: dict[bytes, Any] | None = None) -> None:
        self.stream = FakeStream()
        self.states: PartitionStates[NormalizeStage] = PartitionStates(
            app, {} if table is None else table, lambda p: NormalizeStage(p, 1, 10, 100),  # type: ignore[arg-type]
            (TASK, JOB), key=lambda p: f"{name}:{p}".encode())
        caught_up = caught_up_of(app, self.states.taken, JOB, SETTINGS, name)  # type: ignore[arg-type]
        assert caught_up is not None
        self.caught_up: Callable[[Hashable], bool] = caught_up

    async def read(self, *offsets: int) -> None:
        for offset in offsets:
            await self.states.admit(self.stream, job_event(offset), None, (JobStart,))  # type: ignore[arg-type]


def world(ends: int = 3) -> tuple[FakeApp, Agent]:
    app = FakeApp(FakeConsumer({(JOB, 0): ends, (TASK, 0): 0}))
    return app, Agent(app, "normalise")


async def caught_up_then_revoked(app: FakeApp, agent: Agent) -> list[bool]:
    """Partition 0 assigned, read to its end (records 0-2) and revoked; whether it was caught up before."""
    await app.assign(TP(JOB, 0), TP(TASK, 0))
    await agent.read(0, 1, 2)
    await app.ask_ends()
    seen = [agent.caught_up(0)]
    await app.revoke(TP(JOB, 0), TP(TASK, 0))
    return seen


def test_a_job_partition_read_to_the_end_the_broker_reported_is_caught_up_and_not_before() -> None:
    async def scenario() -> list[bool]:
        app, agent = world()
        await app.assign(TP(JOB, 0), TP(TASK, 0))
        seen = [agent.caught_up(0)]  # nothing taken yet, no end asked since the seek
        await agent.read(0, 1)
        await app.ask_ends()
        seen.append(agent.caught_up(0))  # one record unread
        await agent.read(2)
        seen.append(agent.caught_up(0))
        app.consumer.fetched[(JOB, 0)] = 4  # a fetch saw one more
        seen.append(agent.caught_up(0))
        return seen

    assert asyncio.run(scenario()) == [False, False, True, False]


def test_a_revocation_then_the_same_partition_assigned_again_is_unknown_until_read_again_to_a_new_end() -> None:
    async def scenario() -> list[bool]:
        app, agent = world()
        seen = await caught_up_then_revoked(app, agent)
        app.consumer.committed[TP(JOB, 0)] = 1  # the next worker committed up to 1; records 1 and 2 come again
        await app.assign(TP(JOB, 0), TP(TASK, 0))
        seen.append(agent.caught_up(0))  # the fetch's high-water (3) is from before the seek: not taken
        await agent.read(1)
        await app.ask_ends()
        seen.append(agent.caught_up(0))  # 2 is about to be read again
        await agent.read(2)
        seen.append(agent.caught_up(0))
        return seen

    assert asyncio.run(scenario()) == [True, False, False, True]


def test_a_seek_back_makes_a_caught_up_partition_unknown_until_it_is_read_again() -> None:
    """Seeks from ``replay_uncommitted`` (to the first record, after a rebalance with nothing committed) and from
    the contiguity check (back to a record skipped at a rebalance, the later one refused, not taken)."""

    async def scenario() -> list[bool]:
        app, agent = world()
        replay_uncommitted(app.consumer, lambda topic: True)
        await app.assign(TP(JOB, 0), TP(TASK, 0))  # the first assignment: no seek to the first record
        await agent.read(0, 1, 2)
        await app.ask_ends()
        seen = [agent.caught_up(0)]
        await app.assign(TP(JOB, 0), TP(TASK, 0))  # a later one with nothing committed: sought to offset 0
        await app.ask_ends()
        seen.append(agent.caught_up(0))
        other, other_agent = world()
        await other.assign(TP(JOB, 0), TP(TASK, 0))
        await other.ask_ends()
        await other_agent.read(0, 2)  # 1 skipped: 2 refused, the partition sought back to 1
        seen.append(other_agent.caught_up(0))
        await other_agent.read(1)
        seen.append(other_agent.caught_up(0))
        await other.ask_ends()
        await other_agent.read(2)
        seen.append(other_agent.caught_up(0))
        return [*seen, other.consumer.seeks == [(TP(JOB, 0), 1)], (TP(JOB, 0), 0) in app.consumer.seeks]

    assert asyncio.run(scenario()) == [True, False, False, False, True, True, True]


def test_two_agents_on_the_same_topic_are_caught_up_each_by_what_it_took() -> None:
    async def scenario() -> tuple[bool, bool]:
        app, normalise = world()
        predict = Agent(app, "predict")
        await app.assign(TP(JOB, 0), TP(TASK, 0))
        await app.ask_ends()
        await normalise.read(0, 1, 2)
        await predict.read(0)  # its batches lag the normaliser's
        return normalise.caught_up(0), predict.caught_up(0)

    assert asyncio.run(scenario()) == (True, False)


def test_an_end_asked_before_a_seek_is_not_taken() -> None:
    class SeekWhileAsking(FakeConsumer):
        async def highwaters(self, *tps: TP) -> dict[TP, int]:
            answer = await super().highwaters(*tps)
            await app.consumer.seek_wait({TP(JOB, 0): 1})  # the contiguity check seeks while the question is out
            return answer

    async def scenario() -> bool:
        await app.assign(TP(JOB, 0), TP(TASK, 0))
        await agent.read(0, 1, 2)
        await app.ask_ends()
        await agent.read(2)  # a record fetched before the seek, taken after it (the state holds 1 already)
        return agent.caught_up(0)

    app = FakeApp(SeekWhileAsking({(JOB, 0): 3, (TASK, 0): 0}))
    agent = Agent(app, "normalise")
    assert asyncio.run(scenario()) is False


def test_a_record_refused_after_a_seek_back_is_not_taken() -> None:
    """The guard is the contiguity check before ``took``: a record fetched before the seek back and refused (a
    Wait) must not count, as the shared backlog counted every record read (review of h59)."""

    async def scenario() -> bool:
        app, agent = world(ends=4)
        await app.assign(TP(JOB, 0), TP(TASK, 0))
        await agent.read(0, 2)  # 1 skipped: 2 refused, sought back to 1
        await app.ask_ends()  # end 4 learnt after the seek
        await agent.read(3)  # fetched before the seek: refused (a Wait), must not count
        return agent.caught_up(0)

    assert asyncio.run(scenario()) is False


def test_a_stale_record_is_not_taken() -> None:
    """The other guard before ``took``: a record fetched in an older generation is dropped as stale."""

    async def scenario() -> bool:
        app, agent = world(ends=3)
        await app.assign(TP(JOB, 0), TP(TASK, 0))
        await app.ask_ends()
        await agent.read(0, 1)
        type(app).consumer_generation_id = 2  # a rebalance happened; 2 was fetched in generation 1
        try:
            await agent.read(2)
        finally:
            type(app).consumer_generation_id = 1
        return agent.caught_up(0)

    assert asyncio.run(scenario()) is False


def test_a_revoked_partition_is_unknown_before_it_is_assigned_again() -> None:
    """The revocation itself forgets the partition (``PartitionStates._forget_revoked``), not only the
    re-assignment that follows: between the two, no grace may run on it."""

    async def scenario() -> list[bool]:
        app, agent = world()
        seen = await caught_up_then_revoked(app, agent)
        seen.append(agent.caught_up(0))
        return [*seen, (JOB, 0) in agent.states.taken.assigned]

    assert asyncio.run(scenario()) == [True, False, False]


def test_a_checkpoint_restored_counts_as_taken_so_a_partition_with_nothing_to_re_read_is_caught_up() -> None:
    """After a restart whose committed offset is the job partition's end, no job record comes again: what the
    restored checkpoint covers is taken, so the grace need not wait 60 s for the partition's next record."""

    async def scenario() -> list[bool]:
        app = FakeApp(FakeConsumer({(JOB, 0): 3, (TASK, 0): 0}))
        table = {b"normalise:0": pack(NormalizeStage(0, 1, 10, 100).snapshot(), {f"{JOB}:0": 2})}
        agent = Agent(app, "normalise", table)
        await app.assign(TP(JOB, 0), TP(TASK, 0))
        await app.ask_ends()
        seen = [agent.caught_up(0)]
        await agent.states.get(0)  # the partition's first event (a task event) loads its state
        seen.append(agent.caught_up(0))
        app.consumer.fetched[(JOB, 0)] = app.consumer.ends[(JOB, 0)] = 4  # a job event since
        seen.append(agent.caught_up(0))
        return seen

    assert asyncio.run(scenario()) == [False, True, False]


def test_the_grace_loop_works_once_a_grace_is_due_and_stops_with_the_app() -> None:
    """Faust's side of the grace: no 20 ms timer, a task sleeping until ``IdleClock.due`` (FAKE app: its
    ``should_stop`` and ``sleep``)."""
    idle = IdleClock(60.0, caught_up=lambda stream: True, grace_s=0.05)
    app = SimpleNamespace(should_stop=False, sleep=asyncio.sleep)
    ticks: list[float] = []

    async def tick() -> None:
        ticks.append(time.monotonic())
        if idle.overdue("job-events:0", blocking=True):
            app.should_stop = True

    async def scenario() -> float:
        started = time.monotonic()
        assert not idle.overdue("job-events:0", blocking=True)  # the block starts, caught up: the grace runs
        await asyncio.wait_for(grace_loop(app, idle, tick)(), timeout=5.0)  # type: ignore[arg-type]
        return started

    started = asyncio.run(scenario())
    assert ticks and ticks[0] - started >= 0.05  # not before the grace ended
    assert app.should_stop and idle.why == "caught up"



def test_the_grace_loop_does_not_tick_while_a_stream_blocks_without_being_caught_up() -> None:
    """Live, task events wait on the job stream almost all the time: the loop must not run the agent's release
    under its lock every quarter grace for that (review of h59: ~8 times a second per agent); the idle timeout
    is the idle timer's, every ``after_s / 4``."""
    idle = IdleClock(60.0, caught_up=lambda stream: False, grace_s=0.05)
    app = SimpleNamespace(should_stop=False, sleep=asyncio.sleep)
    ticks: list[float] = []

    async def tick() -> None:
        ticks.append(time.monotonic())

    async def scenario() -> None:
        assert not idle.overdue("job-events:0", blocking=True)  # blocks, not caught up: no grace
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(grace_loop(app, idle, tick)(), timeout=0.4)  # type: ignore[arg-type]

    asyncio.run(scenario())
    assert ticks == []


def test_an_end_learnt_wakes_the_grace_loop_which_then_ends_the_grace_it_started() -> None:
    """A blocking job partition read to its end becomes caught up when its end is learnt, without a record: the
    loop checks once right then (the grace starts), and again when the grace ends."""

    async def scenario() -> tuple[list[float], float]:
        app, agent = world()
        app.should_stop = False
        idle = IdleClock(60.0, caught_up=agent.caught_up, grace_s=0.05)
        ticks: list[float] = []

        async def tick() -> None:
            ticks.append(time.monotonic())
            if idle.overdue(0, blocking=True):
                app.should_stop = True

        await app.assign(TP(JOB, 0), TP(TASK, 0))
        await agent.read(0, 1, 2)
        assert not idle.overdue(0, blocking=True)  # no end asked since the seek: not caught up
        loop = asyncio.create_task(grace_loop(app, idle, tick)())  # type: ignore[arg-type]
        await asyncio.sleep(0.2)
        assert ticks == []
        asked = time.monotonic()
        await app.ask_ends()
        await asyncio.wait_for(loop, timeout=5.0)
        return ticks, asked

    ticks, asked = asyncio.run(scenario())
    assert len(ticks) == 2 and ticks[0] - asked < 1.0 and ticks[1] - ticks[0] >= 0.05


class WithoutSeekToBeginning:
    """FAKE: the seeks faust-streaming 0.15's consumer has (no ``seek_to_beginning``)."""

    async def seek_to_committed(self) -> dict[TP, int]:
        return {}

    async def seek_wait(self, partitions: dict[TP, int]) -> None:
        pass

    async def _seek(self, tp: TP, offset: int) -> None:
        pass


def test_the_seeks_the_views_hear_of_are_the_ones_fausts_consumer_has() -> None:
    """A Faust upgrade that renamed one would leave the views deaf to its seeks: ``notify_seeks`` then fails at
    start-up instead; ``seek_to_beginning`` is wrapped only where the consumer has it (Faust's has not)."""
    from faust.transport.drivers.aiokafka import Consumer

    for name in ("seek_to_committed", "seek_wait", "_seek"):
        assert callable(getattr(Consumer, name))
    with pytest.raises(AttributeError):
        notify_seeks(SimpleNamespace(seek_to_committed=None, seek_wait=None), [])
    view = TakenView((JOB,))
    consumer = notify_seeks(WithoutSeekToBeginning(), [view])
    view.assign([(JOB, 0)])
    view.ended((JOB, 0), 1, view.mark())
    view.took((JOB, 0), 0)
    assert view.caught_up((JOB, 0))
    asyncio.run(consumer._seek(TP(JOB, 0), 0))  # Faust's ``seek`` goes through it
    assert not view.caught_up((JOB, 0)) and not hasattr(consumer, "seek_to_beginning")


def test_seek_to_beginning_is_wrapped_where_the_consumer_has_it_and_keyword_arguments_pass_through() -> None:
    view = TakenView((JOB,))
    fake = FakeConsumer({(JOB, 0): 1})
    consumer = notify_seeks(fake, [view])

    def caught_up_again() -> bool:
        view.ended((JOB, 0), 1, view.mark())
        view.took((JOB, 0), 0)
        return view.caught_up((JOB, 0))

    view.assign([(JOB, 0)])
    seen = [caught_up_again()]
    asyncio.run(consumer.seek_to_beginning(TP(JOB, 0)))
    seen.append(view.caught_up((JOB, 0)))
    seen.append(caught_up_again())
    asyncio.run(consumer._seek(partition=TP(JOB, 0), offset=0))  # by keyword: passed through, and heard
    seen.append(view.caught_up((JOB, 0)))
    seen.append(caught_up_again())
    asyncio.run(consumer.seek_wait(partitions={TP(JOB, 0): 0}))
    seen.append(view.caught_up((JOB, 0)))
    assert seen == [True, False, True, False, True, False]
    assert fake.seeks == [(TP(JOB, 0), 0)] * 3


def test_the_ends_asked_are_the_job_partitions_only() -> None:
    asked: list[TP] = []

    class Asked(FakeConsumer):
        async def highwaters(self, *tps: TP) -> dict[TP, int]:
            asked.extend(tps)
            return await super().highwaters(*tps)

    async def scenario() -> list[TP]:
        app = FakeApp(Asked({(JOB, 0): 3, (TASK, 0): 0}))
        Agent(app, "normalise")
        await app.assign(TP(JOB, 0), TP(TASK, 0))
        await app.ask_ends()
        return asked

    assert asyncio.run(scenario()) == [TP(JOB, 0)]
