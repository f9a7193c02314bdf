"""A broker that stops answering mid-replay ends the replay within the sink's timeout, with every record not
acknowledged counted as failed and one line for the user (it hung for good before, flooding stderr with
aiokafka's reconnect errors). The broker is ``SilentBrokerProducer``: aiokafka's producer with a broker that
takes batches and never acknowledges them."""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.errors import MessageSizeTooLargeError
from aiokafka.producer.message_accumulator import BatchBuilder
from click.testing import CliRunner

from laggard.cli import cli
from producers.kafka_sink import BrokerStopped, KafkaSink
from streams import batch_producer, kafka_clients
from streams.core.events import JobStart
from streams.settings import Settings


class SilentBrokerProducer:
    """``AIOKafkaProducer`` after its broker went silent: ``send_batch`` takes each batch, no delivery ever
    completes, and ``stop()`` waits for every batch, as aiokafka's does for an idempotent producer."""

    def __init__(self, **options: Any) -> None:
        self._batch_bytes = options["max_batch_size"]
        self._deliveries: list[asyncio.Future[Any]] = []
        self._message_accumulator = SimpleNamespace(fail_all=self._fail_all)

    async def start(self) -> None:
        pass

    async def partitions_for(self, topic: str) -> set[int]:
        return {0, 1}

    def create_batch(self) -> BatchBuilder:
        return BatchBuilder(self._batch_bytes, 0)  # 0: no compression

    async def send_batch(self, batch: BatchBuilder, topic: str, *, partition: int) -> asyncio.Future[Any]:
        logging.getLogger("aiokafka").error("Unable connect to node with id 1: [Errno 111] Connection refused")
        delivery = asyncio.get_running_loop().create_future()
        self._deliveries.append(delivery)
        return delivery

    def _fail_all(self, error: BaseException) -> None:
        for delivery in self._deliveries:
            if not delivery.done():
                delivery.set_exception(error)

    async def stop(self) -> None:
        await asyncio.gather(*self._deliveries, return_exceptions=True)


@pytest.fixture
def silent_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch_producer, "AIOKafkaProducer", SilentBrokerProducer)
    monkeypatch.setattr(kafka_clients, "probe", lambda bootstrap: None)
    monkeypatch.setattr(kafka_clients, "create_topics", lambda settings, topics: None)
    monkeypatch.setattr(kafka_clients, "copartitioning_problem", lambda settings: None)
    monkeypatch.setattr(batch_producer, "TIMEOUT_S", 0.5)


def _within(seconds: float, work: Any) -> Any:
    """``work()``'s result, or a failure if it has not returned in ``seconds`` (it hung: the thread is left)."""
    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(_outcome(work)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"still running after {seconds} s"
    return outcome[0]


def _outcome(work: Any) -> Any:
    try:
        return work()
    except Exception as exc:
        return exc


@pytest.mark.usefixtures("silent_broker")
def test_a_silent_broker_stops_the_sink_and_every_record_counts_as_failed() -> None:
    sink = KafkaSink(Settings(bootstrap_servers="127.0.0.1:9"), batch_bytes=1024)

    def replay() -> int:
        for i in range(1_000_000):  # far more full batches than MAX_PENDING: send must give up waiting for room
            sink.send(JobStart(f"j{i}", i))
        return i

    started = time.monotonic()
    stopped = _within(20, replay)
    assert isinstance(stopped, BrokerStopped), stopped
    assert _within(20, sink.close) is None
    assert time.monotonic() - started < 10
    assert sink.stalled and sink.records > 0
    assert (sink.sent, sink.failed) == (0, sink.records)


@pytest.mark.usefixtures("silent_broker")
def test_the_replay_command_says_so_in_one_line_and_fails() -> None:
    args = ["replay", "--trace", "synthetic:nodes=12,slow=2,jobs=30,seed=4", "--bootstrap", "127.0.0.1:9"]
    result = _within(30, lambda: CliRunner().invoke(cli, args))
    assert result.exit_code != 0
    assert "Unable connect" not in result.stderr  # aiokafka's reconnect errors are muted during the replay
    lines = [line for line in result.stderr.splitlines() if "stopped answering" in line]
    assert len(lines) == 1, result.stderr
    assert re.fullmatch(r"Error: the broker at 127\.0\.0\.1:9 stopped answering; ([\d,]+) of \1 events were not "
                        r"acknowledged", lines[0]), lines[0]


def _interrupted_close(sink: KafkaSink) -> None:
    """Ctrl-C while ``close()`` waits for the broker: the wait raises KeyboardInterrupt."""
    producer = sink._producer
    call = producer._call

    def interrupted(coroutine: Any) -> Any:
        if getattr(coroutine, "__name__", "") == "_drain":
            coroutine.close()
            raise KeyboardInterrupt
        return call(coroutine)

    producer._call = interrupted  # type: ignore[method-assign]


@pytest.mark.usefixtures("silent_broker")
def test_records_abandoned_by_ctrl_c_during_close_count_as_failed() -> None:
    sink = KafkaSink(Settings(bootstrap_servers="127.0.0.1:9"))
    for i in range(10):
        sink.send(JobStart(f"j{i}", i))
    _interrupted_close(sink)
    with pytest.raises(KeyboardInterrupt):
        sink.close()
    assert (sink.records, sink.sent, sink.failed) == (10, 0, 10)


@pytest.mark.usefixtures("silent_broker")
def test_the_replay_command_fails_on_records_abandoned_by_ctrl_c(monkeypatch: pytest.MonkeyPatch) -> None:
    made = KafkaSink.__init__

    def init(self: KafkaSink, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        _interrupted_close(self)

    monkeypatch.setattr(KafkaSink, "__init__", init)
    args = ["replay", "--trace", "synthetic:nodes=12,slow=2,jobs=30,seed=4", "--bootstrap", "127.0.0.1:9"]
    result = _within(30, lambda: CliRunner().invoke(cli, args))
    assert result.exit_code != 0
    assert re.search(r"Error: ([\d,]+) of \1 events were not acknowledged: .*stopped before an ack",
                     result.stderr), (
        result.stderr)


class AnsweringBrokerProducer(SilentBrokerProducer):
    """``AIOKafkaProducer`` with a broker that acknowledges every batch up to its request limit at once and
    refuses a larger one, as Kafka does (MessageSizeTooLarge), only at delivery."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.max_request_size = options["max_request_size"]
        self.batch_sizes: list[int] = []
        ANSWERING.append(self)

    async def send_batch(self, batch: BatchBuilder, topic: str, *, partition: int) -> asyncio.Future[Any]:
        delivery = asyncio.get_running_loop().create_future()
        self.batch_sizes.append(batch.size())
        if batch.size() > self.max_request_size:
            delivery.set_exception(MessageSizeTooLargeError())
        else:
            delivery.set_result(None)
        return delivery


ANSWERING: list[AnsweringBrokerProducer] = []


def test_a_record_over_the_request_limit_is_rejected_with_its_reason_and_the_replay_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(batch_producer, "AIOKafkaProducer", AnsweringBrokerProducer)
    monkeypatch.setattr(kafka_clients, "probe", lambda bootstrap: None)
    sink = KafkaSink(Settings(bootstrap_servers="127.0.0.1:9"), batch_bytes=512 * 1024)  # requests up to 2 MB
    sink.send(JobStart("j1", 1))
    sink.send_encoded(sink.job_topic, b"j2", 0, b"x" * 3 * 1024 * 1024)  # 3 MB: an empty batch would take it
    sink.send(JobStart("j3", 3))
    sink.close()
    assert (sink.records, sink.sent, sink.failed) == (3, 2, 1)
    assert sink.first_error is not None and "over the producer's max_request_size of 2,097,152 bytes" in (
        sink.first_error)
    assert max(ANSWERING[-1].batch_sizes) <= 2 * 1024 * 1024  # never handed to the producer


def test_a_lingering_batch_goes_to_the_producer_closed_so_it_does_not_linger_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """aiokafka sends a batch at once only when it is closed (else after its own linger_ms): a paced record would
    wait the sink's linger, then the producer's."""
    closed: list[bool] = []

    class Recording(AnsweringBrokerProducer):
        async def send_batch(self, batch: BatchBuilder, topic: str, *, partition: int) -> asyncio.Future[Any]:
            closed.append(batch.closed())
            return await super().send_batch(batch, topic, partition=partition)

    monkeypatch.setattr(batch_producer, "AIOKafkaProducer", Recording)
    monkeypatch.setattr(kafka_clients, "probe", lambda bootstrap: None)
    sink = KafkaSink(Settings(bootstrap_servers="127.0.0.1:9"), linger_ms=20)
    try:
        sink.send(JobStart("j1", 1))  # queued by the linger timer
        deadline = time.monotonic() + 5
        while sink.sent == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        sink.send(JobStart("j2", 2))  # queued by close()
    finally:
        sink.close()
    assert closed == [True, True]


def test_a_paced_record_waits_about_linger_ms_whenever_it_comes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The linger timer wakes when the oldest open batch is due; waking every linger_ms let a record that came
    just after a wake wait almost twice linger_ms (before the producer's own linger, see the test above)."""
    monkeypatch.setattr(batch_producer, "AIOKafkaProducer", AnsweringBrokerProducer)
    monkeypatch.setattr(kafka_clients, "probe", lambda bootstrap: None)
    sink = KafkaSink(Settings(bootstrap_servers="127.0.0.1:9"), linger_ms=200)
    waits = []
    try:
        for i in range(6):  # 230 ms apart: each comes 30 ms later after a 200 ms tick than the one before
            time.sleep(0.23)
            before, started = sink.sent, time.monotonic()
            sink.send(JobStart(f"j{i}", i))
            while sink.sent == before and time.monotonic() - started < 5:
                time.sleep(0.002)
            waits.append(time.monotonic() - started)
    finally:
        sink.close()
    assert max(waits) < 0.3, [round(w, 3) for w in waits]
