"""What a worker reads on (re)joining its group, its checkpoints and the published blacklist, waits a while for a
broker that does not answer: a broker restarted in place comes back while the group rejoins, and a read that failed
then ended the worker (exit 75: a supervisor needed) where it could have waited a few seconds."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from kafka.errors import KafkaError

from streams.errors import BrokerRefused, BrokerUnavailable

log = logging.getLogger("streams.engine.worker")  # the worker's lines, under the worker's name
T = TypeVar("T")
# One restarted in place is back within it (the operations tests: 5-15 s); kept under the stall limit's 120 s.
REJOIN_READ_S = 60.0


def while_broker_away(what: str, read: Callable[[], T], budget_s: float, *, pause_s: float = 2.0,
                      clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> T:
    """``read()``, done again while the broker is away (it does not answer, a request times out, a connection
    drops) for up to ``budget_s``, with one warning line; then its last error. A broker that answers and refuses
    (TLS, SASL: ``BrokerRefused``) or a missing topic is not waited for.

    >>> tries = iter([BrokerUnavailable("b:9092", "connection refused"), "read"])
    >>> def read():
    ...     got = next(tries)
    ...     if isinstance(got, Exception):
    ...         raise got
    ...     return got
    >>> while_broker_away("the checkpoints", read, 30.0, sleep=lambda s: None)
    'read'
    """
    deadline, warned = clock() + budget_s, False
    while True:
        try:
            return read()
        except BrokerRefused:
            raise
        except (BrokerUnavailable, KafkaError, OSError) as exc:
            if clock() + pause_s > deadline:
                raise
            if not warned:
                log.warning("reading %s: the broker does not answer (%s); trying again for up to %.0f s", what,
                            type(exc).__name__ + ': ' + str(exc), budget_s)
                warned = True
            sleep(pause_s)
