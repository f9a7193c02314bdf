"""A direct worker whose start fails after its producer is up (the checkpoint topic cannot be made, the consumer
cannot be built) leaves no producer thread behind: a caller that retries the start, or a test process, would
otherwise gather one live aiokafka loop thread per failed attempt. The broker is ``FakeBrokerForStart``:
aiokafka's producer with a broker that answers the start and nothing else."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from streams import batch_producer
from streams.engine.store import CheckpointStore
from streams.engine.worker import DirectWorker
from streams.errors import BrokerUnavailable
from streams.settings import Settings


class FakeBrokerForStart:
    """Fake ``AIOKafkaProducer``: starts, tells one partition per topic, and stops; never asked to send here."""

    def __init__(self, **options: Any) -> None:
        self._message_accumulator = SimpleNamespace(fail_all=lambda error: None)

    async def start(self) -> None:
        pass

    async def partitions_for(self, topic: str) -> set[int]:
        return {0}

    async def stop(self) -> None:
        pass


def _refuse(store: CheckpointStore) -> None:
    raise BrokerUnavailable(store.settings.bootstrap_servers, "the checkpoint topic could not be made")


def test_a_start_that_fails_after_the_producer_closes_the_producer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch_producer, "AIOKafkaProducer", FakeBrokerForStart)
    monkeypatch.setattr(CheckpointStore, "ensure_topic", _refuse)
    with pytest.raises(BrokerUnavailable, match="checkpoint topic could not be made"):
        DirectWorker(Settings(bootstrap_servers="127.0.0.1:9", prediction_method="off"), partitions=2)
    assert not [thread for thread in threading.enumerate() if thread.name == "direct-outputs" and thread.is_alive()]
