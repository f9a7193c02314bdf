"""A timer of the batch producer that raises (the linger timer, the silence watchdog) stops the producer with its
error instead of dying unseen: else batches would linger, or wait unwatched, for good. The broker is
``FakeBrokerAnsweringPartitionZero`` (tests/unit/producers/test_batch_producer_partition_silence.py)."""

from __future__ import annotations

import threading
import time

import pytest

from streams import batch_producer
from streams.aiokafka_producer import BrokerStopped
from streams.batch_producer import BatchProducer
from streams.settings import Settings
from tests.unit.producers.test_batch_producer_partition_silence import FakeBrokerAnsweringPartitionZero


async def _broken_timer(self: BatchProducer) -> None:
    raise RuntimeError("the linger timer broke")


def test_a_timer_that_raises_stalls_the_producer_with_its_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch_producer, "AIOKafkaProducer", FakeBrokerAnsweringPartitionZero)
    monkeypatch.setattr(BatchProducer, "_close_lingering", _broken_timer)
    producer = BatchProducer(Settings(bootstrap_servers="127.0.0.1:9"), batch_bytes=1024, linger_ms=5)
    deadline = time.monotonic() + 5
    while not producer.stalled:
        assert time.monotonic() < deadline, "the producer went on without its linger timer"
        time.sleep(0.01)
    assert producer.first_error is not None and "the linger timer broke" in producer.first_error
    with pytest.raises(BrokerStopped):
        producer.send("t", b"k", b"v", partition=0)
    closing = threading.Thread(target=producer.close, daemon=True)
    closing.start()
    closing.join(10)
    assert not closing.is_alive()
