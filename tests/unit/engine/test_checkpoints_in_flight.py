"""The direct engine's checkpoints that do not stop the loop keep the order outputs -> checkpoint -> offsets.

A fake producer stands in for kafka-python's: the order in which a broker acknowledges records cannot be
arranged in a unit test; the integration tier (test_direct_engine.py, the operations tests) runs the real one.
"""

from __future__ import annotations

from typing import Any

import pytest

from streams.engine.store import Checkpoints, CheckpointStore, Outbox, Slot
from streams.settings import Settings


class FakeFuture:
    def __init__(self) -> None:
        self.is_done = False
        self.exception: BaseException | None = None

    def failed(self) -> bool:
        return self.is_done and self.exception is not None

    def land(self, error: BaseException | None = None) -> None:
        self.is_done, self.exception = True, error


class FakeProducerAckingOnDemand:
    """Fake: every send waits until the test acknowledges (or refuses) it."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, FakeFuture]] = []

    def send(self, topic: str, key: bytes | None = None, value: bytes = b"") -> FakeFuture:
        future = FakeFuture()
        self.sent.append((topic, value, future))
        return future

    def flush(self) -> None:
        for _, _, future in self.sent:
            if not future.is_done:
                future.land()

    def topics(self) -> list[str]:
        return [topic for topic, _, _ in self.sent]


def pipeline() -> tuple[FakeProducerAckingOnDemand, Outbox, Checkpoints]:
    producer = FakeProducerAckingOnDemand()
    outbox = Outbox(producer)  # type: ignore[arg-type]
    return producer, outbox, Checkpoints(outbox, CheckpointStore(Settings(app_id="t"), outbox))


def processed(slot: Slot[Any], offset: int) -> None:
    slot.hold("task-events", 0, offset)


def test_a_checkpoint_leaves_only_after_its_outputs_and_its_offsets_count_only_after_it_is_acknowledged() -> None:
    producer, outbox, checkpoints = pipeline()
    slot: Slot[Any] = Slot("normalise:0", {})
    processed(slot, 7)
    outbox.send_raw("node-samples", None, b"a")
    outbox.send_raw("node-samples", None, b"b")
    checkpoints.queue(slot, b"state@7")
    producer.sent[1][2].land()  # the second output is acknowledged, the first not yet
    assert not checkpoints.advance()
    assert "t-checkpoints" not in producer.topics()
    producer.sent[0][2].land()
    assert not checkpoints.advance()  # sent now, not acknowledged yet
    assert producer.topics()[-1] == "t-checkpoints" and slot.saved == {}
    producer.sent[-1][2].land()
    assert checkpoints.advance()
    assert slot.saved == {"task-events:0": 7}


def test_a_newer_checkpoint_replaces_a_queued_one_and_waits_for_the_outputs_sent_after_it() -> None:
    producer, outbox, checkpoints = pipeline()
    slot: Slot[Any] = Slot("normalise:0", {})
    processed(slot, 1)
    outbox.send_raw("node-samples", None, b"a")
    checkpoints.queue(slot, b"state@1")
    processed(slot, 2)
    outbox.send_raw("node-samples", None, b"b")
    checkpoints.queue(slot, b"state@2")
    producer.sent[0][2].land()
    checkpoints.advance()
    assert "t-checkpoints" not in producer.topics()  # state@2 also covers output b
    checkpoints.drain()
    assert [value for topic, value, _ in producer.sent if topic == "t-checkpoints"] == [b"state@2"]
    assert slot.saved == {"task-events:0": 2}


def test_a_refused_output_keeps_every_later_checkpoint_from_leaving() -> None:
    producer, outbox, checkpoints = pipeline()
    slot: Slot[Any] = Slot("rank:0", {})
    processed(slot, 3)
    outbox.send_raw("blacklist-deltas", None, b"delta")
    checkpoints.queue(slot, b"state@3")
    producer.sent[0][2].land(ValueError("record too large"))
    with pytest.raises(ValueError, match="too large"):
        checkpoints.advance()
    with pytest.raises(ValueError, match="too large"):
        checkpoints.advance()
    assert "t-checkpoints" not in producer.topics() and slot.saved == {}
