"""Agent ``predict_stragglers``: task and job events in (by job), StragglerPrediction records out (SPEC 4).

Delivery is at least once: after a crash the events since the last checkpoint are seen again, and a task
flagged in that stretch may be published a second time (consumers key predictions by job and task).
"""

from __future__ import annotations

import logging
from typing import Any

from streams.agents.checkpoint import Checkpointer
from streams.agents.common import decode_or_dead_letter, send
from streams.core.nurd.fleet import PredictorFleet
from streams.core.nurd.methods import Options
from streams.serde.topics import JOB_EVENTS, TASK_EVENTS

log = logging.getLogger(__name__)
CHECKPOINT_EVERY = 2000  # River models are pickled at a checkpoint: keep it occasional


def register(app: Any, wiring: Any) -> Any:
    """Define the agent on ``app``; ``wiring`` holds topics, tables and settings (see streams.app)."""
    fleets: dict[int, tuple[PredictorFleet, Checkpointer]] = {}
    settings = wiring.settings
    options = Options(alpha=settings.nurd_alpha, epsilon=settings.nurd_epsilon,
                      initial_fraction=settings.nurd_initial_fraction)

    def fleet_for(partition: int) -> tuple[PredictorFleet, Checkpointer]:
        if partition not in fleets:
            fleet = PredictorFleet(settings.prediction_method, options, wiring.job_idle_timeout_us)
            checkpointer = Checkpointer(wiring.predict_checkpoints, f"predict:{partition}".encode())
            state = checkpointer.load()
            if state is not None:
                try:
                    fleet.restore(state)
                except ValueError as exc:
                    log.warning("predictions of partition %d: %s; cold start", partition, exc)
            fleets[partition] = (fleet, checkpointer)
        return fleets[partition]

    async def forget_revoked(sender: Any, revoked: Any, **kwargs: Any) -> None:
        # A partition that moves to another worker and back must reload its checkpoint, not resume from state
        # this worker held before the other one advanced it.
        for tp in revoked:
            if tp.topic in (TASK_EVENTS.name, JOB_EVENTS.name):
                fleets.pop(tp.partition, None)

    app.on_partitions_revoked.connect(forget_revoked)

    @app.agent(wiring.task_events, name="predict_stragglers")
    async def predict_stragglers(stream: Any) -> None:
        async for event in stream.noack().events():
            fleet, checkpointer = fleet_for(event.message.partition)
            if checkpointer.covered(event):
                await stream.ack(event)
                continue
            checkpointer.hold(event)
            record = await decode_or_dead_letter(event, None, wiring.task_events_types)
            if record is None:
                continue
            for prediction in fleet.observe(record):
                await send(wiring.straggler_predictions, prediction.job_id, prediction)
            if checkpointer.held >= CHECKPOINT_EVERY:
                await checkpointer.save(stream, fleet.snapshot())

    return predict_stragglers
