"""The direct engine's Outbox: a refused output is never covered by a later checkpoint.

A fake producer stands in for kafka-python's: a broker that refuses one record on demand (a record over its
``max.message.bytes``) cannot be arranged cheaply in a unit test; the integration tier runs the real one.
"""

from __future__ import annotations

from typing import Any

import pytest

from streams.engine.store import Outbox


class FakeFuture:
    def __init__(self, error: BaseException | None) -> None:
        self.exception = error

    def failed(self) -> bool:
        return self.exception is not None


class FakeProducerRefusingBigRecords:
    """Fake: refuses values over ``limit`` bytes, as a broker refuses a record over max.message.bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.sent: list[tuple[str, Any]] = []

    def send(self, topic: str, key: bytes | None = None, value: bytes = b"") -> FakeFuture:
        self.sent.append((topic, value))
        return FakeFuture(ValueError("record too large") if len(value) > self.limit else None)

    def flush(self) -> None:
        pass


def test_a_refused_output_fails_every_later_confirm_so_no_checkpoint_can_cover_it() -> None:
    outbox = Outbox(FakeProducerRefusingBigRecords(limit=10))  # type: ignore[arg-type]
    outbox.send_raw("node-samples", None, b"small")
    assert outbox.confirm() == 1
    outbox.send_raw("blacklist-snapshot", None, b"x" * 100)
    with pytest.raises(ValueError, match="too large"):
        outbox.confirm()
    outbox.send_raw("checkpoints", None, b"ok")  # the checkpoint written after the loss...
    with pytest.raises(ValueError, match="too large"):
        outbox.confirm()  # ...is never confirmed, so no offset is committed past the lost output


class FakeLingeringProducer(FakeProducerRefusingBigRecords):
    """Fake: holds what it was sent until ``flush``, as a producer with a linger does."""

    def __init__(self) -> None:
        super().__init__(limit=1 << 20)
        self.flushed: list[tuple[str, Any]] = []

    def flush(self) -> None:
        self.flushed, self.sent = self.flushed + self.sent, []


def test_what_a_ranking_waits_for_goes_through_the_prompt_producer_and_confirm_waits_for_both() -> None:
    from streams.engine.worker import PROMPT_TOPICS

    bulk, prompt = FakeLingeringProducer(), FakeLingeringProducer()
    outbox = Outbox(bulk, prompt, PROMPT_TOPICS)  # type: ignore[arg-type]
    outbox.send_raw("node-samples", None, b"z")
    outbox.send_raw("ranking-feed", None, b"summary")
    outbox.send_raw("ranking-feed", None, b"progress")  # after its summary, through the same producer
    outbox.send_raw("blacklist-deltas", None, b"delta")
    assert [topic for topic, _ in bulk.sent] == ["node-samples"]
    assert prompt.sent == [("ranking-feed", b"summary"), ("ranking-feed", b"progress"), ("blacklist-deltas", b"delta")]
    assert outbox.confirm() == 4  # a checkpoint after these covers outputs of both producers: both flushed
    assert not bulk.sent and not prompt.sent and len(bulk.flushed) + len(prompt.flushed) == 4
