"""``close_quietly`` hides kafka-python's errors for the requests a deliberate close cancels, and only while it closes.

The clients here are stand-ins (objects with a ``close`` that waits for the test): what is checked is the kafka
logger's level around overlapping closes in two threads, which a real client cannot be made to interleave on purpose.
"""

from __future__ import annotations

import contextlib
import logging
import threading

from streams import kafka_clients


class _StandInClient:
    """A client whose ``close`` records the kafka logger's level it ran under and returns when the test says."""

    def __init__(self) -> None:
        self.entered, self.release = threading.Event(), threading.Event()
        self.level_seen: int | None = None

    def close(self) -> None:
        self.level_seen = logging.getLogger("kafka").getEffectiveLevel()
        self.entered.set()
        assert self.release.wait(5.0)


def test_overlapping_closes_with_stand_in_clients_leave_the_kafka_logger_as_it_was() -> None:
    """Thread A starts closing, B starts, A ends, B ends: the old per-call save and restore left the logger at
    CRITICAL for good (B saved A's raised level and restored it last), silencing every later kafka error."""
    logger = logging.getLogger("kafka")
    before = logger.level
    logger.setLevel(logging.WARNING)
    try:
        a, b = _StandInClient(), _StandInClient()
        threads = [threading.Thread(target=kafka_clients.close_quietly, args=(c,)) for c in (a, b)]
        threads[0].start()
        assert a.entered.wait(5.0)
        threads[1].start()
        assert b.entered.wait(5.0)
        a.release.set()
        threads[0].join(5.0)
        assert logger.level == logging.CRITICAL  # B still closing: still quiet
        b.release.set()
        threads[1].join(5.0)
        assert (a.level_seen, b.level_seen) == (logging.CRITICAL, logging.CRITICAL)
        assert logger.level == logging.WARNING
    finally:
        logger.setLevel(before)


def test_a_failing_close_with_a_stand_in_client_restores_the_level() -> None:
    class Failing:
        def close(self) -> None:
            raise OSError("socket gone")

    logger = logging.getLogger("kafka")
    before = logger.level
    with contextlib.suppress(OSError):
        kafka_clients.close_quietly(Failing())
    assert logger.level == before
