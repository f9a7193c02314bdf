"""What a checkpoint may cover (streams.agents.checkpoint): only outputs the broker has acknowledged, and only
events of the current generation of the consumer group.

Both broke the integration tier's equality with the clean run (test_kill_after_commit.py failed 1 run in 3, a
node's n one short after a worker killed with its newest checkpoint on the broker and summaries sent before it
not; test_rebalance.py 2 runs in 2, a batch taken before a rebalance processed after its partition's state was
reloaded). Driven with FAKE events and a FAKE app (stand-ins for Faust's message and its rebalance state: no
worker runs in unit tests), a dict as the checkpoint table and the real normalising stage.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from streams.agents.checkpoint import Checkpointer, Outputs, PartitionStates
from streams.core.events import TaskStart
from streams.core.stages import NormalizeStage
from streams.serde import codec


class FakeEvent:
    """Faust's event as the agents read it: a message with its source, offset and fetch generation."""

    def __init__(self, offset: int, generation: int | None) -> None:
        value = codec.encode(TaskStart("j", f"t{offset}", 0, "n", 7))
        self.message = SimpleNamespace(topic="task-events", partition=0, offset=offset, generation_id=generation,
                                       key=b"j", value=value, timestamp=1.0)


class FakeApp:
    def __init__(self, generation: int) -> None:
        self.consumer_generation_id = generation
        self.active = True
        self.flow_control = SimpleNamespace(is_active=lambda: self.active)
        self.on_partitions_revoked = SimpleNamespace(connect=lambda handler: None)


class Acks:
    def __init__(self) -> None:
        self.acked: list[int] = []

    async def ack(self, event: Any) -> bool:
        self.acked.append(event.message.offset)
        return True


class Count:
    def snapshot(self) -> dict[str, Any]:
        return {}

    def restore(self, state: dict[str, Any]) -> None:
        pass


def test_a_checkpoint_waits_for_the_broker_to_acknowledge_the_outputs_before_it() -> None:
    async def scenario() -> tuple[bool, bool, list[int]]:
        table: dict[bytes, bytes] = {}
        checkpointer, outputs, acks = Checkpointer(table, b"k"), Outputs(), Acks()
        checkpointer.hold(FakeEvent(5, 1))  # type: ignore[arg-type]
        summary_sent = asyncio.get_running_loop().create_future()
        outputs.track(summary_sent)
        saving = asyncio.ensure_future(checkpointer.save(acks, Count(), outputs))  # type: ignore[arg-type]
        await asyncio.sleep(0.05)
        written_before_ack = b"k" in table
        summary_sent.set_result("acknowledged")
        await asyncio.wait_for(saving, 5)
        return written_before_ack, b"k" in table, acks.acked

    written_before_ack, written, acked = asyncio.run(scenario())
    assert not written_before_ack, "a checkpoint on the broker before the summary it covers loses the summary"
    assert written and acked == [5]


def test_events_a_rebalance_overtook_are_neither_processed_nor_acknowledged() -> None:
    async def scenario() -> tuple[list[Any], list[int], int]:
        app = FakeApp(generation=2)
        states = PartitionStates(app, {}, lambda p: NormalizeStage(p, 1, 10, 100),  # type: ignore[arg-type]
                                 ("task-events",), key=lambda p: f"normalise:{p}".encode())
        acks = Acks()
        admitted = [await states.admit(acks, FakeEvent(40, 1), None, (TaskStart,))]  # type: ignore[arg-type]
        app.active = False  # a rebalance under way: the generation is not known yet
        admitted.append(await states.admit(acks, FakeEvent(41, 2), None, (TaskStart,)))  # type: ignore[arg-type]
        slots_before = len(states.slots())
        app.active = True
        admitted.append(await states.admit(acks, FakeEvent(0, 2), None, (TaskStart,)))  # type: ignore[arg-type]
        return admitted, acks.acked, slots_before

    admitted, acked, slots_before = asyncio.run(scenario())
    assert admitted[:2] == [None, None] and slots_before == 0, "stale events make no state"
    assert acked == [], "an old generation's offset acknowledged in the new one could be committed"
    assert admitted[2] is not None and admitted[2].slot.checkpointer.offsets == {"task-events:0": 0}
