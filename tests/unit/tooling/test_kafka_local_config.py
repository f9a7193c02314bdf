"""The local broker's generated configuration (no JVM is started here; tests/integration starts real ones)."""

from __future__ import annotations

from pathlib import Path

from laggard import kafka_local


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
