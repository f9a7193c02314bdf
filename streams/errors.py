"""Errors that reach the user as one line (the CLI catches them); kept free of heavy imports."""

from __future__ import annotations


class BrokerUnavailable(RuntimeError):
    """No Kafka broker answered at the bootstrap address."""

    def __init__(self, bootstrap: str, detail: str = "") -> None:
        self.bootstrap = bootstrap
        message = f"no Kafka broker answers at {bootstrap}"
        message += " (start one with `laggard kafka start`, or pass --bootstrap HOST:PORT)"
        super().__init__(message + (f": {detail}" if detail else ""))


class BrokerSilent(BrokerUnavailable):
    """Something accepts connections at the address but answered no Kafka request in time: another service on the
    port, or a broker still starting (``wait_for_broker`` waits for it)."""


class TopicMissing(RuntimeError):
    """A topic laggard reads does not exist on the broker."""


class BrokerRefused(BrokerUnavailable):
    """A broker answered but refused the connection: its TLS certificate is not trusted, or it refused the SASL
    user. Caught wherever BrokerUnavailable is, and reported the same way: one line, exit 1."""

    def __init__(self, bootstrap: str, message: str) -> None:
        self.bootstrap = bootstrap
        RuntimeError.__init__(self, message)


class CheckpointTooLarge(RuntimeError):
    """A stage's checkpoint outgrew the one Kafka record it is saved in; saving it again after a restart would fail
    the same way, so the worker stops with this line instead of a restartable error."""
