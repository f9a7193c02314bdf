"""Agent ``predict_stragglers``: task and job events in (by job), StragglerPrediction records out (SPEC 4).

Delivery is at least once: after a crash the events since the last checkpoint are seen again, and a task
flagged in that stretch may be published a second time (consumers key predictions by job and task).

The predictors' live node view (node-aware methods) is fed from node-scores and blacklist-snapshot by a timer
(``streams.engine.view.NodeView``, as the direct engine does) when ``LAGGARD_PREDICTION_NODE_VIEW=true``.
"""

from __future__ import annotations

import faust
from faust.types import AgentT

from streams import metrics
from streams.agents.checkpoint import Outputs, PartitionStates, RawStream, Slot, unacked_batches
from streams.agents.common import send
from streams.config import prediction_context
from streams.core.prediction.fleet import PredictorFleet
from streams.serde.topics import JOB_EVENTS, TASK_EVENTS
from streams.wiring import Wiring

CHECKPOINT_EVERY = 2000  # River models are pickled at a checkpoint: keep it occasional
BATCH_MAX = 2000
BATCH_WITHIN_S = 0.05


def register(app: faust.App, wiring: Wiring) -> AgentT[bytes]:
    """Define the agent on ``app``; ``wiring`` holds topics, tables and settings (see streams.app)."""
    settings = wiring.settings
    context = prediction_context(settings)
    # Built once here, before the worker consumes: the method's first build imports its libraries (River:
    # measured 17 s on a loaded machine), which inside the agent stalled the event loop, every agent with it.
    PredictorFleet(settings.prediction_method, context, wiring.job_idle_timeout_us)
    states = PartitionStates(
        app, wiring.predict_checkpoints,
        lambda p: PredictorFleet(settings.prediction_method, context, wiring.job_idle_timeout_us),
        (TASK_EVENTS.name, JOB_EVENTS.name), key=lambda p: f"predict:{p}".encode())

    if settings.prediction_node_view:  # None (the default) is off on the Faust worker, as on an `all` worker
        from streams.engine.view import NodeView

        view: list[NodeView] = []

        async def feed_view() -> None:
            if app.should_stop:
                return
            if not view:  # made once the worker runs (kafka-python connects in its constructor)
                view.append(NodeView(settings, context.cluster))
            view[0].poll()

        app.timer(interval=1.0, name="predict_node_view")(feed_view)

    outputs = Outputs()  # a checkpoint past a prediction only once the prediction is on the broker

    @app.agent(wiring.task_events, name="predict_stragglers")
    async def predict_stragglers(stream: RawStream) -> None:
        async for batch in unacked_batches(stream, BATCH_MAX, BATCH_WITHIN_S, "predict_stragglers", wiring.progress):
            full: dict[int, Slot[PredictorFleet]] = {}
            for event in batch:
                # Only normalise_tasks dead-letters a bad record (None here), so it is reported once.
                admitted = await states.admit(stream, event, None, wiring.task_events_types)
                if admitted is None:
                    continue
                prediction = admitted.slot.state.step(admitted.record)
                if prediction is not None:
                    outputs.track(await send(wiring.straggler_predictions, prediction.job_id, prediction))
                    metrics.PREDICTOR_FLAGS.labels(prediction.method).inc()
                if admitted.slot.checkpointer.held >= CHECKPOINT_EVERY:
                    full[admitted.slot.partition] = admitted.slot
            for slot in full.values():
                await slot.save(stream, outputs)

    return predict_stragglers
