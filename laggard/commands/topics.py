"""`laggard topics create|list`: laggard's topics from the one registry."""

from __future__ import annotations

import click

from laggard.commands.options import bootstrap_option, settings_with
from streams import kafka_clients
from streams.serde.topics import TOPICS


@click.group()
def topics() -> None:
    """Manage laggard's Kafka topics (`laggard topics list` shows each and what it carries)."""


@topics.command()
@bootstrap_option
@click.option("--partitions", type=click.IntRange(1), default=None,
              help="Partitions of the keyed topics [default: setting LAGGARD_TOPIC_PARTITIONS, 4]")
def create(bootstrap: str | None, partitions: int | None) -> None:
    """Create every topic of laggard; existing topics are left as they are."""
    settings = settings_with(bootstrap, topic_partitions=partitions)
    result = kafka_clients.create_topics(settings)
    counts = kafka_clients.partition_counts(settings, [topic.name for topic in TOPICS])
    for topic in TOPICS:
        parts = counts.get(topic.name, "?")
        policy = "compact" if topic.compacted else "delete"
        click.echo(f"{result[topic.name]:8} {topic.name:24} partitions={parts} cleanup={policy}")
    problem = kafka_clients.copartitioning_problem(settings, counts)
    if problem:
        click.echo(f"warning: {problem}", err=True)


@topics.command(name="list")
@bootstrap_option
def list_(bootstrap: str | None) -> None:
    """List laggard's topics and whether each exists on the broker."""
    settings = settings_with(bootstrap)
    client = kafka_clients.admin(settings)
    try:
        existing = set(client.list_topics())
    finally:
        client.close()
    for topic in TOPICS:
        state = "present" if topic.name in existing else "missing"
        click.echo(f"{state:8} {topic.name:24} {topic.doc}")
