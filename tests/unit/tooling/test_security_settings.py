"""TLS and SASL without a broker: the local broker's listener configuration, and the settings laggard refuses in one
line before any connection (tests/integration/operations/test_security.py runs them against a real broker)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from laggard import kafka_local
from streams import kafka_security
from streams.errors import BrokerRefused, BrokerUnavailable
from streams.settings import Settings


def test_a_secure_broker_listens_with_ssl_and_sasl_ssl_beside_plaintext_with_both_scram_mechanisms(
        tmp_path: Path) -> None:
    security = kafka_local.Security(tmp_path / "b.p12", "pw", ssl_port=9094, sasl_ssl_port=9095,
                                    scram_users=(("alice", "s3cret"),))
    broker = kafka_local.Broker(port=9092, controller_port=9093, data_dir=tmp_path, security=security)
    lines = dict(line.split("=", 1) for line in kafka_local._properties(broker).splitlines())
    assert lines["advertised.listeners"] == ("PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9094,"
                                             "SASL_SSL://127.0.0.1:9095")
    assert lines["listener.security.protocol.map"] == ("CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,"
                                                       "SASL_SSL:SASL_SSL")
    assert lines["ssl.keystore.location"] == str((tmp_path / "b.p12").resolve())
    assert lines["sasl.enabled.mechanisms"] == "SCRAM-SHA-256,SCRAM-SHA-512"
    assert kafka_local._scram_arguments(security) == [
        "--add-scram", "SCRAM-SHA-256=[name=alice,password=s3cret]",
        "--add-scram", "SCRAM-SHA-512=[name=alice,password=s3cret]"]
    assert broker.address("SASL_SSL") == "127.0.0.1:9095"
    with pytest.raises(kafka_local.KafkaLocalError, match="no SASL_SSL listener"):
        kafka_local.Broker(port=9092).address("SASL_SSL")


def test_a_scram_password_the_storage_tool_would_misread_is_refused() -> None:
    security = kafka_local.Security(Path("b.p12"), "pw", sasl_ssl_port=9095, scram_users=(("alice", "a,b"),))
    with pytest.raises(kafka_local.KafkaLocalError, match="may not hold"):
        kafka_local._scram_arguments(security)


def test_sasl_without_its_credentials_is_refused_before_any_connection() -> None:
    settings = Settings(bootstrap_servers="127.0.0.1:1", security_protocol="SASL_SSL",
                        sasl_mechanism="SCRAM-SHA-512")
    with pytest.raises(BrokerRefused, match="SASL_SSL needs LAGGARD_SASL_USERNAME, LAGGARD_SASL_PASSWORD"):
        kafka_security.check_security(settings)


def test_a_missing_ca_file_names_its_setting_and_is_caught_as_a_broker_problem(tmp_path: Path) -> None:
    settings = Settings(security_protocol="SSL", ssl_cafile=str(tmp_path / "nope.pem"))
    with pytest.raises(BrokerUnavailable, match=r"LAGGARD_SSL_CAFILE=.*nope.pem: No such file"):
        kafka_security.tls_context(settings)


def test_kafka_start_refuses_a_tls_listener_without_a_keystore_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "laggard", "kafka", "start", "--data-dir", str(tmp_path),
                           "--ssl-port", "9094"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "need --keystore and --keystore-password" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "server.properties").exists()


def test_a_sasl_mechanism_laggard_does_not_speak_is_refused_before_any_connection() -> None:
    settings = Settings(bootstrap_servers="127.0.0.1:1", security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM",
                        sasl_username="alice", sasl_password="x")
    with pytest.raises(BrokerRefused, match="LAGGARD_SASL_MECHANISM=SCRAM: laggard speaks PLAIN, SCRAM-SHA-256"):
        kafka_security.check_security(settings)
