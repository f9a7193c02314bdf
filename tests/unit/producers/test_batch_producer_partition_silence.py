"""A partition the broker never answers fails within the producer's timeout even while the broker keeps answering
another partition (a partition whose leader is gone during a rebalance): before, any answer reset one broker-wide
clock, so its batch, and the ``flush``/``close`` waiting for it, waited without limit. The broker is
``FakeBrokerAnsweringPartitionZero``: aiokafka's producer with a broker that acknowledges partition 0's batches at
once and never partition 1's."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from aiokafka.errors import KafkaTimeoutError
from aiokafka.producer.message_accumulator import BatchBuilder

from streams import batch_producer
from streams.aiokafka_producer import BrokerStopped
from streams.batch_producer import BatchProducer
from streams.settings import Settings
from tests.unit.producers.test_kafka_sink_stalls import SilentBrokerProducer

TIMEOUT_S = 0.5


class FakeBrokerAnsweringPartitionZero(SilentBrokerProducer):
    """Fake ``AIOKafkaProducer``: partition 0's batches are acknowledged at once, partition 1's never (until
    ``fail_all``); ``stop()`` waits for every batch, as aiokafka's does for an idempotent producer."""

    async def send_batch(self, batch: BatchBuilder, topic: str, *, partition: int) -> asyncio.Future[Any]:
        answer = asyncio.get_running_loop().create_future()
        if partition == 0:
            answer.set_result(None)
        else:
            self._deliveries.append(answer)
        return answer


@pytest.fixture
def producer(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(batch_producer, "AIOKafkaProducer", FakeBrokerAnsweringPartitionZero)
    made = BatchProducer(Settings(bootstrap_servers="127.0.0.1:9"), batch_bytes=1024, linger_ms=5,
                         timeout_s=TIMEOUT_S)
    yield made
    made.close()


def test_a_partition_never_answered_fails_in_time_while_another_keeps_answering(producer: BatchProducer) -> None:
    stuck = producer.send("t", b"k", b"never answered", partition=1)
    started = time.monotonic()
    while not stuck.is_done:  # partition 0 answers every batch meanwhile
        assert time.monotonic() - started < 10, "the unanswered batch waited on while partition 0 answered"
        try:
            producer.send("t", b"k", b"answered", partition=0)
        except BrokerStopped:  # the stall, seen by the sending thread first
            break
        time.sleep(0.005)
    _until(lambda: stuck.is_done)
    assert stuck.failed() and isinstance(stuck.exception, KafkaTimeoutError)
    assert "stopped answering: no acknowledgement for 0.5 s" in str(stuck.exception)
    assert producer.stalled and time.monotonic() - started < 5 * TIMEOUT_S + 2
    assert producer.sent > 0  # partition 0 was answered all along: only the per-partition clock stops this


def _until(condition: Any) -> None:
    deadline = time.monotonic() + 5
    while not condition():
        assert time.monotonic() < deadline, "not within 5 s"
        time.sleep(0.01)


def test_close_ends_in_time_when_one_partition_is_never_answered(producer: BatchProducer) -> None:
    answered = producer.send("t", b"k", b"answered", partition=0)
    producer.send("t", b"k", b"never answered", partition=1)
    closing = threading.Thread(target=producer.close, daemon=True)
    started = time.monotonic()
    closing.start()
    closing.join(10)
    assert not closing.is_alive(), "close() still waiting for the partition the broker never answers"
    assert time.monotonic() - started < 5 * TIMEOUT_S + 2
    assert answered.is_done and not answered.failed()
    assert (producer.records, producer.sent, producer.failed) == (2, 1, 1)
