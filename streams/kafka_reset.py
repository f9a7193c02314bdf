"""Starting over on a shared broker: the topics and consumer groups of one deployment (an app id), found, checked
for running workers and deleted (``laggard topics delete``). A replay of a second trace through the same topics
mixes its events with the first one's state; on a broker of its own, ``laggard kafka start --data-dir NEW`` does
the same.
"""

from __future__ import annotations

import time

from kafka import KafkaAdminClient
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


def deployment_topics(settings: Settings) -> list[str]:
    """The topics on the broker that belong to laggard under this app id: the registry's, and the workers' own
    (``INTERNAL``), sorted."""
    client = admin(settings)
    try:
        names = set(client.list_topics())
    finally:
        client.close()
    ours = {topic.name for topic in TOPICS} | {f"{settings.app_id}-{suffix}" for suffix in INTERNAL}
    return sorted(names & ours)


def busy_groups(settings: Settings, groups: tuple[str, ...]) -> dict[str, int]:
    """Group -> its members now, for those of ``groups`` with any (a worker still running)."""
    client = admin(settings)
    try:
        present = _present(client, groups)
        described = client.describe_groups(present) if present else {}
    finally:
        client.close()
    return {group: len(info.get("members") or ()) for group, info in described.items() if info.get("members")}


def delete_deployment(settings: Settings, topics: list[str], groups: tuple[str, ...],
                      timeout_s: float = 30.0) -> list[str]:
    """Delete ``topics`` and the consumer groups of ``groups`` that exist (their committed offsets), then wait until
    the broker no longer lists the topics, so that they can be created again at once. Returns the groups deleted."""
    client = admin(settings)
    try:
        if topics:
            client.delete_topics(topics, timeout_ms=int(timeout_s * 1000))
        present = _present(client, groups)
        outcomes = client.delete_groups(present) if present else {}
        deadline = time.monotonic() + timeout_s
        while set(topics) & set(client.list_topics()):
            if time.monotonic() > deadline:
                left = sorted(set(topics) & set(client.list_topics()))
                raise KafkaTimeoutError(f"the broker still lists {', '.join(left)} after {timeout_s:.0f} s")
            time.sleep(0.3)
        return [group for group, outcome in outcomes.items() if outcome == "OK"]
    finally:
        client.close()


def _present(client: KafkaAdminClient, groups: tuple[str, ...]) -> list[str]:
    """The groups of ``groups`` the broker knows (asking a coordinator of a broker that never had a group fails)."""
    known = {entry["group_id"] for entry in client.list_groups()}
    return [group for group in groups if group in known]
