"""A record skipped at a rebalance and delivered again after a later one (streams.agents.contiguity): the state takes
every record once, in offset order, and nothing is acknowledged unprocessed.

Driven with a FAKE app, consumer and stream (stand-ins that record seeks and acks: no Faust worker runs in unit
tests) and a dict as the checkpoint table; the records are real Avro bytes and the state is the real core stage.
Before the fix, offset 44 was held after 42, and the skipped 43, when it came again, counted as covered and was
acknowledged without reaching the state.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from faust.types.tuples import TP

from streams.agents.checkpoint import PartitionStates, pack
from streams.agents.contiguity import Contiguity
from streams.core.events import TaskStart
from streams.core.stages import NormalizeStage
from streams.serde import codec

TOPIC = "task-events"


class FakeConsumer:
    def __init__(self) -> None:
        self.seeks: list[tuple[TP, int]] = []

    async def seek_wait(self, partitions: dict[TP, int]) -> None:
        self.seeks.extend(partitions.items())


class FakeApp:
    consumer_generation_id = 3

    def __init__(self) -> None:
        self.consumer = FakeConsumer()
        self.on_partitions_revoked = SimpleNamespace(connect=lambda handler: None)
        self.flow_control = SimpleNamespace(is_active=lambda: True)


class FakeStream:
    def __init__(self) -> None:
        self.acked: list[int] = []

    async def ack(self, event: Any) -> None:
        self.acked.append(event.message.offset)


def _event(offset: int) -> Any:
    record = TaskStart("j", f"t{offset}", 0, "node-1", 1_000 + offset)
    message = SimpleNamespace(topic=TOPIC, partition=0, offset=offset, tp=TP(TOPIC, 0), generation_id=3,
                              key=b"j", value=codec.encode(record), timestamp=None)
    return SimpleNamespace(message=message)


def _run(offsets: list[int], clock: Any = None) -> tuple[list[int], list[int], list[tuple[TP, int]], list[str]]:
    app, stream = FakeApp(), FakeStream()
    table = {b"normalise:0": pack(NormalizeStage(0, 1, 10, 100).snapshot(), {f"{TOPIC}:0": 41})}
    states: PartitionStates[NormalizeStage] = PartitionStates(
        app, table, lambda p: NormalizeStage(p, 1, 10, 100),  # type: ignore[arg-type]
        (TOPIC,), key=lambda p: f"normalise:{p}".encode())
    if clock is not None:
        states.contiguity = Contiguity(patience_s=30.0, reseek_s=10.0, clock=clock)

    async def scenario() -> list[str]:
        taken = []
        for offset in offsets:
            admitted = await states.admit(stream, _event(offset), None, (TaskStart,))
            if admitted is not None:
                taken.append(admitted.record.task_id)
        return taken

    taken = asyncio.run(scenario())
    held = [int(task[1:]) for task in taken]
    return held, stream.acked, app.consumer.seeks, taken


def test_a_record_skipped_at_a_rebalance_reaches_the_state_in_order_when_it_comes_again() -> None:
    # 43 skipped (Faust dropped it while the rebalance ran); 44 and 45 were fetched before the seek that
    # delivers 43 again; then 43, 44 and 45 come again.
    held, acked, seeks, _ = _run([40, 42, 44, 45, 43, 44, 45])
    assert held == [42, 43, 44, 45], "every record once, in offset order"
    assert acked == [40], "only what the checkpoint covered is acknowledged unprocessed"
    assert seeks == [(TP(TOPIC, 0), 43)], "the partition is sought back to the skipped record once"


def test_a_hole_in_the_log_is_accepted_after_the_patience_and_reading_goes_on_from_the_lowest_record_refused() -> None:
    # Offset 43 is not in the log (a transaction marker): after the seek back only 44 and on keep coming; the
    # seek is repeated once (10 s), then the hole accepted (30 s).
    clock = iter([0.0, 5.0, 12.0, 31.0, 31.5]).__next__
    held, acked, seeks, _ = _run([42, 44, 45, 44, 44, 44, 45], clock=clock)
    assert seeks == [(TP(TOPIC, 0), 43), (TP(TOPIC, 0), 43), (TP(TOPIC, 0), 44)]
    assert held == [42, 44, 45] and acked == []
