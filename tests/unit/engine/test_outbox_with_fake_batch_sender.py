"""The direct engine's Outbox over a batch-building sender: a record's handle is its batch's delivery.

A fake sender (``FakeBatchSenderRefusingOnDemand``) stands in for ``streams.batch_producer.BatchProducer``: a
broker that refuses one whole batch on demand cannot be arranged cheaply in a unit test; the integration tier
(test_direct_engine.py, the operations tests) runs the real producer against a broker.
"""

from __future__ import annotations

import pytest

from streams.aiokafka_producer import Delivery
from streams.engine.store import Outbox
from tests.unit.engine.test_outbox_over_the_batch_producer import queued


class FakeBatchSenderRefusingOnDemand:
    """Fake: records of a partition join its open batch (``Delivery``) until ``close_batches``; the test then
    answers each closed batch, acknowledging or refusing all of its records at once."""

    def __init__(self) -> None:
        self.open: dict[str, Delivery] = {}
        self.closed: list[Delivery] = []

    def send(self, topic: str, key: bytes | None = None, value: bytes = b"") -> Delivery:
        delivery = self.open.get(topic)
        if delivery is None:
            delivery = self.open[topic] = Delivery()
        delivery.count += 1
        return delivery

    def close_batches(self) -> list[Delivery]:
        self.closed += list(self.open.values())
        self.open.clear()
        return self.closed

    def flush(self) -> None:
        for delivery in self.close_batches():
            delivery.is_done = True

    def close(self) -> None:
        self.flush()


def answer(delivery: Delivery, error: BaseException | None = None) -> None:
    delivery.exception, delivery.is_done = error, True


def test_fake_batch_sender_a_refused_batch_makes_confirm_raise_for_every_record_in_it_and_stays_raised() -> None:
    sender = FakeBatchSenderRefusingOnDemand()
    outbox = Outbox(sender)
    outbox.send_raw("node-samples", b"n1", b"a")
    outbox.send_raw("node-scores", b"n1", b"s")
    outbox.send_raw("node-samples", b"n2", b"b")  # joins the first batch
    samples, scores = sender.close_batches()
    answer(scores)  # the later batch acknowledged first: the prefix still waits for the first
    assert outbox.acknowledged() == 0
    answer(samples, ValueError("batch refused"))
    with pytest.raises(ValueError, match="refused"):
        outbox.acknowledged()
    with pytest.raises(ValueError, match="refused"):
        outbox.confirm()
    outbox.send_raw("laggard-checkpoints", b"normalise:0", b"state")  # a checkpoint after the loss...
    with pytest.raises(ValueError, match="refused"):
        outbox.confirm()  # ...is never confirmed, so no offset is committed past the lost outputs


def test_fake_batch_sender_a_checkpoint_waits_for_the_batches_before_it_and_is_saved_with_its_own() -> None:
    sender = FakeBatchSenderRefusingOnDemand()
    outbox = Outbox(sender)
    checkpoints, slot = queued(outbox)
    assert not checkpoints.advance() and "t-checkpoints" not in sender.open  # its outputs are not acknowledged
    (samples,) = sender.close_batches()
    answer(samples)
    assert not checkpoints.advance() and slot.saved == {}  # sent now, not yet acknowledged
    (_, checkpoint) = sender.close_batches()
    answer(checkpoint)
    assert checkpoints.advance() and slot.saved == {"task-events:0": 7}
    assert outbox.confirm() == 0 and outbox.acked == 3
