"""The batch producer's small parts (streams.batch_producer): the options it starts aiokafka's producer with
(kafka-python's guarantees kept: idempotent, acks=all), one batch's ``Delivery`` as its callers read it, and
``BrokerStopped``, what ``send`` raises once the broker stopped answering. Apart so the producer module stays a
readable size; the replayer's sink (producers.kafka_sink) uses the options too."""

from __future__ import annotations

from typing import Any

from streams import kafka_security
from streams.errors import BrokerUnavailable
from streams.settings import Settings


def aiokafka_options(settings: Settings) -> dict[str, Any]:
    """Bootstrap and security settings in aiokafka's keyword names (it takes an SSL context, not files)."""
    options: dict[str, Any] = {"bootstrap_servers": settings.bootstrap_servers.split(","),
                               "security_protocol": settings.security_protocol}  # fmt: skip
    if "SSL" in settings.security_protocol:
        options["ssl_context"] = kafka_security.tls_context(settings)
    if settings.sasl_mechanism is not None:
        options["sasl_mechanism"] = settings.sasl_mechanism
    if settings.sasl_username is not None:
        options["sasl_plain_username"] = settings.sasl_username
        options["sasl_plain_password"] = settings.sasl_password
    return options


def producer_options(settings: Settings, compression: str | None, batch_bytes: int,
                     max_request_size: int | None = None, timeout_s: float = 0.0) -> dict[str, Any]:
    """The ``AIOKafkaProducer``'s options: idempotent like kafka-python's producer was (aiokafka's default is not),
    so a retry after a lost acknowledgement cannot write a batch twice. Idempotence needs acks='all'; aiokafka
    keeps one batch per partition in flight, within the broker's limit of 5, and numbers ``send_batch``'s batches
    itself (when it pops them for sending). Its own linger is 0: the lingering is ours (its would add to it).
    aiokafka's request timeout (40 s by default) also bounds a batch's wait for its partition's previous one and a
    leaderless batch's life: never below ``timeout_s``, so the producer's own silence rule decides (the worker's
    120 s had ended at 40 s)."""
    return {**aiokafka_options(settings), "acks": "all", "enable_idempotence": True, "compression_type": compression,
            "max_batch_size": batch_bytes, "linger_ms": 0,
            "max_request_size": max(4 * batch_bytes, max_request_size or 0),
            "request_timeout_ms": max(40_000, int(timeout_s * 1000) + 5_000)}


class BrokerStopped(BrokerUnavailable):
    """The broker stopped answering: batches waited longer than the producer's timeout."""

    def __init__(self, bootstrap: str, silence: BaseException) -> None:
        self.bootstrap = bootstrap
        RuntimeError.__init__(self, str(silence).removeprefix(f"{type(silence).__name__}: "))


class Delivery:
    """One batch's outcome, as the loop thread learns it: ``exception`` is set before ``is_done``."""

    __slots__ = ("count", "exception", "is_done")

    def __init__(self) -> None:
        self.is_done = False
        self.exception: BaseException | None = None
        self.count = 0  # records, once the batch is closed

    def failed(self) -> bool:
        return self.is_done and self.exception is not None
