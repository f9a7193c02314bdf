"""The bookkeeping every scheduler adapter shares, as a pure state machine (no Kafka, files or clock).

Detection (node scores) and decision (the ranking policy) happen upstream; this class decides only whether a
snapshot or delta read from Kafka may be *acted on*, and what the action is. It keeps three things: the last
applied version, the applied set, and every node it has ever seen. Each record yields one step:

- ``Change``: apply it (the applier acts), then ``commit`` it.
- ``Skip``: nothing to do (a duplicate, an older snapshot, another cluster's record).
- ``Gap``: versions are missing; resynchronise from the snapshot topic.
- ``Refusal``: the change would push the blacklist over the cap; nothing is applied, the state is unchanged.

The cap: a change is refused when the blacklist after it would hold more than ``max_fraction`` of the known
nodes, unless it shrinks the blacklist (releasing nodes is always allowed). The known nodes are the largest of
``known_nodes`` (a count, or names), every node ever seen in applied snapshots and deltas, and the number of
nodes the ranking saw (``nodes_seen``, carried by each delta and snapshot).

>>> from streams.core.events import BlacklistDelta, BlacklistEntry
>>> def delta(version, *added):
...     entries = tuple(BlacklistEntry(n, 0, 9, 1.2, 0.3, 1.0, 1.4, "slow") for n in added)
...     return BlacklistDelta("c1", version, 0, "pcores", 0, 1, entries, ())
>>> follower = Follower("c1", max_fraction=0.1, known_nodes=40)
>>> step = follower.on_delta(delta(1, "n7"))
>>> sorted(step.after)
['n7']
>>> follower.commit(step)
>>> follower.on_delta(delta(1, "n7"))
Skip(reason='duplicate: version 1 is already applied')
>>> follower.on_delta(delta(3, "n8")).reason
'version gap: expected 2, got 3'
>>> follower.on_delta(delta(2, "n1", "n2", "n3", "n4")).reason
'blacklist would hold 5 of 40 known nodes, over the cap of 10% (4 nodes)'
>>> follower.state.version
1
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from streams.core.events import BlacklistDelta, BlacklistEntry, BlacklistSnapshot, RemovedEntry

# Float products such as 0.29 * 100 land just below the integer they mean.
_EPSILON = 1e-9


@dataclass(frozen=True, slots=True)
class FollowerState:
    """What has been applied: the version, the blacklist as applied, every node ever seen."""

    version: int | None = None
    applied: frozenset[str] = frozenset()
    seen: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Change:
    """Take the blacklist from ``before`` to ``after``; ``added``/``removed`` hold only real changes."""

    cluster_id: str
    version: int
    source: Literal["snapshot", "delta"]
    added: tuple[BlacklistEntry, ...]
    removed: tuple[RemovedEntry, ...]
    before: frozenset[str]
    after: frozenset[str]
    record: BlacklistDelta | BlacklistSnapshot


@dataclass(frozen=True, slots=True)
class Skip:
    """Nothing to do."""

    reason: str
    other_cluster: str | None = field(default=None, repr=False)  # the record was another cluster's (shared topics)


@dataclass(frozen=True, slots=True)
class Gap:
    """Versions between the applied one and this record are missing: resynchronise from the snapshot."""

    expected: int
    got: int

    @property
    def reason(self) -> str:
        return f"version gap: expected {self.expected}, got {self.got}"


@dataclass(frozen=True, slots=True)
class Refusal:
    """The whole change is refused by the cap; the state is unchanged."""

    version: int
    size_after: int
    known: int
    max_fraction: float

    @property
    def reason(self) -> str:
        limit = math.floor(self.max_fraction * self.known + _EPSILON)
        return (
            f"blacklist would hold {self.size_after} of {self.known} known nodes, "
            f"over the cap of {self.max_fraction:.0%} ({limit} node{'' if limit == 1 else 's'})"
        )


Step = Change | Skip | Gap | Refusal


class Follower:
    """Version bookkeeping, gap detection, the cap and idempotence for one cluster's blacklist.

    ``known_nodes`` is the cluster size (an int) or its node names; adapters that can list the cluster's
    nodes (Kubernetes) update it with ``set_known``. ``state`` restores what a previous run applied.
    """

    def __init__(
        self,
        cluster_id: str,
        max_fraction: float = 0.1,
        known_nodes: int | Iterable[str] | None = None,
        state: FollowerState | None = None,
    ) -> None:
        if not 0 < max_fraction <= 1:
            raise ValueError(f"max_fraction must be in (0, 1], got {max_fraction}")
        self.cluster_id = cluster_id
        self.max_fraction = max_fraction
        self.known_nodes = known_nodes
        self.state = state or FollowerState()
        self._known_count = 0
        self._known_names: frozenset[str] = frozenset()
        self.set_known(known_nodes)

    def set_known(self, known_nodes: int | Iterable[str] | None) -> None:
        """Replace the externally known nodes (a count or names)."""
        if isinstance(known_nodes, int):
            self._known_count, self._known_names = known_nodes, frozenset()
        else:
            self._known_count, self._known_names = 0, frozenset(known_nodes or ())

    def known_count(self, extra: Iterable[str] = ()) -> int:
        """How many nodes the cap is a fraction of."""
        names = self._known_names | self.state.seen | self.state.applied | frozenset(extra)
        return max(self._known_count, len(names))

    def on_snapshot(self, snapshot: BlacklistSnapshot) -> Step:
        """Resynchronise: the snapshot's set replaces whatever was applied, unless it is older."""
        if snapshot.cluster_id != self.cluster_id:
            return Skip(f"snapshot of another cluster: {snapshot.cluster_id}", snapshot.cluster_id)
        applied, version = self.state.applied, self.state.version
        if version is not None and snapshot.version < version:
            return Skip(f"snapshot version {snapshot.version} is older than applied version {version}")
        target = snapshot.node_ids
        if snapshot.version == version and target == applied:
            return Skip(f"in sync with snapshot version {version}")
        added = tuple(sorted((e for e in snapshot.nodes if e.node_id not in applied), key=_node))
        reason = f"not in snapshot version {snapshot.version} (resynchronised)"
        removed = tuple(RemovedEntry(node, reason) for node in sorted(applied - target))
        return self._checked(
            Change(self.cluster_id, snapshot.version, "snapshot", added, removed, applied, target, snapshot)
        )

    def on_delta(self, delta: BlacklistDelta) -> Step:
        """Apply the next version, skip an old one, or report a gap."""
        if delta.cluster_id != self.cluster_id:
            return Skip(f"delta of another cluster: {delta.cluster_id}", delta.cluster_id)
        version = self.state.version
        if version is not None and delta.version <= version:
            return Skip(f"duplicate: version {delta.version} is already applied")
        expected = 1 if version is None else version + 1
        if delta.version != expected:
            return Gap(expected, delta.version)
        applied = self.state.applied
        gone = {entry.node_id for entry in delta.removed}
        # A node both released and re-added in one delta ends on the list.
        removed = tuple(e for e in delta.removed if e.node_id in applied and e.node_id not in _ids(delta.added))
        after = (applied - gone) | _ids(delta.added)
        added = tuple(e for e in delta.added if e.node_id not in applied)
        return self._checked(Change(self.cluster_id, delta.version, "delta", added, removed, applied, after, delta))

    def commit(self, change: Change) -> None:
        """Record that ``change`` was applied."""
        touched = change.after | {entry.node_id for entry in change.removed}
        self.state = FollowerState(change.version, change.after, self.state.seen | touched)

    def _checked(self, change: Change) -> Change | Refusal:
        size = len(change.after)
        known = max(self.known_count(change.after | change.before), change.record.nodes_seen)
        over = size > self.max_fraction * known + _EPSILON
        if over and size > len(change.before):
            return Refusal(change.version, size, known, self.max_fraction)
        return change


def _ids(entries: Iterable[BlacklistEntry]) -> frozenset[str]:
    return frozenset(entry.node_id for entry in entries)


def _node(entry: BlacklistEntry) -> str:
    return entry.node_id
