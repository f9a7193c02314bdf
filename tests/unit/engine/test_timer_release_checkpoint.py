"""Flags the idle timer released are not published again after a rebalance or a clean stop of the direct engine.

The timer steps the fleet past a silent job stream and sends flags without a record coming in; a revocation or a
stop that checkpointed only the states with records processed since their last checkpoint left the state from
before the timer on the checkpoint topic, and the next owner released and published the same flags again (the
review of the prediction-ordering merge: 275 flags released by the timer, 550 sent after a rebalance). A fake
producer stands in for the broker and the worker is built without a consumer: the unit tier has no broker.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from kafka.structs import TopicPartition

from producers.registry import open_trace
from streams.agents.idle_rules import Backlog, IdleClock
from streams.core.events import JobFinish, JobStart
from streams.engine.hosts import Decoded, PredictHost
from streams.engine.store import Checkpoints, CheckpointStore, Outbox
from streams.engine.worker import DirectWorker
from streams.settings import Settings
from tests.unit.engine.test_checkpoints_in_flight import FakeProducerAckingOnDemand
from tests.unit.engine.test_predict_host import METHOD, TRACE, Raw, Sent


class FakeProducer(FakeProducerAckingOnDemand):
    def close(self) -> None:
        """Nothing to close."""


class FakeConsumer:
    def commit(self, offsets: Any) -> None:
        """Offsets are not what this test is about."""

    def close(self, autocommit: bool = False) -> None:
        """Nothing to leave."""


def worker_without_broker(settings: Settings, predict: PredictHost) -> tuple[DirectWorker, FakeProducerAckingOnDemand]:
    """A prediction-role ``DirectWorker`` whose checkpoints go to a fake producer (``__init__`` connects)."""
    producer = FakeProducer()
    outbox = Outbox(producer)  # type: ignore[arg-type]
    worker = DirectWorker.__new__(DirectWorker)
    worker.settings, worker.producer, worker.outbox = settings, producer, outbox
    worker.checkpoints = Checkpoints(outbox, CheckpointStore(settings, outbox))
    worker.normalise, worker.rank, worker.predict, worker.view = None, None, predict, None
    worker.consumer, worker.backlog, worker.assigned = FakeConsumer(), Backlog(), frozenset()
    worker._committed, worker.in_listener = {}, False
    worker._idle_every_s, worker._next_tick = 15.0, 0.0
    return worker, producer


def last_checkpoint(producer: FakeProducerAckingOnDemand, topic: str) -> dict[str, bytes]:
    saved = {}
    for sent_topic, value, _ in producer.sent:
        if sent_topic == topic:
            saved["predict:0"] = value  # the worker's only state here
    return saved


@pytest.mark.parametrize("ending", ["rebalance", "clean stop"])
def test_flags_released_by_the_timer_are_not_published_again_by_the_next_owner(ending: str) -> None:
    tasks = [e for e in open_trace(TRACE) if not isinstance(e, (JobStart, JobFinish))]  # a silent job stream
    settings = Settings(prediction_method=METHOD, wait_for_job_events=True, app_id="t")  # type: ignore[arg-type]
    sent, now = Sent(), [0.0]
    predict = PredictHost(settings, sent)  # type: ignore[arg-type]
    predict.load({0}, {})
    predict.idle = IdleClock(60.0, clock=lambda: now[0])
    worker, producer = worker_without_broker(settings, predict)
    assert predict.take(0, [Decoded(Raw("task-events", 0, i), e, None) for i, e in enumerate(tasks)])
    worker.checkpoint_now([predict.slots[0]])  # the checkpoint the records made due, acknowledged
    worker.tick()
    now[0] = 61.0  # a minute without a job event: the timer releases the held task events
    worker._next_tick = 0.0
    worker.tick()
    released = len(sent.flags())
    assert released > 100 and predict.slots[0].state.pending <= 1
    if ending == "rebalance":
        worker.revoked()
    else:
        worker.assigned = frozenset({TopicPartition("task-events", 0)})
        worker.close()
    saved = last_checkpoint(producer, worker.checkpoints.store.topic)
    successor = PredictHost(settings, sent)  # type: ignore[arg-type]
    successor.load({0}, saved)
    successor.idle = IdleClock(60.0, clock=lambda: now[0])
    successor.tick()
    now[0] = 130.0
    successor.tick()  # the next owner's timer: it must have nothing left to release
    twice = [flag for flag, n in Counter(sent.flags()).items() if n > 1]
    assert not twice, f"{len(twice)} of {released} flags published again after a {ending}"
    assert len(sent.flags()) == released


def test_the_worker_loop_collects_cycles_as_seldom_as_the_in_process_runner_and_restores_the_setting() -> None:
    """DirectWorker.run raises the young-generation threshold while it loops (streams.gc_tuning), and the
    process's own setting is back once it stops."""
    import gc

    from streams.gc_tuning import GC_YOUNG_THRESHOLD

    settings = Settings(prediction_method=METHOD)
    worker, _ = worker_without_broker(settings, PredictHost(settings, Sent()))  # type: ignore[arg-type]
    seen: list[int] = []

    class PollingOnce(FakeConsumer):
        def poll(self, timeout_ms: int, max_records: int) -> dict[Any, Any]:
            seen.append(gc.get_threshold()[0])
            worker.stopping = True
            return {}

    before = gc.get_threshold()
    worker.consumer, worker.stopping, worker.health = PollingOnce(), False, None
    worker.run()
    assert seen == [max(before[0], GC_YOUNG_THRESHOLD)]
    assert gc.get_threshold() == before
