"""The direct engine's outputs through the real ``streams.batch_producer.BatchProducer``: a checkpoint is never
sent, let alone saved, before the broker acknowledged every output it covers; a broker that stops answering ends
the worker's wait within the producer's timeout (a failure, never a hang nor a silent loss); a record over the
request limit is refused with its reason. The broker is ``HeldBroker``: aiokafka's producer with a broker that
takes each batch and answers it only when the test says (never, for a broker that went silent)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.errors import KafkaTimeoutError, MessageSizeTooLargeError
from aiokafka.producer.message_accumulator import BatchBuilder
from kafka.errors import KafkaError

from streams import batch_producer
from streams.batch_producer import BatchProducer
from streams.engine.store import Checkpoints, CheckpointStore, Outbox, OutputLost, Slot, as_kafka_errors
from streams.settings import Settings

CHECKPOINTS = "t-checkpoints"


class HeldBroker:
    """``AIOKafkaProducer`` whose broker takes every batch (``taken``: topic, records, its future) and answers it
    only through ``answer``; ``stop()`` waits for every batch, as aiokafka's does for an idempotent producer."""

    def __init__(self, **options: Any) -> None:
        self._batch_bytes = options["max_batch_size"]
        self.max_request_size = options["max_request_size"]
        self.taken: list[tuple[str, int, asyncio.Future[Any]]] = []
        self._message_accumulator = SimpleNamespace(fail_all=self._fail_all)
        BROKERS.append(self)

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()

    async def partitions_for(self, topic: str) -> set[int]:
        return {0}

    def create_batch(self) -> BatchBuilder:
        return BatchBuilder(self._batch_bytes, 0)

    async def send_batch(self, batch: BatchBuilder, topic: str, *, partition: int) -> asyncio.Future[Any]:
        future = asyncio.get_running_loop().create_future()
        self.taken.append((topic, batch.record_count(), future))
        return future

    def answer(self, topic: str) -> None:
        """Acknowledge every batch of ``topic`` taken so far (from the test's thread)."""
        futures = [future for taken, _count, future in self.taken if taken == topic]
        self.loop.call_soon_threadsafe(lambda: [f.set_result(None) for f in futures if not f.done()])

    def topics(self) -> list[str]:
        return [topic for topic, _count, _future in self.taken]

    def _fail_all(self, error: BaseException) -> None:
        for _topic, _count, future in self.taken:
            if not future.done():
                future.set_exception(error)

    async def stop(self) -> None:
        await asyncio.gather(*(future for _t, _c, future in self.taken), return_exceptions=True)


BROKERS: list[HeldBroker] = []


def _outbox(monkeypatch: pytest.MonkeyPatch, timeout_s: float) -> Iterator[Outbox]:
    monkeypatch.setattr(batch_producer, "AIOKafkaProducer", HeldBroker)
    producer = BatchProducer(Settings(bootstrap_servers="127.0.0.1:9"), batch_bytes=64 * 1024, linger_ms=10,
                             max_request_size=1024 * 1024, timeout_s=timeout_s)
    box = Outbox(producer)
    yield box
    _within(10, box.close)


@pytest.fixture
def outbox(monkeypatch: pytest.MonkeyPatch) -> Iterator[Outbox]:
    """An outbox whose producer waits the default 30 s for an answer: a busy machine's pause stalls nothing."""
    yield from _outbox(monkeypatch, batch_producer.TIMEOUT_S)


@pytest.fixture
def silent_outbox(monkeypatch: pytest.MonkeyPatch) -> Iterator[Outbox]:
    """An outbox whose producer gives the broker 0.5 s: for the tests of a broker that stopped answering."""
    yield from _outbox(monkeypatch, 0.5)


def _within(seconds: float, work: Any) -> Any:
    """``work()``'s result or exception, failing the test if it has not returned in ``seconds`` (it hung)."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(work())
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"still running after {seconds} s"
    return outcome[0]


def _until(condition: Any, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not within 5 s"
        time.sleep(0.01)


def queued(outbox: Outbox) -> tuple[Checkpoints, Slot[dict[str, int]]]:
    """Two outputs, then a due checkpoint of the state that made them."""
    checkpoints = Checkpoints(outbox, CheckpointStore(Settings(app_id="t"), outbox))
    slot: Slot[dict[str, int]] = Slot("normalise:0", {})
    slot.hold("task-events", 0, 7)
    outbox.send_raw("node-samples", b"n1", b"a")
    outbox.send_raw("node-samples", b"n2", b"b")
    checkpoints.queue(slot, b"state")
    return checkpoints, slot


def test_a_checkpoint_goes_to_the_broker_only_after_its_outputs_are_acknowledged(outbox: Outbox) -> None:
    checkpoints, slot = queued(outbox)
    broker = BROKERS[-1]
    _until(lambda: broker.topics() == ["node-samples"])  # the outputs' batch, after its linger
    time.sleep(0.1)
    assert not checkpoints.advance() and broker.topics() == ["node-samples"]  # unacknowledged: no checkpoint
    broker.answer("node-samples")
    _until(lambda: outbox.acknowledged() == 2)
    assert not checkpoints.advance() and slot.saved == {}  # sent now, not yet acknowledged itself
    _until(lambda: CHECKPOINTS in broker.topics())
    broker.answer(CHECKPOINTS)
    _until(checkpoints.advance)
    assert slot.saved == {"task-events:0": 7}


def test_a_broker_that_stops_answering_fails_the_outputs_in_time_and_no_checkpoint_covers_them(
    silent_outbox: Outbox,
) -> None:
    outbox = silent_outbox
    checkpoints, slot = queued(outbox)
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError, match=r"stopped answering: no acknowledgement for 0\.5 s"):
        while not checkpoints.advance():  # the worker's loop: each turn moves the checkpoints on, never waits
            assert time.monotonic() - started < 10, "the outputs neither acknowledged nor failed"
            time.sleep(0.01)
    assert slot.saved == {} and CHECKPOINTS not in BROKERS[-1].topics()
    with pytest.raises(KafkaTimeoutError):
        outbox.confirm()  # sticky: a later checkpoint cannot be confirmed over the lost outputs either


def test_a_stop_waiting_for_its_checkpoints_on_a_silent_broker_ends_with_one_kafka_error(
    silent_outbox: Outbox,
) -> None:
    """The stop and the rebalance wait for their checkpoints (``drain``): they end, as a kafka-python error the
    worker command reports in one line, instead of waiting for good."""
    checkpoints, slot = queued(silent_outbox)

    def drain() -> None:
        with as_kafka_errors():
            checkpoints.drain()

    lost = _within(10, drain)
    assert isinstance(lost, OutputLost) and isinstance(lost, KafkaError), lost
    assert str(lost) == ("KafkaTimeoutError: the broker at 127.0.0.1:9 stopped answering: no acknowledgement for "
                         "0.5 s"), str(lost)
    assert slot.saved == {}


def test_an_output_over_the_request_limit_is_refused_with_its_reason_and_nothing_after_it_is_confirmed(
    outbox: Outbox,
) -> None:
    outbox.send_raw("blacklist-snapshot", b"s", b"x" * 2 * 1024 * 1024)  # over the 1 MB request limit
    with pytest.raises(MessageSizeTooLargeError, match=r"max_request_size of 1,048,576 bytes; not sent"):
        outbox.acknowledged()
    outbox.send_raw(CHECKPOINTS, b"normalise:0", b"state")
    with pytest.raises(MessageSizeTooLargeError):
        outbox.confirm()
    broker = BROKERS[-1]
    assert "blacklist-snapshot" not in broker.topics()  # never handed to the broker
    _until(lambda: CHECKPOINTS in broker.topics())
    broker.answer(CHECKPOINTS)  # the broker answers the rest: the stop need not wait out the timeout


def test_the_worker_waits_for_its_outputs_as_long_as_kafka_python_did_and_the_replayer_30_s() -> None:
    """A 30-60 s broker restart must not end the worker (kafka-python's producer waited 120 s for it); the
    replayer keeps its 30 s, so a replay against a dead broker ends soon."""
    from streams.engine.worker import OUTPUT_OPTIONS

    assert OUTPUT_OPTIONS["timeout_s"] == 120.0
    assert batch_producer.TIMEOUT_S == 30.0


def test_aiokafkas_own_request_timeout_never_ends_the_workers_wait_before_its_120_s() -> None:
    """aiokafka's request timeout (40 s by default) also bounds a batch's wait behind its partition's previous one:
    left at the default it failed the worker's outputs at 40 s of a broker restart, not 120 s."""
    from streams.aiokafka_producer import producer_options
    from streams.engine.worker import OUTPUT_OPTIONS

    settings = Settings(bootstrap_servers="127.0.0.1:9")
    worker = producer_options(settings, None, 1024, timeout_s=OUTPUT_OPTIONS["timeout_s"])
    assert worker["request_timeout_ms"] > OUTPUT_OPTIONS["timeout_s"] * 1000
    assert producer_options(settings, None, 1024, timeout_s=30.0)["request_timeout_ms"] == 40_000  # aiokafka's
