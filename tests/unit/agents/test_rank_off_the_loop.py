"""A progress mark that completes many boundaries is ranked off the event loop (streams.agents.rank.ranked): the
worker's timers (health check, commits, idleness) go on meanwhile, and the health check hears that the ranking
works. On the loop, the first mark of three Google parts stopped every timer for 22 s; with ten parts the health
check then found the feed unread past the stall timeout and restarted the worker, which ranked the same
boundaries again (#18). Driven with a FAKE ranking (a stand-in whose ranking takes a set time) and a FAKE
progress tracker (records what it hears): no worker runs in unit tests.
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest

from streams.agents import rank
from streams.core.events import Progress


class SlowRanking:
    def take(self, record: Any) -> list[str]:
        time.sleep(0.5)  # the boundaries of a catch-up, ranked
        return ["publication"]


class Heard:
    def __init__(self) -> None:
        self.reads = 0

    def read(self, *args: Any) -> None:
        self.reads += 1


def test_a_long_ranking_leaves_the_loop_free_and_is_heard_working(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rank, "BUSY_NOTE_S", 0.1)
    event = SimpleNamespace(message=SimpleNamespace(topic="ranking-feed", partition=0, offset=9, timestamp=1.0))

    async def scenario() -> tuple[list[Any], int, int]:
        ticks = [0]

        async def timer() -> None:
            while True:
                await asyncio.sleep(0.01)
                ticks[0] += 1

        ticking = asyncio.ensure_future(timer())
        heard = Heard()
        out = await rank.ranked(SlowRanking(), Progress(0, 1, 10), event, heard)  # type: ignore[arg-type]
        ticking.cancel()
        return out, ticks[0], heard.reads

    out, ticks, reads = asyncio.run(scenario())
    assert out == ["publication"]
    assert ticks >= 10, "the event loop ran other work while the ranking ranked"
    assert reads >= 2, "the health check heard the ranking at work"
