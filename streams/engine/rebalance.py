"""kafka-python's rebalance callbacks for the direct worker (streams.engine.worker): run inside ``poll`` on the
worker's thread, marked so the worker queues its offset commits instead of blocking kafka-python's IO thread."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from kafka import ConsumerRebalanceListener

if TYPE_CHECKING:
    from streams.engine.worker import DirectWorker

log = logging.getLogger("streams.engine.worker")  # the worker's lines, under the worker's name as before


class Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]  # kafka-python is untyped
    """kafka-python's rebalance callbacks, run inside ``poll`` on the worker's thread."""

    def __init__(self, worker: DirectWorker) -> None:
        self.worker = worker

    def on_partitions_revoked(self, revoked: Any) -> None:
        with self.inside():
            self.worker.revoked()

    def on_partitions_assigned(self, assigned: Any) -> None:
        with self.inside():
            self.worker.assigned_now(set(assigned))

    def on_partitions_lost(self, lost: Any) -> None:
        log.warning("the group dropped this worker; forgetting %d partitions without a checkpoint", len(lost))
        self.worker.forget()

    @contextlib.contextmanager
    def inside(self) -> Iterator[None]:
        self.worker.in_listener = True
        try:
            yield
        finally:
            self.worker.in_listener = False
