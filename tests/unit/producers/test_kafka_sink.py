"""The replayer's batched sink picks the partitions kafka-python's producer picked, and maps the security
settings to aiokafka's names (no broker: the records themselves are checked in tests/integration)."""

from __future__ import annotations

import pytest

from producers.kafka_sink import KafkaSink, aiokafka_options, partition_of
from streams.config import partition_for
from streams.errors import BrokerUnavailable
from streams.settings import Settings


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7])
def test_a_key_goes_where_kafkas_default_partitioner_puts_it(count: int) -> None:
    keys = [f"{6_000_000_000 + 7919 * i}" for i in range(500)] + ["", "j1", "ジョブ"]
    chosen = [partition_of(key.encode(), list(range(count))) for key in keys]
    assert chosen == [partition_for(key, count) for key in keys]
    assert count == 1 or len(set(chosen)) == count  # spread over every partition, not one


def test_plaintext_settings_name_only_the_bootstrap_servers() -> None:
    options = aiokafka_options(Settings(bootstrap_servers="a:1,b:2"))
    assert options == {"bootstrap_servers": ["a:1", "b:2"], "security_protocol": "PLAINTEXT"}


def test_sasl_credentials_keep_their_names() -> None:
    settings = Settings(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                        sasl_username="u", sasl_password="p")  # fmt: skip
    options = aiokafka_options(settings)
    assert (options["sasl_mechanism"], options["sasl_plain_username"], options["sasl_plain_password"]) == (
        "SCRAM-SHA-256", "u", "p")
    assert "ssl_context" not in options


def test_a_broker_that_is_not_there_is_one_clear_error() -> None:
    with pytest.raises(BrokerUnavailable, match=r"no Kafka broker answers at 127\.0\.0\.1:9 "):
        KafkaSink(Settings(bootstrap_servers="127.0.0.1:9"))


def test_the_producer_is_idempotent_and_aiokafka_accepts_its_options() -> None:
    """kafka-python's producer (the replayer's old path) was idempotent by default; aiokafka's is not."""
    import asyncio

    from aiokafka import AIOKafkaProducer

    from producers.kafka_sink import producer_options

    options = producer_options(Settings(bootstrap_servers="127.0.0.1:9"), None, 512 * 1024)
    assert options["enable_idempotence"] is True and options["acks"] == "all"

    async def build() -> object:
        producer = AIOKafkaProducer(**options)  # raises ValueError on options idempotence does not allow
        return producer._txn_manager  # aiokafka numbers batches only with a transaction manager

    assert asyncio.run(build()) is not None
