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
