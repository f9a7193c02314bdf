"""The local broker's generated configuration (no JVM is started here; tests/integration starts real ones)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from laggard import kafka_local, kafka_log


def test_cluster_ids_are_22_url_safe_characters_never_starting_with_a_dash() -> None:
    ids = {kafka_local.new_cluster_id() for _ in range(3000)}
    assert len(ids) == 3000
    assert all(len(i) == 22 and not i.startswith("-") and "=" not in i for i in ids)


def test_each_broker_has_its_own_ports_and_data_directory(tmp_path: Path) -> None:
    first = kafka_local.Broker(port=19092, controller_port=19093, data_dir=tmp_path / "a")
    second = kafka_local.Broker(port=29092, controller_port=29093)
    text = kafka_local._properties(first)
    assert "listeners=PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093" in text
    assert f"log.dirs={tmp_path / 'a' / 'data'}" in text
    assert second.home.name == "kafka-29092" and second.bootstrap == "127.0.0.1:29092"
    assert all("#" not in line.split("=", 1)[1] for line in text.splitlines())  # no trailing comments


def test_a_port_that_cannot_be_bound_is_refused_before_the_jvm_starts(tmp_path: Path) -> None:
    """A socket bound but not listening (as a port lingering in TIME_WAIT behaves): a connect finds nothing
    there, yet Kafka's acceptor could not bind it. start() says so instead of a JVM dying later."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        broker = kafka_local.Broker(port=kafka_local.free_ports(1)[0], controller_port=port, data_dir=tmp_path)
        with pytest.raises(kafka_local.KafkaLocalError, match=f"port {port} cannot be bound"):
            kafka_local.start(broker)
    assert not (tmp_path / "server.properties").exists()  # refused before anything was written


def test_a_broker_that_died_on_a_bind_names_the_port(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(
        "[2026-11-21 23:59:00,379] ERROR Unable to start acceptor for ListenerName(CONTROLLER)\n"
        "org.apache.kafka.common.KafkaException: Socket server failed to bind to 127.0.0.1:39334: Address already "
        "in use.\n"
    )
    assert kafka_log.bind_failure(log) == "39334"
    log.write_text("[2026-11-21] INFO all good\n")
    assert kafka_log.bind_failure(log) is None
    assert kafka_log.bind_failure(tmp_path / "missing.log") is None


def test_a_broker_that_died_on_its_keystore_says_why_in_one_line(tmp_path: Path) -> None:
    """`kafka start --keystore` with a wrong password said only "the broker exited with 1; see server.log"; the
    cause was 30 lines into a stack trace there (the shape of Kafka 3.9's log, shortened)."""
    log = tmp_path / "server.log"
    log.write_text(
        "[2026-11-29 03:07:49,170] ERROR [BrokerServer id=1] Fatal error during broker startup. Prepare to shutdown "
        "(kafka.server.BrokerServer)\n"
        "org.apache.kafka.common.KafkaException: Failed to load SSL keystore /x/broker.p12 of type PKCS12\n"
        "\tat org.apache.kafka.common.security.ssl.DefaultSslEngineFactory.load(DefaultSslEngineFactory.java:375)\n"
        "Caused by: java.io.IOException: keystore password was incorrect\n"
        "\tat java.base/sun.security.pkcs12.PKCS12KeyStore.engineLoad(PKCS12KeyStore.java:2097)\n"
        "Caused by: java.security.UnrecoverableKeyException: failed to decrypt safe contents entry\n"
        "[2026-11-29 03:07:49,293] INFO [QuorumController id=1] writeNoOpRecord: event unable to start processing "
        "because of RejectedExecutionException (treated as TimeoutException). Exception message: shutting down\n"
    )
    assert kafka_log.fatal_cause(log) == ("Failed to load SSL keystore /x/broker.p12 of type PKCS12 "
                                          "(keystore password was incorrect)")
    log.write_text("[2026-11-29] ERROR a request failed (the broker went on)\norg.x.SomeException: no\n")
    assert kafka_log.fatal_cause(log) is None and kafka_log.fatal_cause(tmp_path / "missing.log") is None


def test_status_of_a_broker_that_is_not_running_exits_3_and_names_the_data_dir(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from laggard.cli import cli

    port = kafka_local.free_ports(1)[0]
    result = CliRunner().invoke(cli, ["kafka", "status", "--port", str(port), "--data-dir", str(tmp_path)])
    assert result.exit_code == 3
    assert f"not running from data dir {tmp_path}" in result.output
    assert "answers" not in result.output  # nothing listens on a free port


def test_the_last_port_without_a_controller_port_is_a_usage_error_not_a_bind_traceback(tmp_path) -> None:
    from click.testing import CliRunner

    from laggard.cli import cli

    result = CliRunner().invoke(cli, ["kafka", "start", "--port", "65535", "--data-dir", str(tmp_path)])
    assert result.exit_code == 2 and "give --controller-port" in result.output and result.exception is not None
    assert not list(tmp_path.iterdir())  # nothing written, nothing started


def test_a_port_held_by_another_service_is_named_as_such_not_waited_on_for_half_a_minute() -> None:
    """An HTTP server where the broker should be: `topics list` waited kafka-python's 30 s bootstrap and said only
    "no Kafka broker answers"; `kafka start` waited 45 s before "in use by another process"."""
    import http.server
    import threading

    from click.testing import CliRunner

    from laggard.cli import cli

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = CliRunner().invoke(cli, ["topics", "list", "--bootstrap", f"127.0.0.1:{server.server_port}"])
    finally:
        server.shutdown()
        server.server_close()
    assert "accepts connections but answered no Kafka request within 10 s (another service on that port, or a " \
        "TLS/SASL listener: LAGGARD_SECURITY_PROTOCOL?)" in str(result.exception)  # the entry point's one line
