"""The integration tier talks to the real broker that `make integration` started.

It fails, never skips, when the broker cannot be reached or when it collects no test.
"""

from __future__ import annotations

import socket

import pytest

from streams.settings import Settings


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.integration)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if session.testscollected == 0:
        # pytest would exit 5, which a careless runner might treat as success; make it a failure.
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print("\nintegration tier collected no test: failing on purpose")


@pytest.fixture(scope="session")
def bootstrap() -> str:
    """HOST:PORT of the real broker; the test fails if nothing listens there."""
    address = Settings().bootstrap_servers.split(",")[0]
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=5):
            pass
    except OSError as exc:
        pytest.fail(f"no Kafka broker at {address} ({exc}); run the integration tier with `make test`")
    return address
