"""Records appended to per-partition batches, whole batches handed to aiokafka on a loop thread of their own.

kafka-python's ``KafkaProducer.send`` costs tens of microseconds of Python per record: 70 % of ``laggard replay``'s
CPU and ~20 us of the direct worker's ~34 us per output record (docs/scale.md, session 10). Here the calling thread
does per record a cached partition look-up and one append to aiokafka's C record-batch builder under a lock; a loop
thread's ``AIOKafkaProducer`` sends each full batch (``send_batch``), each batch open ``linger_ms``, and each batch
of a ``prompt`` topic on the loop's next turn. The replayer's sink (producers.kafka_sink) and the direct worker's
outputs (streams.engine) both use it.

The records on the broker are those kafka-python's producer wrote: same keys and values, same partition (its
``DefaultPartitioner``'s murmur2 of the key over the sorted partitions; no key: a random one). A partition's batches
are submitted in the order they were closed (aiokafka keeps one per partition in flight, retried in place); other
partitions do not wait for it.

What kafka-python's producer guaranteed, kept (review of h41, h46): idempotent with acks=all, so a retry after a
lost acknowledgement cannot write a batch twice; a record over ``max_request_size`` refused before it is batched,
with its reason; a partition whose batches wait ``timeout_s`` without an answer (counted per partition: answers on
other partitions do not hide one that stopped, as a partition whose leader is gone) fails every batch not
acknowledged and
sets ``stalled`` (aiokafka never expires an idempotent producer's batches), and ``send`` then raises
``BrokerStopped``. ``records`` counts what ``send`` took; after ``close`` each is in ``sent`` or ``failed``.

``send`` returns the record's batch's ``Delivery``, shaped as the kafka-python future the direct engine read
(``is_done``, ``failed()``, ``exception``): a batch is acknowledged or refused as a whole. Back-pressure: at most
``max_pending`` full batches wait for the broker; beyond that ``send`` blocks (``timeout_s`` at most).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Iterable
from functools import partial
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError as AIOKafkaError
from aiokafka.errors import KafkaTimeoutError, MessageSizeTooLargeError
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from streams.aiokafka_producer import BrokerStopped, Delivery, producer_options
from streams.errors import BrokerUnavailable
from streams.partitioning import KeyPartitions
from streams.settings import Settings

log = logging.getLogger(__name__)
MAX_PENDING = 32  # full batches not yet acknowledged, by default
TIMEOUT_S = 30.0  # a partition whose batches wait this long for an answer: the broker stopped answering


NO_HEADERS: list[tuple[str, bytes]] = []  # aiokafka's record builder wants a list; shared, never changed
_Open = tuple[Any, float, Delivery]  # (aiokafka BatchBuilder, when it was opened, its delivery)


class BatchProducer:
    """Sends raw (key, value) records in whole batches; ``sent`` and ``failed`` count records as answered."""

    def __init__(self, settings: Settings, *, batch_bytes: int, linger_ms: int, prompt_topics: Iterable[str] = (),
                 topics: Iterable[str] = (), max_pending: int = MAX_PENDING, compression: str | None = None,
                 max_request_size: int | None = None, timeout_s: float | None = None,
                 name: str = "batch-producer") -> None:
        self.prompt_topics = frozenset(prompt_topics)
        self.bootstrap = settings.bootstrap_servers
        self.records = 0  # given to send: each ends acknowledged (sent) or failed
        self.sent = 0  # records acknowledged
        self.failed = 0  # records refused, lost with their batch, or not acknowledged in time
        self.stalled = False  # the broker stopped answering (see the module's docstring)
        self.first_error: str | None = None
        self._timeout_s = TIMEOUT_S if timeout_s is None else timeout_s
        self._linger_s = linger_ms / 1000
        self._lock = threading.Lock()  # guards the open batches and the counts: the loop thread changes them too
        self._pending = threading.BoundedSemaphore(max_pending)
        self._open: dict[tuple[str, int], _Open] = {}
        self._unanswered: dict[tuple[str, int], int] = {}  # per partition: batches taken to send, not yet answered
        self._outstanding = 0  # their sum
        # per partition with batches unanswered: its last answer, or when its oldest unanswered batch began to wait
        self._waiting: dict[tuple[str, int], float] = {}
        self._partitions: dict[str, list[int]] = {}
        self._keys = KeyPartitions()
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._loop.set_exception_handler(self._on_loop_exception)
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()
        options = producer_options(settings, compression, batch_bytes, max_request_size, self._timeout_s)
        self._max_request_size: int = options["max_request_size"]
        try:
            self._call(self._start(options, list(topics)))
        except BaseException:
            self._stop_loop()
            raise

    # --- the calling thread ----------------------------------------------------------------------------------------
    def send(self, topic: str, key: bytes | None = None, value: bytes = b"", partition: int | None = None,
             headers: list[tuple[str, bytes]] = NO_HEADERS) -> Delivery:
        """Append one record to its partition's open batch (a full one goes to the producer); its batch's delivery."""
        if partition is None:
            partition = self.partition(topic, key)
        tp = (topic, partition)
        with self._lock:
            entry = self._open.get(tp)
            if entry is not None:
                if entry[0].append(timestamp=None, key=key, value=value, headers=headers) is not None:
                    return entry[2]
                self._take(tp)
        if entry is not None:
            self._hand_over(tp, entry)
        return self._open_batch(tp, key, value, headers)

    def _open_batch(self, tp: tuple[str, int], key: bytes | None, value: bytes,
                    headers: list[tuple[str, bytes]] = NO_HEADERS) -> Delivery:
        """A new batch for the partition, with the record in it; a record over the request limit is refused."""
        if self.stalled:
            raise BrokerStopped(self.bootstrap, self._silence())
        size = DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, headers)
        if size > self._max_request_size:  # an empty batch takes any record; the broker would refuse it at delivery
            return self._refuse(key, size)
        with self._lock:
            batch, delivery = self._producer.create_batch(), Delivery()
            batch.append(timestamp=None, key=key, value=value, headers=headers)  # a batch's first record always fits
            self._open[tp] = (batch, time.monotonic(), delivery)
            if tp[0] in self.prompt_topics:  # no linger: closed on the loop's next turn, with what joined it
                self._loop.call_soon_threadsafe(self._close_if_open, tp, batch)
        return delivery

    def _refuse(self, key: bytes | None, size: int) -> Delivery:
        shown = "none" if key is None else key.decode(errors="replace")
        error = MessageSizeTooLargeError(f"a record of {size:,} bytes (key {shown}) is over the producer's "
                                         f"max_request_size of {self._max_request_size:,} bytes; not sent")
        delivery = Delivery()
        delivery.count = 1
        with self._lock:
            self.records += 1
            self._settle(delivery, error)
        return delivery

    def partition(self, topic: str, key: bytes | None) -> int:
        """kafka-python's ``DefaultPartitioner``'s choice, each key hashed once (streams.partitioning)."""
        return self._keys.partition(key, self._partitions.get(topic) or self._learn(topic))

    def partitions(self, topic: str) -> list[int]:
        return self._partitions.get(topic) or self._learn(topic)

    def _learn(self, topic: str) -> list[int]:
        found: list[int] = self._call(self._partitions_for(topic))
        self._partitions[topic] = found
        return found

    def _hand_over(self, tp: tuple[str, int], entry: _Open) -> None:
        """Queue a full batch once fewer than ``max_pending`` wait for the broker (waiting outside the lock: the
        loop thread needs it to close batches). Interrupted while waiting (Ctrl-C), the batch still goes, uncounted.
        No room within the timeout, or the broker stopped answering meanwhile: the batch fails unsent and
        ``BrokerStopped`` says so."""
        counted = silent = False
        try:
            counted = self._pending.acquire(timeout=self._timeout_s)
            silent = not counted or self.stalled
        finally:
            with self._lock:
                if not silent:
                    self._queue(tp, entry[0], entry[2], counted)
        if silent:
            self.stalled = True  # at once for this thread; the loop fails what waits (_stall)
            self._loop.call_soon_threadsafe(self._answered, tp, entry[2], counted, self._silence())
            self._loop.call_soon_threadsafe(self._stall)
            raise BrokerStopped(self.bootstrap, self._silence())

    def flush(self) -> None:
        """Send what is open and wait until the broker answered every batch (an answer may be a refusal; a broker
        silent for the timeout fails what waits)."""
        with self._lock:
            for tp in list(self._open):
                batch, _opened, delivery = self._take(tp)
                self._queue(tp, batch, delivery, False)
        self._call(self._drain())

    def close(self) -> None:
        """Flush, then stop the producer and its thread; every record not acknowledged is counted as failed."""
        if self._closed:
            return
        self._closed = True
        try:
            self.flush()
            self._call(self._finish())
        finally:
            self._stop_loop()
            with self._lock:  # batches still open after an interrupted close were never sent
                self.records += sum(batch.record_count() for batch, _opened, _d in self._open.values())
                self._open.clear()
                self.failed = self.records - self.sent

    # --- the loop thread -------------------------------------------------------------------------------------------
    def _queue(self, tp: tuple[str, int], batch: Any, delivery: Delivery, counted: bool) -> None:
        """Chain the batch after its partition's previous one; callers hold the lock, so batches go in closing order."""
        self._loop.call_soon_threadsafe(self._chain, tp, batch, delivery, counted)

    def _chain(self, tp: tuple[str, int], batch: Any, delivery: Delivery, counted: bool) -> None:
        before = self._chains.get(tp)
        self._chains[tp] = self._loop.create_task(self._submit(before, tp, batch, delivery, counted))

    async def _submit(self, before: asyncio.Task[None] | None, tp: tuple[str, int], batch: Any, delivery: Delivery,
                      counted: bool) -> None:
        if before is not None:
            await before  # never raises: every outcome is recorded on its delivery
        if self.stalled:  # nothing more goes to a broker that stopped answering
            self._answered(tp, delivery, counted, self._silence())
            return
        batch.close()  # aiokafka sends a closed batch at once
        try:
            answer = await self._producer.send_batch(batch, tp[0], partition=tp[1])
        except Exception as exc:  # recorded on the delivery, as kafka-python's future did
            self._answered(tp, delivery, counted, exc)
            return
        self._answers.add(answer)
        answer.add_done_callback(partial(self._on_answer, tp, delivery, counted))

    def _on_answer(self, tp: tuple[str, int], delivery: Delivery, counted: bool, answer: asyncio.Future[Any]) -> None:
        self._answers.discard(answer)
        error = KafkaTimeoutError("cancelled") if answer.cancelled() else answer.exception()
        self._answered(tp, delivery, counted, error)

    def _answered(self, tp: tuple[str, int], delivery: Delivery, counted: bool, error: BaseException | None) -> None:
        with self._lock:
            left = self._unanswered[tp] = self._unanswered[tp] - 1
            self._outstanding -= 1
            if left:  # the partition's next batch waits from this answer on (aiokafka sends one at a time)
                self._waiting[tp] = time.monotonic()
            else:
                self._waiting.pop(tp, None)
            self._settle(delivery, error)
        if not left and tp in self._prompt_waiting:  # the partition is free: what joined its batch meanwhile goes
            self._prompt_waiting.discard(tp)
            self._close_if_open(tp, None)
        if counted:
            self._pending.release()

    def _settle(self, delivery: Delivery, error: BaseException | None) -> None:
        """Count a batch's records and record its outcome (callers hold the lock)."""
        if error is None:
            self.sent += delivery.count
        else:
            self.failed += delivery.count
            self.first_error = self.first_error or (str(error) if isinstance(error, MessageSizeTooLargeError)
                                                    else repr(error))
            delivery.exception = error
        delivery.is_done = True

    def _close_if_open(self, tp: tuple[str, int], batch: Any) -> None:
        """A prompt topic's batch goes at once, unless a batch of its partition is still unanswered: then once that
        one is answered, with every record that joined it meanwhile (kafka-python's linger 0: batches grow while
        the previous request is in flight, instead of a train of one-record batches). ``batch`` None: the open one."""
        with self._lock:
            if self._unanswered.get(tp):
                self._prompt_waiting.add(tp)
                return
            entry = self._open.get(tp)
            if entry is not None and (batch is None or entry[0] is batch):
                self._take(tp)
                # nothing of the partition is queued or in flight (counted under this lock): no order to keep
                self._chain(tp, entry[0], entry[2], False)

    def _take(self, tp: tuple[str, int]) -> _Open:
        """Remove a partition's open batch to send it, counted as unanswered (callers hold the lock)."""
        if not self._unanswered.get(tp):
            self._waiting[tp] = time.monotonic()  # the partition's silence counts from now
        self._unanswered[tp] = self._unanswered.get(tp, 0) + 1
        self._outstanding += 1
        entry = self._open.pop(tp)
        entry[2].count = count = entry[0].record_count()
        self.records += count
        return entry

    async def _close_lingering(self) -> None:
        """Queue each batch once it has been open ``linger_ms``: records do not wait for more for longer. Wakes
        when the oldest open batch is due, not every ``linger_ms`` (that let a batch opened just after a wake wait
        almost twice ``linger_ms``)."""
        wait = self._linger_s
        while True:
            await asyncio.sleep(wait)
            now = time.monotonic()
            with self._lock:
                due = [tp for tp, (_batch, opened, _d) in self._open.items() if now - opened >= self._linger_s]
                for tp in due:
                    batch, _opened, delivery = self._take(tp)
                    # after any batch of the partition the sending thread queued before (already on the loop's list)
                    self._loop.call_soon(self._chain, tp, batch, delivery, False)
                oldest = min((opened for _batch, opened, _d in self._open.values()), default=None)
            wait = self._linger_s if oldest is None else max(0.001, oldest + self._linger_s - now)

    async def _watch(self) -> None:
        """Fail every batch not acknowledged once any partition's batches have waited ``timeout_s`` without an
        answer (and, once stalled, whatever still waits: a batch aiokafka took meanwhile). Per partition: a
        broker answering others would otherwise keep a never-answered batch, and ``flush``, waiting for good."""
        while True:
            await asyncio.sleep(min(1.0, self._timeout_s / 4))
            now = time.monotonic()
            with self._lock:
                silent = self._outstanding > 0 and (
                    self.stalled or any(now - since > self._timeout_s for since in self._waiting.values()))
            if silent:
                self._stall()

    def _stall(self) -> None:
        self.stalled = True
        self._fail_all(self._silence())

    def _silence(self) -> KafkaTimeoutError:
        """The error of a broker that stopped answering: a new one per use (each is raised or recorded apart)."""
        return KafkaTimeoutError(f"the broker at {self.bootstrap} stopped answering: no acknowledgement for "
                                 f"{self._timeout_s:g} s")

    async def _start(self, options: dict[str, Any], topics: list[str]) -> None:
        self._producer = AIOKafkaProducer(**options)
        try:
            await self._producer.start()
            for topic in topics:
                self._partitions[topic] = await self._partitions_for(topic)
        except (AIOKafkaError, OSError) as exc:
            await self._producer.stop()
            raise BrokerUnavailable(",".join(options["bootstrap_servers"]), str(exc)) from None
        self._chains: dict[tuple[str, int], asyncio.Task[None]] = {}
        self._answers: set[asyncio.Future[Any]] = set()
        self._prompt_waiting: set[tuple[str, int]] = set()  # prompt partitions whose open batch waits for that
        self._timers = [asyncio.ensure_future(self._close_lingering()), asyncio.ensure_future(self._watch())]
        for timer in self._timers:
            timer.add_done_callback(self._on_timer_end)

    def _on_timer_end(self, timer: asyncio.Future[None]) -> None:
        """A timer that raised would leave batches lingering, or unwatched, for good: stall instead, so every wait
        ends, with the timer's error as the producer's first."""
        if timer.cancelled() or timer.exception() is None:
            return
        log.error("the batch producer's %s timer failed; failing what waits", timer, exc_info=timer.exception())
        self.first_error = self.first_error or repr(timer.exception())
        self._stall()

    async def _partitions_for(self, topic: str) -> list[int]:
        return sorted(await self._producer.partitions_for(topic))

    async def _drain(self) -> None:
        await asyncio.sleep(0)  # the batches chained by call_soon just before
        if self.stalled:
            self._stall()
        while True:  # an answer may close a prompt batch that waited for it: chain and answers again
            # asyncio.wait, not gather: the wait must not cancel (and so end) the deliveries; _watch ends them
            waiting: list[asyncio.Future[Any]] = [task for task in self._chains.values() if not task.done()]
            if waiting := waiting or list(self._answers):
                await asyncio.wait(waiting)
            else:
                return

    async def _finish(self) -> None:
        for timer in self._timers:
            timer.cancel()
        if self.stalled:
            self._stall()
        try:
            await asyncio.wait_for(self._producer.stop(), self._timeout_s)
        except TimeoutError:
            self.stalled = True

    def _call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    async def _abandon(self) -> None:
        """After an interrupted close: fail what waits, stop the producer briefly, and end every task of the loop."""
        if hasattr(self, "_producer"):
            self._fail_all(KafkaTimeoutError("stopped before an acknowledgement"))
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
        if (self._closed or self.stalled) and isinstance(context.get("exception"), AIOKafkaError):
            return  # a batch failed on purpose (its records are counted); aiokafka never retrieves it
        loop.default_exception_handler(context)

    def _stop_loop(self) -> None:
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):  # best effort: the loop stops below whatever happened
            asyncio.run_coroutine_threadsafe(self._abandon(), self._loop).result(5.0)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
