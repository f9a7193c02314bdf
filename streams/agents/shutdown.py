"""A Faust worker stops at once when its broker is gone (SIGTERM after the broker stopped, a pod evicted with it).

Faust runs its Kafka consumer (aiokafka) in a thread of its own. At a stop, that thread's ``on_thread_stop`` closes
aiokafka's consumer; with the broker away, the consumer's tasks (its group coordinator's, its fetcher's) are
waiting between retries, closing cancels and awaits them, and a ``CancelledError`` escapes the close. mode's thread
(``ServiceThread._serve`` runs ``on_thread_stop`` in a ``finally``; ``_start_thread`` catches only ``Exception``)
then never reaches ``set_shutdown``: the worker waits mode's full ``shutdown_timeout`` (60 s) before it goes on
stopping, and the thread's traceback is printed to stderr, which Faust's logging splits into ~80 log lines, one
per line and per caret (measured in session 27: 63 s from SIGTERM to exit, 200 log lines).

``settle_consumer_stop`` wraps the thread's ``on_thread_stop``: a close that fails is logged as one line and the
thread shuts down as it would have. Nothing is lost by it: offsets were committed, or not, before the consumer is
closed (``streams.agents.commit``), and a broker that is away can take neither a commit nor a LeaveGroup.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger(__name__)


def settle_consumer_stop(consumer: Any) -> Any:
    """Make the stop of ``consumer``'s thread (a Faust ``ThreadDelegateConsumer``) end even when closing aiokafka's
    consumer fails or is cancelled; return ``consumer``."""
    thread = getattr(consumer, "_thread", None)
    if thread is None:  # another transport: nothing to settle
        return consumer
    stop = thread.on_thread_stop

    async def settled_stop() -> None:
        try:
            await stop()
        except (asyncio.CancelledError, Exception) as exc:  # a failed close is no reason to hang the stop
            task = asyncio.current_task()
            if isinstance(exc, asyncio.CancelledError) and task is not None and task.cancelling():
                raise  # this stop itself was cancelled: that is its caller's to handle
            log.warning("the Kafka consumer did not close cleanly (%s); stopping anyway (is the broker away?)",
                        type(exc).__name__)

    thread.on_thread_stop = settled_stop
    return consumer
