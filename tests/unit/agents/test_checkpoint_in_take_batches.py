"""A checkpoint taken in the middle of Faust's ``noack_take`` batches loses no event and repeats none.

Real Faust (a stream over an in-memory channel; no broker): the agent takes batches while the stream's
buffering task keeps receiving, and checkpoints after each batch, as ``normalise_tasks`` does. A checkpoint that
set the stream's current event made the buffering task file the checkpoint's event a second time instead of the
one it had just received (issue 18: the crash-recovery test ended a sample short).
"""

from __future__ import annotations

import asyncio
from typing import Any

import faust

from streams.agents.checkpoint import Checkpointer, unpack

EVENTS = 60


class Counter:
    def __init__(self) -> None:
        self.seen = 0

    def snapshot(self) -> dict[str, Any]:
        return {"seen": self.seen}

    def restore(self, state: dict[str, Any]) -> None:
        self.seen = int(state["seen"])


class AckingStream:
    """The real stream, acks counted here (an in-memory channel has no consumer to commit to)."""

    def __init__(self, stream: Any) -> None:
        self.stream, self.acked = stream, 0

    def _set_current_event(self, event: Any) -> None:
        self.stream._set_current_event(event)

    async def ack(self, event: Any) -> bool:
        self.acked += 1
        return True


async def _take_with_checkpoints() -> tuple[list[int], dict[bytes, bytes], int]:
    app = faust.App("checkpoint-in-take", broker="kafka://127.0.0.1:1")
    app.flow_control.resume()
    channel = app.channel()
    stream = channel.stream()
    table: dict[bytes, bytes] = {}
    checkpointer, state, acks = Checkpointer(table, b"k"), Counter(), AckingStream(stream)
    values: list[int] = []

    async def agent() -> None:
        async for batch in stream.noack_take(5, 0.01):
            values.extend(event.value for event in batch)
            for event in batch:
                checkpointer.offsets["x"] = len(values)
                checkpointer._held.append(event)
            state.seen = len(values)
            await asyncio.sleep(0.001)  # the buffering task receives the next event meanwhile
            await checkpointer.save(acks, state)  # type: ignore[arg-type]
            if values[-1] == EVENTS - 1:
                return

    task = asyncio.ensure_future(agent())
    for i in range(EVENTS):
        await channel.send(value=i)
        await asyncio.sleep(0)
    await asyncio.wait_for(task, 10)
    return values, table, acks.acked


def test_every_event_is_taken_once_across_checkpoints() -> None:
    values, table, acked = asyncio.run(_take_with_checkpoints())
    assert values == list(range(EVENTS)), "each event once, in order"
    assert acked == EVENTS
    state, _ = unpack(table[b"k"])
    assert state == {"seen": EVENTS}
