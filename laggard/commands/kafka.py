"""`laggard kafka start|stop|status`: a real local broker without Docker."""

from __future__ import annotations

from pathlib import Path

import click

from laggard import kafka_local
from laggard.errors import UserError

DEFAULT_PORT = 9092


def _broker_options(func):  # type: ignore[no-untyped-def]
    func = click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                        help="Broker's configuration, storage and log [default: .laggard/kafka-PORT in the "
                             "laggard checkout, whatever the working directory]; give status and stop the same "
                             "--data-dir")(func)
    func = click.option("--controller-port", type=click.IntRange(1, 65535), default=None,
                        help="KRaft controller port [default: PORT + 1]")(func)
    return click.option("--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT, show_default=True,
                        help="Client (PLAINTEXT) port on 127.0.0.1")(func)


def _broker(port: int, controller_port: int | None, data_dir: Path | None,
            security: kafka_local.Security | None = None) -> kafka_local.Broker:
    return kafka_local.Broker(port=port, controller_port=controller_port or port + 1, data_dir=data_dir,
                              security=security)


@click.group()
def kafka() -> None:
    """Run a local Apache Kafka 3.9 broker (KRaft, one node) on 127.0.0.1.

    The jars are fetched once from Maven Central through broker/pom.xml. Several brokers can run side by side
    on different ports and data directories.
    """


def _user(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    users = []
    for value in values:
        name, sep, password = value.partition(":")
        if not sep or not name or not password:
            raise click.BadParameter(f"{value!r} is not NAME:PASSWORD")
        users.append((name, password))
    return tuple(users)


@kafka.command()
@_broker_options
@click.option("--ssl-port", type=click.IntRange(1, 65535), default=None,
              help="Also listen with TLS (security protocol SSL) on this port; needs --keystore")
@click.option("--sasl-ssl-port", type=click.IntRange(1, 65535), default=None,
              help="Also listen with TLS and SASL/SCRAM (SCRAM-SHA-256 and -512, protocol SASL_SSL); needs "
                   "--keystore and --scram-user")
@click.option("--keystore", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="PKCS12 file with the broker's key and certificate (naming 127.0.0.1) for the TLS listeners")
@click.option("--keystore-password", envvar="LAGGARD_KAFKA_KEYSTORE_PASSWORD", default=None,
              help="Password of --keystore [default: environment LAGGARD_KAFKA_KEYSTORE_PASSWORD]")
@click.option("--scram-user", "scram_users", multiple=True, metavar="NAME:PASSWORD", callback=_user,
              help="A SCRAM user, created when the storage is first formatted (repeatable)")
def start(port: int, controller_port: int | None, data_dir: Path | None, ssl_port: int | None,
          sasl_ssl_port: int | None, keystore: Path | None, keystore_password: str | None,
          scram_users: tuple[tuple[str, str], ...]) -> None:
    """Start the broker and wait until it answers a metadata request (idempotent).

    With --ssl-port and/or --sasl-ssl-port it also listens with TLS (and SASL/SCRAM) beside PLAINTEXT on --port;
    README "Operating laggard" shows how to make the certificates and point laggard at them.
    """
    security = None
    if ssl_port or sasl_ssl_port:
        if keystore is None or keystore_password is None:
            raise click.UsageError("--ssl-port and --sasl-ssl-port need --keystore and --keystore-password")
        if sasl_ssl_port and not scram_users:
            raise click.UsageError("--sasl-ssl-port needs at least one --scram-user NAME:PASSWORD")
        security = kafka_local.Security(keystore, keystore_password, ssl_port, sasl_ssl_port, scram_users)
    if controller_port is None and port == 65535:  # PORT + 1 is no port: a traceback from bind()
        raise click.BadParameter("65535 leaves no PORT + 1 for the controller: give --controller-port",
                                 param_hint="--port")
    broker = _broker(port, controller_port, data_dir, security)
    if broker.controller_port == broker.port:
        raise click.BadParameter("must differ from --port", param_hint="--controller-port")
    try:
        click.echo(f"starting Kafka on {broker.bootstrap} (data in {broker.home}) ...", err=True)
        pid, started = kafka_local.start(broker)
    except kafka_local.KafkaLocalError as exc:
        raise UserError(str(exc)) from exc
    word = "started" if started else "already running"
    listeners = "".join(f", {name} at {broker.address(name)}" for name in (security.listeners() if security else {}))
    click.echo(f"Kafka {word} at {broker.bootstrap}{listeners} (pid {pid})")


def _port_given(data_dir: Path | None) -> bool:
    """Whether the port names the broker asked about: with --data-dir alone, the default 9092 may be another's."""
    source = click.get_current_context().get_parameter_source("port")
    return data_dir is None or source is not click.core.ParameterSource.DEFAULT


@kafka.command()
@_broker_options
def stop(port: int, controller_port: int | None, data_dir: Path | None) -> None:
    """Stop the broker cleanly (SIGTERM); nothing is left running."""
    broker = _broker(port, controller_port, data_dir)
    pid = kafka_local.stop(broker)
    # with --data-dir alone the port is not known here (it printed the default 9092 for any broker)
    where = f"data in {broker.home}" if data_dir is not None and port == DEFAULT_PORT else broker.bootstrap
    if pid:
        click.echo(f"Kafka ({where}) stopped (pid {pid})")
        return
    click.echo(f"no Kafka broker of laggard runs with data dir {broker.home}")
    if _port_given(data_dir) and kafka_local.serving(broker):
        # "stopped" in spirit but still serving: the operator must learn that nothing was stopped
        click.echo(f"but a broker answers on {broker.bootstrap} and is still running (started with another "
                   "--data-dir? give the same one to stop it)", err=True)
        raise SystemExit(3)


@kafka.command()
@_broker_options
def status(port: int, controller_port: int | None, data_dir: Path | None) -> None:
    """Print the bootstrap address of the running broker, or say it is not running (exit 3)."""
    broker = _broker(port, controller_port, data_dir)
    pid = kafka_local.status(broker)
    if pid is None:
        elsewhere = _port_given(data_dir) and kafka_local.serving(broker)
        click.echo(
            f"not running from data dir {broker.home}"
            + (f"; but a broker answers on {broker.bootstrap} (started with another --data-dir?)" if elsewhere else "")
        )
        raise SystemExit(3)
    answering = kafka_local.answers_metadata(broker.bootstrap)
    click.echo(f"{broker.bootstrap} (pid {pid}{'' if answering else ', not answering yet'})")
