"""The direct engine's health check: the Faust worker's (streams.agents.monitor) on a thread of its own.

Every few seconds it compares what the worker read with the broker's end offsets and the group's committed
offsets (kafka-python clients of its own, so a wedged consumer does not wedge the check), keeps ``/livez`` and
``/readyz`` current, and ends the process with ``STALLED_EXIT`` once it is not live: its checkpoints are in Kafka,
so a restart resumes exactly where it stood. The worker's loop beats the heartbeat itself, so a loop blocked for
longer than the stall timeout fails ``/livez`` too.
"""

from __future__ import annotations

import logging
import threading
import time

from kafka.errors import KafkaError

from streams.agents.offsets import CHECK_EVERY_S, Offsets, act_on
from streams.engine.worker import DirectWorker
from streams.errors import BrokerUnavailable
from streams.health import Health

log = logging.getLogger(__name__)


def watch(worker: DirectWorker, health: Health, every_s: float = CHECK_EVERY_S) -> threading.Thread:
    """Start the check on a daemon thread; it runs until the process ends."""
    offsets = Offsets(worker.settings, worker.inputs)
    away: list[float] = []  # when the broker stopped answering this check, while it does not

    def check() -> None:
        try:
            ends, committed = offsets.fetch()
        except (KafkaError, OSError, BrokerUnavailable) as exc:
            if not away:
                log.warning("health check: the broker does not answer (%s); waiting for it", exc)
                away.append(time.monotonic())
            with worker.progress_lock:
                worker.progress.unreachable(time.monotonic())
            health.set(None, f"the broker does not answer: {exc}")
            return
        if away:
            log.warning("health check: the broker answers again after %.0f s", time.monotonic() - away.pop())
        assigned = [(tp.topic, tp.partition) for tp in worker.assigned]
        with worker.progress_lock:
            verdict = worker.progress.judge(assigned, ends, committed, time.monotonic(), time.time())
        act_on(verdict, health, worker.progress.stall_after_s)

    def forever() -> None:
        while True:
            time.sleep(every_s)
            try:
                check()
            except Exception:
                log.exception("health check failed")

    thread = threading.Thread(target=forever, name="laggard-health-check", daemon=True)
    thread.start()
    return thread
