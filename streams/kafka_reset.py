"""Starting over on a shared broker: the topics and consumer groups of one deployment (an app id), found, checked
for running workers and deleted (``laggard topics delete``). A replay of a second trace through the same topics
mixes its events with the first one's state; on a broker of its own, ``laggard kafka start --data-dir NEW`` does
the same.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kafka.errors import KafkaTimeoutError

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


@dataclass(frozen=True)
class Plan:
    """What ``laggard topics delete`` finds on the broker: the deployment's topics there, its groups there, the
    groups with members reading any of those topics (whatever their app id), and the checkpoint topics of other
    deployments (which read the same registry topics, with no member right now perhaps)."""

    topics: list[str]
    groups: list[str]
    readers: dict[str, list[str]]  # group -> the doomed topics its members subscribe to or hold
    others: list[str]


def plan(settings: Settings, names: tuple[str, ...] = ()) -> Plan:
    """The deletion of ``names`` (all the deployment's topics and groups when empty) as the broker stands now."""
    client = admin(settings)
    try:
        present = set(client.list_topics())
        ours = {topic.name for topic in TOPICS} | {f"{settings.app_id}-{suffix}" for suffix in INTERNAL}
        topics = sorted(present & (set(names) if names else ours))
        known = {entry["group_id"] for entry in client.list_groups()}
        groups = [] if names else [group for group in app_groups(settings) if group in known]
        described = client.describe_groups(sorted(known)) if known else {}
    finally:
        client.close()
    readers = {}
    for group, info in sorted(described.items()):
        read = set()
        for member in info.get("members") or ():
            metadata, assignment = member.get("member_metadata"), member.get("member_assignment")
            if isinstance(metadata, dict):
                read |= set(metadata.get("topics") or ())
            if isinstance(assignment, dict):
                read |= {part.get("topic") for part in assignment.get("assigned_partitions") or ()}
            if not isinstance(metadata, dict) and group in app_groups(settings):
                read |= set(topics)  # a member of this deployment whose subscription did not decode: assume all
        if read & set(topics):
            readers[group] = sorted(read & set(topics))
    own = {f"{settings.app_id}-checkpoints", f"{settings.app_id}-predict-checkpoints"}
    others = sorted(name for name in present if name.endswith("-checkpoints") and name not in own
                    and not name.endswith("-changelog"))
    return Plan(topics, groups, readers, others)


def delete(settings: Settings, chosen: Plan, timeout_s: float = 30.0) -> dict[str, str]:
    """Delete the plan's topics and groups (their committed offsets), then wait until the broker no longer lists
    the topics, so that they can be created again at once. Returns each group's outcome ("OK", or the error)."""
    client = admin(settings)
    try:
        if chosen.topics:
            client.delete_topics(chosen.topics, timeout_ms=int(timeout_s * 1000))
        outcomes = {group: str(outcome) for group, outcome in client.delete_groups(chosen.groups).items()} \
            if chosen.groups else {}
        deadline = time.monotonic() + timeout_s
        while left := sorted(set(chosen.topics) & set(client.list_topics())):
            if time.monotonic() > deadline:
                raise KafkaTimeoutError(f"the broker still lists {', '.join(left)} after {timeout_s:.0f} s")
            time.sleep(0.3)
        return outcomes
    finally:
        client.close()
