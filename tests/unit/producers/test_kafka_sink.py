"""The replayer's batched sink maps the security settings to aiokafka's names (its partitions are kafka-python's:
test_partitioning.py; no broker: the records themselves are checked in tests/integration)."""

from __future__ import annotations

import pytest

from producers.kafka_sink import KafkaSink, aiokafka_options
from streams.errors import BrokerUnavailable
from streams.settings import Settings


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


def test_a_bootstrap_host_that_does_not_resolve_is_not_called_refused() -> None:
    """`topics list --bootstrap no.such.host.invalid:9092` said "connection refused": a typo in the host name sent
    operators looking for a stopped broker. (.invalid never resolves: RFC 2606.)"""
    from streams.kafka_clients import probe

    with pytest.raises(BrokerUnavailable, match=r"cannot resolve 'no\.such\.host\.invalid'"):
        probe("no.such.host.invalid:9092", timeout_s=0)
    with pytest.raises(BrokerUnavailable, match="connection refused"):
        probe("127.0.0.1:1", timeout_s=0)
