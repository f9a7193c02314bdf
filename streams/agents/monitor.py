"""The worker's health check: every few seconds, the partitions it holds against what the broker holds.

End offsets and the group's committed offsets are asked with kafka-python clients of their own, outside Faust's
consumer: when that consumer wedges (it did after a broker restart: it never rejoined its group and read nothing
more while staying up) this check still sees records waiting. A worker that stays stalled for
``LAGGARD_STALL_TIMEOUT_S`` fails ``/livez`` and ends itself with ``STALLED_EXIT``: its checkpoints are in Kafka,
so a restart (by Kubernetes, compose, or ``laggard worker``'s own supervisor) resumes exactly where it stood.
"""

from __future__ import annotations

import asyncio
import logging
import time

import faust
from kafka.errors import KafkaError

from streams.agents.offsets import CHECK_EVERY_S, Offsets, act_on
from streams.agents.offsets import STALLED_EXIT as STALLED_EXIT  # re-exported: laggard worker's supervisor
from streams.errors import BrokerUnavailable
from streams.health import Health, ReadProgress
from streams.settings import Settings

log = logging.getLogger(__name__)


def register(app: faust.App, settings: Settings, health: Health, progress: ReadProgress,
             topics: tuple[str, ...]) -> None:
    """Check health every few seconds on ``app``; end the process once it is not live."""
    offsets = Offsets(settings, topics)
    away: list[float] = []  # when the broker stopped answering this check, while it does not

    async def check() -> None:
        health.beat()
        loop = asyncio.get_running_loop()
        try:
            ends, committed = await loop.run_in_executor(None, offsets.fetch)
        except (KafkaError, OSError, BrokerUnavailable) as exc:
            if not away:
                log.warning("health check: the broker does not answer (%s); waiting for it", exc)
                away.append(time.monotonic())
            progress.unreachable(time.monotonic())
            health.set(None, f"the broker does not answer: {exc}")
            return
        if away:
            log.warning("health check: the broker answers again after %.0f s", time.monotonic() - away.pop())
        assigned = [(tp.topic, tp.partition) for tp in app.consumer.assignment() if tp.topic in topics]
        verdict = progress.judge(assigned, ends, committed, time.monotonic(), time.time())
        act_on(verdict, health, progress.stall_after_s)

    app.timer(interval=CHECK_EVERY_S, name="laggard_health_check")(check)
