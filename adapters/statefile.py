"""The adapter's small state file: last applied version, applied set, seen nodes, Kafka resume offsets.

A JSON document in a versioned envelope, replaced atomically after every applied change, so a restart
applies nothing twice. The offsets only save re-reading: correctness rests on the version, since a
duplicate delta is skipped by version whatever the offset. A file of another format, another cluster, or
one that does not parse means a cold start (resynchronise from the snapshot) with a warning, never a crash.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from adapters.base import write_atomically
from adapters.follower import FollowerState

log = logging.getLogger("laggard.adapters")

STATE_FORMAT = "laggard-adapter-state/1"


@dataclass
class SavedState:
    """What ``load`` returns and ``save`` writes."""

    follower: FollowerState = field(default_factory=FollowerState)
    offsets: dict[int, int] = field(default_factory=dict)


def load(path: Path, cluster_id: str) -> SavedState:
    """The saved state of ``cluster_id``, or a fresh one (with a warning when the file is unusable)."""
    if not path.exists():
        return SavedState()
    try:
        document = orjson.loads(path.read_bytes())
        if document.get("format") != STATE_FORMAT:
            raise ValueError(f"format {document.get('format')!r}, expected {STATE_FORMAT!r}")
        if document["cluster_id"] != cluster_id:
            raise ValueError(f"it belongs to cluster {document['cluster_id']!r}, not {cluster_id!r}")
        version = document["version"]
        follower = FollowerState(
            version=None if version is None else int(version),
            applied=frozenset(str(node) for node in document["applied"]),
            seen=frozenset(str(node) for node in document["seen"]),
        )
        offsets = {int(partition): int(offset) for partition, offset in document["offsets"].items()}
    except (ValueError, KeyError, TypeError, AttributeError, orjson.JSONDecodeError) as exc:
        log.warning("ignoring state file %s (%s): starting cold, resynchronising from the snapshot", path, exc)
        return SavedState()
    return SavedState(follower, offsets)


def save(path: Path, cluster_id: str, saved: SavedState) -> None:
    """Replace the state file atomically."""
    state = saved.follower
    document = {
        "format": STATE_FORMAT,
        "cluster_id": cluster_id,
        "version": state.version,
        "applied": sorted(state.applied),
        "seen": sorted(state.seen),
        "offsets": {str(partition): offset for partition, offset in sorted(saved.offsets.items())},
    }
    write_atomically(path, orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")
