"""The one state life cycle every agent uses (streams.agents.checkpoint.PartitionStates): restore from the
checkpoint table, cold start with a warning on a checkpoint this build cannot read, forget on revocation.

Driven with a FAKE app (a stand-in that records the revocation handler: no Faust worker runs in unit tests)
and a dict as the checkpoint table; the states are the real core stages.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from faust.types.tuples import TP

from streams.agents.checkpoint import PartitionStates, pack
from streams.core.events import JobStart, TaskStart
from streams.core.stages import NormalizeStage


class FakeApp:
    def __init__(self) -> None:
        self.handlers: list[Any] = []
        self.on_partitions_revoked = SimpleNamespace(connect=self.handlers.append)

    async def revoke(self, topic: str, partition: int) -> None:
        for handler in self.handlers:
            await handler(None, {TP(topic, partition)})


def _states(app: FakeApp, table: dict[bytes, bytes]) -> PartitionStates[NormalizeStage]:
    return PartitionStates(app, table, lambda p: NormalizeStage(p, 2, 10, 100),  # type: ignore[arg-type]
                           ("task-events",), key=lambda p: f"normalise:{p}".encode())


def test_a_partition_resumes_from_its_checkpoint_and_forgets_it_when_revoked() -> None:
    worked = NormalizeStage(1, 2, 10, 100)
    worked.process(JobStart("j", 5))
    worked.process(TaskStart("j", "t", 0, "n", 7))
    table = {b"normalise:1": pack(worked.snapshot(), {"task-events:1": 41})}

    async def scenario() -> tuple[Any, Any, Any]:
        app = FakeApp()
        states = _states(app, table)
        first = await states.get(1)
        again = await states.get(1)
        await app.revoke("task-events", 1)
        return first, again, await states.get(1)

    first, again, after_revoke = asyncio.run(scenario())
    assert first.state.snapshot() == worked.snapshot() and first.checkpointer.offsets == {"task-events:1": 41}
    assert again is first, "one state per partition while this worker holds it"
    assert after_revoke is not first and after_revoke.state.snapshot() == worked.snapshot(), "reloaded from the table"


@pytest.mark.parametrize("value", [
    zlib.compress(orjson.dumps({"format": 99, "offsets": {}, "state": {}})),  # an envelope of another build
    pack({"version": 99}, {"task-events:0": 3}),  # a stage snapshot of another build
    b"garbage",
])
def test_a_checkpoint_this_build_cannot_read_is_a_cold_start_with_a_warning(
    value: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        slot = asyncio.run(_states(FakeApp(), {b"normalise:0": value}).get(0))
    assert slot.state.snapshot() == NormalizeStage(0, 2, 10, 100).snapshot()
    assert "cold start" in caplog.text
