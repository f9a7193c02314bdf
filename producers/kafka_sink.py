"""The replayer's Kafka sink: records appended to per-partition batches, whole batches handed to aiokafka.

kafka-python's ``KafkaProducer.send`` costs tens of microseconds of Python per record (partitioner, future,
accumulator, record builder); on Google parts 0-9 it was 70 % of ``laggard replay``'s CPU (docs/scale.md,
session 10). Here the replaying thread does per record only a cached (key, partition) look-up, the Avro
encode (``producers.fast_encode``) and one append to aiokafka's C record-batch builder; a background thread
runs an asyncio loop with an ``AIOKafkaProducer`` that sends each full batch (``send_batch``), and each
batch that has waited ``linger_ms``.

The records on the broker are those kafka-python's producer wrote: same keys and values, and the partition of
a key is kafka-python's own ``DefaultPartitioner`` (Java-compatible murmur2) over the topic's sorted
partitions. Order per partition is kept: batches are queued under one lock in the order they are closed and
one coroutine submits them in that order (aiokafka keeps one batch per partition in flight).

Back-pressure: at most ``MAX_PENDING`` full batches wait for the broker; beyond that ``send`` blocks, so memory
stays bounded whatever the reader's speed.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from functools import partial
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError as AIOKafkaError
from aiokafka.errors import KafkaTimeoutError
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from kafka.partitioner.default import DefaultPartitioner

from producers import fast_encode
from streams import kafka_clients
from streams.core.events import Event, JobFinish, JobStart
from streams.errors import BrokerUnavailable
from streams.serde import codec, topics
from streams.settings import Settings

# By measurement (docs/scale.md, session 10): on a local broker no compression costs the least CPU on both
# sides (the replayer compresses, the worker decompresses), and 512 KB batches with 50 ms linger keep the
# producer's per-batch work small next to the per-record work.
COMPRESSION: str | None = None
BATCH_BYTES = 512 * 1024
LINGER_MS = 50
MAX_PENDING = 32  # full batches not yet acknowledged: 16 MB at most
TIMEOUT_S = 30.0  # a broker silent this long, while records wait for it, has stopped answering
MAX_ROUTES = 100_000  # cached (key, partition) per topic; a trace of more jobs recomputes some, memory stays bounded
_Item = tuple[str, int, Any, bool]  # (topic, partition, aiokafka BatchBuilder, counted in the back-pressure)


_PARTITIONER = DefaultPartitioner()


class _Cluster:
    """The three questions kafka-python's partitioner asks its cluster metadata, answered for one topic."""

    def __init__(self, topic: str, partitions: list[int]) -> None:
        self._topic, self._partitions = topic, partitions

    def topics(self) -> set[str]:
        return {self._topic}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return set(self._partitions)

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        return set(self._partitions)


def partition_of(key: bytes, partitions: list[int]) -> int:
    """The partition kafka-python's producer picks for ``key`` among ``partitions`` (its own partitioner)."""
    return int(_PARTITIONER.partition("topic", None, key, None, None, _Cluster("topic", partitions)))


def aiokafka_options(settings: Settings) -> dict[str, Any]:
    """Bootstrap and security settings in aiokafka's keyword names (it takes an SSL context, not files)."""
    options: dict[str, Any] = {"bootstrap_servers": settings.bootstrap_servers.split(","),
                               "security_protocol": settings.security_protocol}  # fmt: skip
    if "SSL" in settings.security_protocol:
        options["ssl_context"] = kafka_clients.tls_context(settings)
    if settings.sasl_mechanism is not None:
        options["sasl_mechanism"] = settings.sasl_mechanism
    if settings.sasl_username is not None:
        options["sasl_plain_username"] = settings.sasl_username
        options["sasl_plain_password"] = settings.sasl_password
    return options


def producer_options(settings: Settings, compression: str | None, batch_bytes: int, linger_ms: int) -> dict[str, Any]:
    """The ``AIOKafkaProducer``'s options: idempotent like kafka-python's producer was (aiokafka's default is not),
    so a retry after a lost acknowledgement cannot write a batch twice. Idempotence needs acks='all'; aiokafka
    keeps one batch per partition in flight, within the broker's limit of 5, and numbers ``send_batch``'s
    batches itself (when it pops them for sending)."""
    return {**aiokafka_options(settings), "acks": "all", "enable_idempotence": True, "compression_type": compression,
            "max_batch_size": batch_bytes, "max_request_size": 4 * batch_bytes, "linger_ms": linger_ms}


class BrokerStopped(BrokerUnavailable):
    """The broker stopped answering during the replay: records waited longer than the sink's timeout."""


class KafkaSink:
    """Publishes events to laggard's topics. After ``close()``, ``sent`` counts acknowledged records and ``failed``
    every other record given to ``send`` (rejected, refused, or not acknowledged in time: none is left uncounted);
    ``stalled`` says the broker stopped answering."""

    def __init__(
        self,
        settings: Settings,
        task_topic: str | None = None,
        job_topic: str | None = None,
        *,
        compression: str | None = COMPRESSION,
        batch_bytes: int = BATCH_BYTES,
        linger_ms: int = LINGER_MS,
        timeout_s: float | None = None,
    ) -> None:
        kafka_clients.probe(settings.bootstrap_servers)  # one clear line at once when nothing listens
        kafka_clients.check_security(settings)
        self.task_topic = task_topic or topics.TASK_EVENTS.name
        self.job_topic = job_topic or topics.JOB_EVENTS.name
        self.bootstrap = settings.bootstrap_servers
        self.records = 0  # appended to a batch: each ends acknowledged (sent) or failed
        self.sent = 0
        self.failed = 0
        self.stalled = False
        self._timeout_s = TIMEOUT_S if timeout_s is None else timeout_s
        self.first_error: str | None = None
        self._encode = fast_encode.encode  # codec.encode's bytes at less CPU
        self._linger_s = linger_ms / 1000
        self._lock = threading.Lock()  # guards the open batches: the linger timer closes them from the loop thread
        self._pending = threading.BoundedSemaphore(MAX_PENDING)
        self._closed = False
        self._open: dict[tuple[str, int], tuple[Any, float]] = {}
        self._routes: dict[str, dict[str, tuple[bytes, int]]] = {self.task_topic: {}, self.job_topic: {}}
        self._loop = asyncio.new_event_loop()
        self._loop.set_exception_handler(self._on_loop_exception)
        self._thread = threading.Thread(target=self._loop.run_forever, name="replay-producer", daemon=True)
        self._thread.start()
        options = producer_options(settings, compression, batch_bytes, linger_ms)
        self._max_request_size = options["max_request_size"]
        try:
            self._partitions = self._call(self._start(options))
        except BaseException:
            self._stop_loop()
            raise

    # --- the replaying thread ------------------------------------------------------------------------------------
    def send(self, event: Event) -> None:
        topic = self.job_topic if isinstance(event, JobStart | JobFinish) else self.task_topic
        route = self._routes[topic].get(event.job_id) or self._route(topic, event.job_id)
        self.send_encoded(topic, route[0], route[1], self._encode(event))

    def send_encoded(self, topic: str, key: bytes, partition: int, value: bytes) -> None:
        """Append one record to its partition's open batch; a full batch goes to the producer."""
        with self._lock:
            entry = self._open.get((topic, partition))
            if entry is not None:
                if entry[0].append(timestamp=None, key=key, value=value) is not None:
                    self.records += 1
                    return
                del self._open[(topic, partition)]
        if entry is not None:
            self._hand_over(topic, partition, entry[0])
        size = DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, [])
        if size > self._max_request_size:  # an empty batch takes any record; the broker would refuse it at delivery
            self.records += 1  # counted as failed by close()
            self.first_error = self.first_error or (
                f"a record of {size:,} bytes (job {key.decode(errors='replace')}) is over the producer's "
                f"max_request_size of {self._max_request_size:,} bytes; not sent")
            return
        with self._lock:
            batch = self._producer.create_batch()
            if batch.append(timestamp=None, key=key, value=value) is None:
                raise ValueError(f"a record of {len(key) + len(value)} bytes does not fit an empty batch")
            self.records += 1
            self._open[(topic, partition)] = (batch, time.monotonic())

    def _hand_over(self, topic: str, partition: int, batch: Any) -> None:
        """Queue a full batch once fewer than MAX_PENDING wait for the broker (waiting outside the lock: the loop
        thread needs it to finish batches). Interrupted while waiting (Ctrl-C), the batch still goes, uncounted.
        No room within the timeout: the broker stopped answering; the batch is dropped (``close()`` counts its
        records as failed) and ``BrokerStopped`` ends the replay."""
        counted = False
        try:
            counted = self._pending.acquire(timeout=self._timeout_s)
            if not counted:
                self.stalled = True
                raise BrokerStopped(self.bootstrap, f"no acknowledgement for {self._timeout_s:.0f} s")
        finally:
            if counted or not self.stalled:
                with self._lock:
                    self._queue((topic, partition, batch, counted))

    def _route(self, topic: str, job_id: str) -> tuple[bytes, int]:
        """The record key and the partition kafka-python's producer would choose for it, cached per job."""
        routes = self._routes[topic]
        if len(routes) >= MAX_ROUTES:
            routes.clear()
        key = codec.encode_key(job_id)
        route = routes[job_id] = (key, partition_of(key, self._partitions[topic]))
        return route

    def close(self) -> None:
        """Send what is open, wait until every record is acknowledged or failed (at most the timeout: then the
        broker stopped answering), stop the producer, and count every record not acknowledged as failed."""
        if self._closed:
            return
        self._closed = True
        try:
            with self._lock:
                for (topic, partition), (batch, _opened) in self._open.items():
                    self._queue((topic, partition, batch, False))
                self._open.clear()
            self._call(self._finish())
        finally:
            self._stop_loop()
            self.failed = self.records - self.sent  # dropped, abandoned (Ctrl-C) or never acknowledged ones too

    # --- the loop thread -------------------------------------------------------------------------------------------
    def _queue(self, item: _Item) -> None:
        """Hand a batch to the sender coroutine; callers hold the lock, so batches queue in closing order."""
        self._loop.call_soon_threadsafe(self._batches.put_nowait, item)

    async def _start(self, options: dict[str, Any]) -> dict[str, list[int]]:
        self._producer = AIOKafkaProducer(**options)
        try:
            await self._producer.start()
            found = {topic: sorted(await self._producer.partitions_for(topic)) for topic in self._routes}
        except (AIOKafkaError, OSError) as exc:
            await self._producer.stop()
            raise BrokerUnavailable(",".join(options["bootstrap_servers"]), str(exc)) from None
        self._batches: asyncio.Queue[_Item | None] = asyncio.Queue()
        self._deliveries: list[asyncio.Future[Any]] = []
        self._sender = asyncio.ensure_future(self._send_batches())
        self._linger = asyncio.ensure_future(self._close_lingering())
        return found

    async def _send_batches(self) -> None:
        while (item := await self._batches.get()) is not None:
            topic, partition, batch, counted = item
            count = batch.record_count()
            batch.close()  # else aiokafka lingers linger_ms again on a batch the linger timer or close() queued
            try:
                delivery = await self._producer.send_batch(batch, topic, partition=partition)
            except Exception as exc:  # counted and reported, as kafka-python's errback did
                self._delivered(count, counted, exc)
                continue
            delivery.add_done_callback(partial(self._on_delivery, count, counted))
            self._deliveries.append(delivery)

    def _on_delivery(self, count: int, counted: bool, delivery: asyncio.Future[Any]) -> None:
        cancelled = delivery.cancelled()  # never acknowledged: not a success
        self._delivered(count, counted, KafkaTimeoutError("cancelled") if cancelled else delivery.exception())

    def _delivered(self, count: int, counted: bool, error: BaseException | None) -> None:
        if error is None:
            self.sent += count
        else:
            self.failed += count
            self.first_error = self.first_error or repr(error)
        if counted:
            self._pending.release()

    async def _close_lingering(self) -> None:
        """Queue each batch once it has been open ``linger_ms``: a paced replay's records do not wait for more.
        Wakes when the oldest open batch is due, not every ``linger_ms`` (that let a batch opened just after a
        wake wait almost twice ``linger_ms``)."""
        wait = self._linger_s
        while True:
            await asyncio.sleep(wait)
            now = time.monotonic()
            with self._lock:
                due = [tp for tp, (_batch, opened) in self._open.items() if now - opened >= self._linger_s]
                for topic, partition in due:
                    self._queue((topic, partition, self._open.pop((topic, partition))[0], False))
                oldest = min((opened for _batch, opened in self._open.values()), default=None)
            wait = self._linger_s if oldest is None else max(0.001, oldest + self._linger_s - now)

    async def _finish(self) -> None:
        self._linger.cancel()
        self._batches.put_nowait(None)
        try:
            await asyncio.wait_for(self._drain(), 1.0 if self.stalled else self._timeout_s)
        except TimeoutError:
            self.stalled = True
            self._sender.cancel()
            self._fail_all(KafkaTimeoutError(f"no acknowledgement for {self._timeout_s:.0f} s"))
        try:
            await asyncio.wait_for(self._producer.stop(), self._timeout_s)
        except TimeoutError:
            self.stalled = True

    async def _drain(self) -> None:
        await self._sender
        if self._deliveries:
            await asyncio.wait(self._deliveries)  # not gather: a timeout must not cancel (and so end) the deliveries

    def _call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    async def _abandon(self) -> None:
        """After an interrupted close: fail what waits, stop the producer briefly, and end every task of the loop."""
        if hasattr(self, "_producer"):
            self._fail_all(KafkaTimeoutError("the replay stopped before an acknowledgement"))
            with contextlib.suppress(TimeoutError, AIOKafkaError, OSError):
                await asyncio.wait_for(self._producer.stop(), 1.0)
        rest = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    def _fail_all(self, error: BaseException) -> None:
        # aiokafka never expires an idempotent producer's batches: fail them, or stop() waits for them forever
        fail_all = getattr(self._producer._message_accumulator, "fail_all", None)
        if fail_all is not None:
            fail_all(error)

    def _on_loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if self._closed and isinstance(context.get("exception"), AIOKafkaError):
            return  # a batch close() failed on purpose (its records are counted); aiokafka never retrieves it
        loop.default_exception_handler(context)

    def _stop_loop(self) -> None:
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):  # best effort: the loop stops below whatever happened
            asyncio.run_coroutine_threadsafe(self._abandon(), self._loop).result(5.0)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
