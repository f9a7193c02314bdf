"""Turn successive rankings into blacklist deltas and keep the current snapshot (SPEC 2-3).

Each change is one ``BlacklistDelta`` whose version is the previous one plus one (versions are never
reused; the first delta is version 1); a ranking that changes nothing gives no delta. Added entries
carry the statistics and the reason that put the node there; removed entries carry why it left. The
snapshot holds the entries as they were added, with the version of the last delta.
"""

from __future__ import annotations

from typing import Any

from streams.core.events import BlacklistDelta, BlacklistEntry, BlacklistSnapshot, RemovedEntry
from streams.core.ranking import Ranking

SNAPSHOT_VERSION = 1


class BlacklistBook:
    """The blacklist as a versioned book: ``apply`` a ranking, get the delta (or None).

    >>> from streams.core.ranking import NodeRank
    >>> from streams.core.windows import summarize
    >>> book = BlacklistBook(cluster_id="c1")
    >>> slow = NodeRank("n1", summarize("n1", [1.0, 1.2, 1.4]), 0, True, True, "clearly slow")
    >>> delta = book.apply(Ranking(0, 300, "pcores", (slow,), cap=1))
    >>> delta.version, [e.node_id for e in delta.added], book.snapshot.node_ids
    (1, ['n1'], frozenset({'n1'}))
    >>> book.apply(Ranking(300, 600, "pcores", (slow,), cap=1)) is None  # nothing changed
    True
    """

    def __init__(self, cluster_id: str = "default", policy: str = "pcores") -> None:
        self.cluster_id = cluster_id
        self.policy = policy
        self._version = 0
        self._entries: dict[str, BlacklistEntry] = {}
        self._added_at: dict[str, int] = {}
        self._issued_at = 0
        self._window = (0, 0)
        self._nodes_seen = 0

    @property
    def version(self) -> int:
        return self._version

    @property
    def listed(self) -> dict[str, int]:
        """Blacklisted node -> event time (window end) it was added."""
        return dict(self._added_at)

    @property
    def snapshot(self) -> BlacklistSnapshot:
        """The whole current blacklist, with the version of the last delta (0 before any)."""
        nodes = tuple(self._entries[node] for node in sorted(self._entries))
        return BlacklistSnapshot(self.cluster_id, self._version, self._issued_at, self.policy,
                                 self._window[0], self._window[1], nodes, self._nodes_seen)

    def apply(self, ranking: Ranking) -> BlacklistDelta | None:
        """Make the book follow ``ranking``; return the change, or None when there is none."""
        wanted = ranking.blacklist
        if wanted == self._entries.keys():  # the common case: nothing changed, no rows to look up
            return None
        rows = ranking.by_node()
        added = tuple(rows[node].entry() for node in sorted(wanted - set(self._entries)))
        removed = tuple(
            RemovedEntry(node, rows[node].reason if node in rows else "no longer qualifies")
            for node in sorted(set(self._entries) - wanted)
        )
        for gone in removed:
            del self._entries[gone.node_id]
            del self._added_at[gone.node_id]
        for entry in added:
            self._entries[entry.node_id] = entry
            self._added_at[entry.node_id] = ranking.window_end_us
        self._version += 1
        self._issued_at = ranking.window_end_us
        self._window = (ranking.window_start_us, ranking.window_end_us)
        self._nodes_seen = ranking.seen
        return BlacklistDelta(self.cluster_id, self._version, self._issued_at, self.policy,
                              ranking.window_start_us, ranking.window_end_us, added, removed, self._nodes_seen)

    def adopt(self, snapshot: BlacklistSnapshot) -> None:
        """Continue from a published snapshot (a cold start that must not reuse versions consumers have seen).

        >>> book = BlacklistBook("c1")
        >>> entry = BlacklistEntry("n1", 0, 9, 1.2, 0.4, 0.9, 1.5, "slow")
        >>> book.adopt(BlacklistSnapshot("c1", 7, 600, "pcores", 0, 600, (entry,), 40))
        >>> book.version, sorted(book.listed)
        (7, ['n1'])
        """
        self._version = snapshot.version
        self._issued_at = snapshot.issued_at_us
        self._window = (snapshot.window_start_us, snapshot.window_end_us)
        self._nodes_seen = snapshot.nodes_seen
        self._entries = {entry.node_id: entry for entry in snapshot.nodes}
        self._added_at = {entry.node_id: snapshot.issued_at_us for entry in snapshot.nodes}

    def state(self) -> dict[str, Any]:
        """Plain JSON-able state."""
        return {
            "version": SNAPSHOT_VERSION,
            "blacklist_version": self._version,
            "issued_at_us": self._issued_at,
            "window": list(self._window),
            "nodes_seen": self._nodes_seen,
            "entries": [
                [_entry_to_list(entry), self._added_at[node]] for node, entry in sorted(self._entries.items())
            ],
        }

    def load(self, state: dict[str, Any]) -> None:
        """Replace the state by one from ``state``; a different version raises ValueError."""
        if state.get("version") != SNAPSHOT_VERSION:
            raise ValueError(f"unknown BlacklistBook snapshot version {state.get('version')!r}")
        self._version = int(state["blacklist_version"])
        self._issued_at = int(state["issued_at_us"])
        self._window = (int(state["window"][0]), int(state["window"][1]))
        self._nodes_seen = int(state.get("nodes_seen", 0))
        self._entries, self._added_at = {}, {}
        for fields, added_at in state["entries"]:
            entry = BlacklistEntry(*fields)
            self._entries[entry.node_id] = entry
            self._added_at[entry.node_id] = int(added_at)


def _entry_to_list(entry: BlacklistEntry) -> list[Any]:
    return [entry.node_id, entry.level, entry.n, entry.mean, entry.std, entry.ci_low, entry.ci_high,
            entry.reason]
