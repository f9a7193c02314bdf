"""`laggard worker`: the Faust stream worker on Kafka (statistics, ranking, blacklist deltas)."""

from __future__ import annotations

from pathlib import Path

import click

from laggard.commands.options import bootstrap_option, settings_with
from laggard.errors import UserError
from streams import kafka_clients
from streams.serde.topics import TASK_EVENTS


@click.command()
@bootstrap_option
@click.option("--partitions", type=click.IntRange(1), default=None,
              help="Partitions of task-events when the worker creates it [default: setting "
                   "LAGGARD_TOPIC_PARTITIONS, 4]; an existing topic keeps its own count")
@click.option("--cluster-id", default=None, help="Key of the blacklist topics [default: setting, 'default']")
@click.option("--settings", "settings_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="A KEY=value file of LAGGARD_ settings (environment variables win)")
@click.option("--loglevel", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True)
@click.option("--web-port", type=click.IntRange(0, 65535), default=None,
              help="Faust's web port on 127.0.0.1 (0 disables it) [default: setting, 6066]")
def worker(bootstrap: str | None, partitions: int | None, cluster_id: str | None, settings_file: Path | None,
           loglevel: str, web_port: int | None) -> None:
    """Run the stream worker: normalise finished tasks, rank nodes each period of event time, and publish
    node scores, blacklist deltas and snapshots. Stop it with SIGTERM or Ctrl-C.

    Scale out by starting more workers with the same settings: the normalising stage spreads over the
    partitions of task-events; the ranking runs on one of them.
    """
    settings = settings_with(bootstrap, _env_file=settings_file, topic_partitions=partitions,
                             cluster_id=cluster_id, web_port=web_port)
    from streams.config import ranking_config

    try:
        ranking_config(settings)  # a combination the ranking refuses fails here, before any connection
    except ValueError as exc:
        raise UserError(f"invalid settings: {exc}") from None
    kafka_clients.wait_for_broker(settings, timeout_s=30)
    kafka_clients.create_topics(settings)
    actual = kafka_clients.topic_partitions(settings, TASK_EVENTS.name)
    if actual is None:
        raise UserError(f"topic {TASK_EVENTS.name} could not be created")
    if partitions is not None and actual != partitions:
        click.echo(f"warning: {TASK_EVENTS.name} already has {actual} partitions; using {actual}", err=True)

    import faust

    from streams.app import make_app

    app = make_app(settings, actual)
    faust.Worker(app, loglevel=loglevel.upper()).execute_from_commandline()
