"""Agent ``predict_stragglers``: task and job events in (by job), StragglerPrediction records out (SPEC 4).

Delivery is at least once: after a crash, or a rebalance (a revoked partition's state is forgotten without a
checkpoint: Faust lets only the stream write tables), the events since the last checkpoint are seen again, and a
task flagged in that stretch may be published a second time (consumers key predictions by job and task); what
the idle timer released is checkpointed with the partition's next batch. Otherwise a
task is flagged once: each partition's events are stepped in their merged order (``PredictStage``), whatever the
interleaving of task-events and job-events, and a silent job stream is released by the statistics' idle rule.

The predictors' live node view (node-aware methods) is fed from node-scores and blacklist-snapshot by a timer
(``streams.engine.view.NodeView``, as the direct engine does) when ``LAGGARD_PREDICTION_NODE_VIEW=true``.
"""

from __future__ import annotations

import asyncio
from typing import cast

import faust
from faust.types import AgentT

from streams import metrics
from streams.agents.checkpoint import Outputs, PartitionStates, RawEvent, RawStream, Slot, unacked_batches
from streams.agents.common import send
from streams.agents.idleness import (
    IdleClock,
    backlog_of,
    caught_up_of,
    clear_on_revoke,
    idle_timer,
    release_predictions_if_idle,
    warn_if_flags_may_never_come,
    warn_once_if_waiting,
)
from streams.config import prediction_context
from streams.core.events import Event, StragglerPrediction
from streams.core.prediction.base import PredictionContext
from streams.core.prediction.fleet import PredictorFleet
from streams.core.prediction.stage import PredictStage, predict_checkpoint_due_after
from streams.serde.topics import JOB_EVENTS, TASK_EVENTS
from streams.settings import Settings
from streams.wiring import Wiring

CHECKPOINT_EVERY = 2000  # River models are pickled at a checkpoint: keep it occasional (at least: see
# predict_checkpoint_due_after)
BATCH_MAX = 2000
BATCH_WITHIN_S = 0.05
TOPICS = (TASK_EVENTS.name, JOB_EVENTS.name)


def register(app: faust.App, wiring: Wiring) -> AgentT[bytes]:
    """Define the agent on ``app``; ``wiring`` holds topics, tables and settings (see streams.app)."""
    settings = wiring.settings
    context = prediction_context(settings)
    # Built once here, before the worker consumes: the method's first build imports its libraries (River:
    # measured 17 s on a loaded machine), which inside the agent stalled the event loop, every agent with it.
    PredictorFleet(settings.prediction_method, context, wiring.job_idle_timeout_us)
    warn_if_flags_may_never_come(settings.idle_stream_timeout_s, settings.wait_for_job_events)
    states = PartitionStates(
        app, wiring.predict_checkpoints,
        lambda p: PredictStage(PredictorFleet(settings.prediction_method, context, wiring.job_idle_timeout_us), p,
                               wait_for_job_events=settings.wait_for_job_events),
        TOPICS, key=lambda p: f"predict:{p}".encode())
    # Behind: the app's one backlog, where normalise_tasks notes what it processed (Faust runs both agents on every
    # worker).
    backlog = backlog_of(app, settings.idle_stream_timeout_s)
    # The grace asks this agent's own view of what it took, not the normaliser's (streams.agents.taken).
    idle = IdleClock(settings.idle_stream_timeout_s,
                     behind=lambda p: backlog.behind(*((topic, cast(int, p)) for topic in TOPICS)),
                     caught_up=caught_up_of(app, states.taken, JOB_EVENTS.name, settings, "predict_stragglers"),
                     grace_s=settings.caught_up_grace_s)
    clear_on_revoke(app, idle, TOPICS)
    lock = asyncio.Lock()  # one writer of the stages at a time: the agent or the idleness timer
    if settings.prediction_node_view:  # None (the default) is off on the Faust worker, as on an `all` worker
        feed_node_view(app, settings, context)
    predicting = Predicting(wiring, states, idle)

    @app.agent(wiring.task_events, name="predict_stragglers")
    async def predict_stragglers(stream: RawStream) -> None:
        async for batch in unacked_batches(stream, BATCH_MAX, BATCH_WITHIN_S, "predict_stragglers", wiring.progress):
            async with lock:
                await predicting.take(stream, batch)

    idle_timer(app, idle, lock, "release_idle_job_streams_for_predictions", predicting.release_all)
    return predict_stragglers


class Predicting:
    """What the agent and its idleness timer do with the partitions' stages (one at a time: the caller locks)."""

    def __init__(self, wiring: Wiring, states: PartitionStates[PredictStage], idle: IdleClock) -> None:
        self.wiring, self.states, self.idle = wiring, states, idle
        self.outputs = Outputs()  # a checkpoint past a prediction only once the prediction is on the broker
        self.waiting: set[int] = set()  # partitions warned about waiting for job events
        self.released: set[int] = set()  # partitions whose held events the timer stepped since their checkpoint

    async def take(self, stream: RawStream, batch: list[RawEvent]) -> None:
        by_partition: dict[int, tuple[Slot[PredictStage], list[Event]]] = {}
        for event in batch:
            # Only normalise_tasks dead-letters a bad record (None here), so it is reported once.
            admitted = await self.states.admit(stream, event, None, self.wiring.task_events_types)
            if admitted is not None:
                by_partition.setdefault(admitted.slot.partition, (admitted.slot, []))[1].append(admitted.record)
        for slot, events in by_partition.values():
            await self.step(stream, slot, events)

    async def step(self, stream: RawStream, slot: Slot[PredictStage], events: list[Event]) -> None:
        flags = slot.state.process_batch(events)
        flags += release_predictions_if_idle(self.idle, slot.state)
        warn_once_if_waiting(slot.state, self.wiring.job_idle_timeout_us, self.waiting)
        await self.publish(flags)
        due = predict_checkpoint_due_after(slot.state.pending, CHECKPOINT_EVERY)
        if slot.checkpointer.held >= due or slot.partition in self.released:
            self.released.discard(slot.partition)
            await slot.save(stream, self.outputs)

    async def release_all(self) -> None:
        """Flags released here are sent now; a timer may not checkpoint, so the partition's next batch does (not
        its 2,000th record: until then a restart from the last checkpoint releases and publishes them again)."""
        for slot in self.states.slots():
            pending = slot.state.pending
            flags = release_predictions_if_idle(self.idle, slot.state)
            if slot.state.pending != pending:
                self.released.add(slot.partition)
            await self.publish(flags)

    async def publish(self, flags: list[StragglerPrediction]) -> None:
        for prediction in flags:
            self.outputs.track(await send(self.wiring.straggler_predictions, prediction.job_id, prediction))
            metrics.PREDICTOR_FLAGS.labels(prediction.method).inc()


def feed_node_view(app: faust.App, settings: Settings, context: PredictionContext) -> None:
    """The predictors' live node view, from node-scores and blacklist-snapshot, on a timer of its own."""
    from streams.engine.view import NodeView

    view: list[NodeView] = []

    async def feed_view() -> None:
        if app.should_stop:
            return
        if not view:  # made once the worker runs (kafka-python connects in its constructor)
            view.append(NodeView(settings, context.cluster))
        view[0].poll()

    app.timer(interval=1.0, name="predict_node_view")(feed_view)
