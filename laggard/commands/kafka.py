"""`laggard kafka start|stop|status`: a real local broker without Docker."""

from __future__ import annotations

from pathlib import Path

import click

from laggard import kafka_local
from laggard.errors import UserError


def _broker_options(func):  # type: ignore[no-untyped-def]
    func = click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                        help="Broker's configuration, storage and log [default: .laggard/kafka-PORT in the "
                             "laggard checkout, whatever the working directory]; give status and stop the same "
                             "--data-dir")(func)
    func = click.option("--controller-port", type=click.IntRange(1, 65535), default=None,
                        help="KRaft controller port [default: PORT + 1]")(func)
    return click.option("--port", type=click.IntRange(1, 65535), default=9092, show_default=True,
                        help="Client (PLAINTEXT) port on 127.0.0.1")(func)


def _broker(port: int, controller_port: int | None, data_dir: Path | None) -> kafka_local.Broker:
    return kafka_local.Broker(port=port, controller_port=controller_port or port + 1, data_dir=data_dir)


@click.group()
def kafka() -> None:
    """Run a local Apache Kafka 3.9 broker (KRaft, one node) on 127.0.0.1.

    The jars are fetched once from Maven Central through broker/pom.xml. Several brokers can run side by side
    on different ports and data directories.
    """


@kafka.command()
@_broker_options
def start(port: int, controller_port: int | None, data_dir: Path | None) -> None:
    """Start the broker and wait until it answers a metadata request (idempotent)."""
    broker = _broker(port, controller_port, data_dir)
    if broker.controller_port == broker.port:
        raise click.BadParameter("must differ from --port", param_hint="--controller-port")
    try:
        click.echo(f"starting Kafka on {broker.bootstrap} (data in {broker.home}) ...", err=True)
        pid, started = kafka_local.start(broker)
    except kafka_local.KafkaLocalError as exc:
        raise UserError(str(exc)) from exc
    word = "started" if started else "already running"
    click.echo(f"Kafka {word} at {broker.bootstrap} (pid {pid})")


@kafka.command()
@_broker_options
def stop(port: int, controller_port: int | None, data_dir: Path | None) -> None:
    """Stop the broker cleanly (SIGTERM); nothing is left running."""
    broker = _broker(port, controller_port, data_dir)
    pid = kafka_local.stop(broker)
    click.echo(f"Kafka at {broker.bootstrap} stopped (pid {pid})" if pid else
               f"no Kafka broker of laggard runs with data dir {broker.home}")


@kafka.command()
@_broker_options
def status(port: int, controller_port: int | None, data_dir: Path | None) -> None:
    """Print the bootstrap address of the running broker, or say it is not running (exit 3)."""
    broker = _broker(port, controller_port, data_dir)
    pid = kafka_local.status(broker)
    if pid is None:
        elsewhere = kafka_local.port_open(broker.port) and kafka_local.answers_metadata(broker.bootstrap)
        click.echo(
            f"not running from data dir {broker.home}"
            + (f"; but a broker answers on {broker.bootstrap} (started with another --data-dir?)" if elsewhere else "")
        )
        raise SystemExit(3)
    answering = kafka_local.answers_metadata(broker.bootstrap)
    click.echo(f"{broker.bootstrap} (pid {pid}{'' if answering else ', not answering yet'})")
