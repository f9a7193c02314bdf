"""Starting over on a shared broker: the topics and consumer groups of one deployment (an app id), found, checked
for running workers and deleted (``laggard topics delete``). A replay of a second trace through the same topics
mixes its events with the first one's state; on a broker of its own, ``laggard kafka start --data-dir NEW`` does
the same.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from kafka.errors import KafkaError, KafkaTimeoutError

from streams.kafka_clients import admin
from streams.serde.topics import TOPICS
from streams.settings import Settings


def app_groups(settings: Settings) -> tuple[str, ...]:
    """The consumer groups of a deployment's workers: the app id's, and its prediction role's (``<app_id>-predict``)."""
    return settings.app_id, f"{settings.app_id}-predict"


# The workers' own topics, after "<app_id>-": the direct engine's checkpoints (and its prediction role's, whose app id
# is "<app_id>-predict"), the Faust tables' changelogs and Faust's assignor topic. Exact names, not the prefix: another
# deployment's app id may begin with this one's ("laggard-staging" with "laggard").
INTERNAL = ("checkpoints", "predict-checkpoints", "normalise-checkpoints-changelog", "rank-checkpoints-changelog",
            "predict-checkpoints-changelog", "__assignor-__leader")


def deployment_names(settings: Settings) -> set[str]:
    """Every topic name of the deployment: the registry's, and its workers' own (``INTERNAL``)."""
    return {topic.name for topic in TOPICS} | {f"{settings.app_id}-{suffix}" for suffix in INTERNAL}


@dataclass(frozen=True)
class Plan:
    """What ``laggard topics delete`` finds on the broker: the deployment's topics there, its groups there, the
    consumer groups with members reading any of those topics (whatever their app id) or whose reading cannot be
    told (rebalancing, undecodable, not described), and the app ids of other laggard deployments whose own topics
    are here (they read the same registry topics, with no member right now perhaps)."""

    topics: list[str]
    groups: list[str]
    readers: dict[str, str]  # group -> what it reads of the doomed topics, in words
    others: list[str]


def plan(settings: Settings, names: tuple[str, ...] = ()) -> Plan:
    """The deletion of ``names`` (all the deployment's topics and groups when empty) as the broker stands now."""
    client = admin(settings)
    try:
        present = set(client.list_topics())
        topics = sorted(present & (set(names) if names else deployment_names(settings)))
        listed = client.list_groups()
        known = {entry["group_id"] for entry in listed}
        groups = [] if names else [group for group in app_groups(settings) if group in known]
        # Only consumer groups read topics; another protocol's metadata (Schema Registry, Connect) does not decode
        consumers = sorted(entry["group_id"] for entry in listed if entry.get("protocol_type") in ("consumer", ""))
        readers = {group: words for group in consumers if (words := _reading(client, group, set(topics)))}
    finally:
        client.close()
    return Plan(topics, groups, readers, _other_apps(present, settings.app_id))


def _other_apps(present: set[str], app_id: str) -> list[str]:
    """The app ids whose own topics (``INTERNAL``) are among ``present``, this one's left out. "X-predict-checkpoints"
    is X's prediction role's, not an app "X-predict"."""
    apps = {name[:-len(suffix) - 1] for name in present for suffix in INTERNAL if name.endswith(f"-{suffix}")}
    roles = {app for app in apps if app.endswith("-predict") and app.removesuffix("-predict") in apps}
    return sorted(apps - roles - {app_id})


def _reading(client: Any, group: str, doomed: set[str]) -> str | None:
    """What ``group``'s members read of ``doomed``, in words; None when they read none of it. A group whose reading
    cannot be told (its description failed, it is rebalancing, a member's subscription does not decode and nothing
    is assigned to it) counts as reading them: deleting under a running consumer is what must not happen."""
    try:
        info = client.describe_groups([group])[group]
    except (KafkaError, ValueError, UnicodeError) as exc:
        return f"cannot be described ({type(exc).__name__}: {exc})"
    members = info.get("members") or ()
    if not members or not doomed:
        return None
    if info.get("error") not in (None, "", 0) or info.get("group_state") != "Stable":
        return f"{len(members)} member(s), state {info.get('group_state')}: what it reads cannot be told"
    read: set[str] = set()
    for member in members:
        metadata, assignment = member.get("member_metadata"), member.get("member_assignment")
        topics = set(metadata.get("topics") or ()) if isinstance(metadata, dict) else set()
        if isinstance(assignment, dict):
            topics |= {part.get("topic") for part in assignment.get("assigned_partitions") or ()}
        if not topics:  # Faust's subscription (version 4) does not decode in kafka-python: its assignment does
            return f"{len(members)} member(s) whose subscription cannot be read"
        read |= topics
    return ", ".join(sorted(read & doomed)) or None


def delete(settings: Settings, chosen: Plan, timeout_s: float = 30.0) -> dict[str, str]:
    """Delete the plan's topics and groups (their committed offsets), then wait until the broker no longer lists
    the topics, so that they can be created again at once. Returns each group's outcome ("OK", or the error).
    ``DeletionError`` says what was done when a step fails."""
    client = admin(settings)
    done = "nothing deleted"
    try:
        if chosen.topics:
            client.delete_topics(chosen.topics, timeout_ms=int(timeout_s * 1000))
            done = f"deleting {', '.join(chosen.topics)} was asked"
        outcomes = {group: str(outcome) for group, outcome in client.delete_groups(chosen.groups).items()} \
            if chosen.groups else {}
        deadline = time.monotonic() + timeout_s
        while left := sorted(set(chosen.topics) & set(client.list_topics())):
            if time.monotonic() > deadline:
                raise KafkaTimeoutError(f"the broker still lists {', '.join(left)} after {timeout_s:.0f} s")
            time.sleep(0.3)
        return outcomes
    except (KafkaError, RuntimeError) as exc:  # kafka-python raises RuntimeError when it finds no controller
        raise DeletionError(f"{exc} ({done})") from exc
    finally:
        client.close()


class DeletionError(RuntimeError):
    """A step of ``delete`` failed; the message says what had been done."""
