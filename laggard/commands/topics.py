"""`laggard topics create|list|delete`: laggard's topics from the one registry."""

from __future__ import annotations

import sys
from typing import Any

import click

from laggard.commands.options import bootstrap_option, settings_with
from laggard.errors import UserError
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
    other = [topic.name for topic in TOPICS if topic.partitions is None and partitions is not None
             and counts.get(topic.name) not in (None, partitions)]
    kept = [name for name in other if result[name] == "exists"]
    if kept:  # --partitions 3 on topics of 2 said only "exists ... partitions=2"
        click.echo(f"warning: --partitions {partitions} not applied to existing {', '.join(kept)}: a topic keeps its "
                   "count (`laggard topics delete` first to start over with another)", err=True)
    paired = [name for name in other if result[name] == "created"]
    if paired:  # a co-partitioned topic takes its partner's count
        click.echo(f"note: {', '.join(paired)} created with the partition count of the topic read with it, not "
                   f"--partitions {partitions}", err=True)


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


@topics.command()
@bootstrap_option
@click.argument("names", nargs=-1)
@click.option("--yes", is_flag=True, help="Delete without asking (needed when stdin is not a terminal).")
def delete(bootstrap: str | None, names: tuple[str, ...], yes: bool) -> None:
    """Delete laggard's topics and its workers' consumer groups, to start over (e.g. before replaying another
    trace through the same broker). NAMES: only these topics, groups kept (e.g. `job-events`, after a producer
    created it with another partition count than `task-events`).

    The deployment is the one of LAGGARD_APP_ID: the registry's topics (`laggard topics list`), the workers' own
    `<app_id>-...` topics (checkpoints, Faust's changelogs) and the groups `<app_id>` and `<app_id>-predict`.
    Refused while any consumer group (a worker of any app id) reads one of those topics. Readers without a group
    cannot be seen: stop adapters, `advise serve --kafka` and replays first (a producer would create a deleted
    topic again with the broker's defaults). Adapters keep their state files: delete those too, or an adapter takes
    the new versions up to the one it had applied for ones it has."""
    from kafka.errors import KafkaError

    from streams import kafka_reset

    settings = settings_with(bootstrap)
    if names:
        unknown = [name for name in names if name not in kafka_reset.deployment_names(settings)]
        if unknown:
            raise click.UsageError(f"not a topic of laggard under app id {settings.app_id!r}: {', '.join(unknown)} "
                                   "(`laggard topics list` shows them)")
    try:
        chosen = _checked_plan(settings, names)
        if not chosen.topics and not chosen.groups:
            click.echo(f"nothing to delete on {settings.bootstrap_servers}")
            return
        if chosen.others:
            click.echo(f"warning: other laggard deployments have topics here (app ids {', '.join(chosen.others)}): "
                       "they read the registry's topics too", err=True)
        plan_words = (f"{len(chosen.topics)} topic(s) on {settings.bootstrap_servers}: "
                      f"{', '.join(chosen.topics) or 'none'}" + (f"; consumer groups {', '.join(chosen.groups)}"
                                                                 if chosen.groups else ""))
        if not yes:
            if not sys.stdin.isatty():
                raise click.UsageError(f"this would delete {plan_words}; add --yes to delete them")
            click.confirm(f"Delete {plan_words}?", abort=True)
            chosen = _checked_plan(settings, names)  # a consumer may have started while we asked
        outcomes = kafka_reset.delete(settings, chosen)
    except (KafkaError, kafka_reset.DeletionError) as exc:
        raise UserError(f"the broker at {settings.bootstrap_servers} refused: {exc}") from None
    failed = {group: outcome for group, outcome in outcomes.items() if outcome != "OK"}
    deleted = [group for group in outcomes if group not in failed]
    click.echo(f"deleted {len(chosen.topics)} topic(s): {', '.join(chosen.topics) or 'none'}"
               + (f"; consumer groups: {', '.join(deleted)}" if deleted else ""))
    if failed:  # e.g. a worker joined between the check and the deletion: its offsets stay
        raise UserError("consumer group(s) not deleted: " + "; ".join(f"{g} ({o})" for g, o in failed.items()))


def _checked_plan(settings: Any, names: tuple[str, ...]) -> Any:
    """The deletion as the broker stands now; refused while a consumer group reads what it would delete."""
    from streams import kafka_reset

    chosen = kafka_reset.plan(settings, names)
    if chosen.readers:
        readers = "; ".join(f"group {group} reads {words}" for group, words in chosen.readers.items())
        raise UserError(f"consumers are running ({readers}): stop them first")
    return chosen
