"""A consumer thread whose close fails still stops (streams.agents.shutdown), on mode's real ServiceThread: the one
Faust runs aiokafka's consumer in. The broker-away case end to end is the operations test
tests/integration/operations/test_broker_restart.py."""

from __future__ import annotations

import asyncio
import logging
import time
import types

import pytest
from mode.threads import ServiceThread

from streams.agents.shutdown import settle_consumer_stop


class ClosesBadly(ServiceThread):  # type: ignore[misc]  # mode's classes are untyped
    """What aiokafka's close did with the broker away: a CancelledError out of the thread's stop."""

    async def on_thread_stop(self) -> None:
        raise asyncio.CancelledError


async def _stop_seconds(settled: bool) -> float:
    thread = ClosesBadly()
    thread.shutdown_timeout = 1.0  # mode's default is 60 s
    if settled:
        settle_consumer_stop(types.SimpleNamespace(_thread=thread))
    await thread.start()
    began = time.monotonic()
    await thread.stop()
    return time.monotonic() - began


def test_a_thread_whose_close_fails_stops_at_once_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="streams.agents.shutdown"):
        seconds = asyncio.run(_stop_seconds(settled=True))
    assert seconds < 0.5  # not the shutdown timeout
    assert [r.getMessage() for r in caplog.records if r.name == "streams.agents.shutdown"] == [
        "the Kafka consumer did not close cleanly (CancelledError); stopping anyway (is the broker away?)"]


# a stop that times out leaves the thread's tasks to a closed loop: mode's leftovers, warned about at collection
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_without_it_the_stop_waits_out_mode_s_shutdown_timeout() -> None:
    with pytest.raises(TimeoutError):
        asyncio.run(_stop_seconds(settled=False))
