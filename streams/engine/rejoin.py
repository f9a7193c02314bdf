"""What a direct worker reads on (re)joining its group, its checkpoints and the published blacklist, is read
again while the broker is away, within one deadline for both. A broker restarted in place comes back while the
group rejoins; kafka-python 3 re-raises a rebalance listener's error out of ``poll``, so a read failing then ended
the worker (exit 75: a supervisor needed) where it could have waited a few seconds.

The reads run in the listener, on kafka-python's IO thread, where the group's heartbeats wait for them: the
deadline (``REJOIN_READ_S``) stays under the group's session timeout (15 s), past which the worker would be
dropped from the group it is joining. Only transient errors are waited for: a broker that does not answer, a
request that timed out, a leader or coordinator not yet elected. A broker that refuses (TLS, SASL, authorization),
a missing topic or a record that does not decode fail at once, as before."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from kafka.errors import KafkaError

from streams.errors import BrokerRefused, BrokerUnavailable

log = logging.getLogger("streams.engine.worker")  # the worker's lines, under the worker's name
T = TypeVar("T")
REJOIN_READ_S = 10.0  # both reads of one assignment; under the group's session timeout of 15 s (above)


def transient(exc: BaseException) -> bool:
    """Whether ``exc`` says the broker is away or not ready yet, so the same read may succeed in a moment.

    >>> from kafka.errors import KafkaConnectionError, TopicAuthorizationFailedError
    >>> [transient(e) for e in (KafkaConnectionError(), BrokerUnavailable("b:9092"), ConnectionRefusedError())]
    [True, True, True]
    >>> [transient(e) for e in (TopicAuthorizationFailedError(), BrokerRefused("b:9092", "TLS"), ValueError())]
    [False, False, False]
    """
    if isinstance(exc, BrokerUnavailable):
        return not isinstance(exc, BrokerRefused)
    if isinstance(exc, KafkaError):
        return bool(getattr(exc, "retriable", False))
    return isinstance(exc, ConnectionError | TimeoutError)


def while_broker_away(what: str, read: Callable[[float], T], deadline: float, *, pause_s: float = 1.0,
                      clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> T:
    """``read(seconds_left)``, done again after a ``transient`` error until ``deadline`` (``clock``'s time), with
    one warning line; then its last error. ``read`` must give up by the seconds it is given.

    >>> tries = iter([BrokerUnavailable("b:9092", "connection refused"), "read"])
    >>> def read(seconds_left):
    ...     got = next(tries)
    ...     if isinstance(got, Exception):
    ...         raise got
    ...     return got
    >>> while_broker_away("the checkpoints", read, deadline=time.monotonic() + 10, sleep=lambda s: None)
    'read'
    """
    warned = False
    while True:
        try:
            return read(max(deadline - clock(), pause_s))
        except Exception as exc:
            if not transient(exc) or clock() + pause_s >= deadline:
                raise
            if not warned:
                log.warning("reading %s: the broker does not answer (%s: %s); trying again until the group's "
                            "deadline", what, type(exc).__name__, exc)
                warned = True
            sleep(pause_s)
