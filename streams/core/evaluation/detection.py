"""Node ranking metrics against injected slow nodes (SPEC 7): precision, recall, onset to blacklisting.

A synthetic cluster knows which nodes were made slow and when the fault began (its ground truth). Fed the
blacklist deltas of a run, ``DetectionScore`` says which slow nodes were caught, which healthy nodes were
blacklisted by mistake, and how long after the fault onset each slow node first joined the blacklist.

A node counts as *blacklisted* if any delta ever added it (DSB's fault-injection experiments count a
node as detected once it is flagged); a slow node flagged before the onset gets a negative delay, which
says the detector guessed rather than saw. ``spans`` gives each node's time on the blacklist, for plots.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from streams.core.events import BlacklistDelta

US_PER_S = 1_000_000


@dataclass(frozen=True, slots=True)
class Span:
    """One stay of a node on the blacklist: ``[start_us, end_us)``; ``end_us`` is None while it lasts."""

    node_id: str
    start_us: int
    end_us: int | None


class DetectionScore:
    """Score a run's blacklist deltas against the known slow nodes and the fault onset.

    >>> from streams.core.events import BlacklistDelta, BlacklistEntry, RemovedEntry
    >>> def delta(version, at_s, added=(), removed=()):
    ...     entries = tuple(BlacklistEntry(n, 0, 9, 1.0, 0.5, 0.6, 1.4, "slow") for n in added)
    ...     gone = tuple(RemovedEntry(n, "no recent evidence") for n in removed)
    ...     return BlacklistDelta("c", version, at_s * US_PER_S, "pcores", 0, at_s * US_PER_S, entries, gone)
    >>> score = DetectionScore(slow_nodes=["n1", "n2", "n3"], onset_us=100 * US_PER_S)
    >>> for d in [delta(1, 400, ["n1", "n7"]), delta(2, 700, ["n2"], ["n7"])]:
    ...     score.update(d)
    >>> score.true_positives, score.false_positives, score.missed
    (['n1', 'n2'], ['n7'], ['n3'])
    >>> round(score.precision, 3), round(score.recall, 3)
    (0.667, 0.667)
    >>> score.onset_to_blacklist_s
    {'n1': 300.0, 'n2': 600.0, 'n3': None}
    >>> [(s.node_id, s.start_us // US_PER_S, s.end_us and s.end_us // US_PER_S) for s in score.spans()]
    [('n1', 400, None), ('n2', 700, None), ('n7', 400, 700)]
    """

    def __init__(self, slow_nodes: Iterable[str], onset_us: int = 0) -> None:
        self.slow_nodes = sorted(set(slow_nodes))
        self.onset_us = onset_us
        self._first_added: dict[str, int] = {}
        self._open: dict[str, int] = {}
        self._closed: list[Span] = []

    def update(self, delta: BlacklistDelta) -> None:
        """Take one delta, in version order."""
        at = delta.issued_at_us
        for removed in delta.removed:
            start = self._open.pop(removed.node_id, None)
            if start is not None:
                self._closed.append(Span(removed.node_id, start, at))
        for entry in delta.added:
            self._first_added.setdefault(entry.node_id, at)
            self._open.setdefault(entry.node_id, at)

    @property
    def blacklisted(self) -> list[str]:
        """Every node that was ever on the blacklist."""
        return sorted(self._first_added)

    @property
    def true_positives(self) -> list[str]:
        return [node for node in self.slow_nodes if node in self._first_added]

    @property
    def false_positives(self) -> list[str]:
        slow = set(self.slow_nodes)
        return [node for node in self.blacklisted if node not in slow]

    @property
    def missed(self) -> list[str]:
        return [node for node in self.slow_nodes if node not in self._first_added]

    @property
    def precision(self) -> float | None:
        """Slow nodes among the blacklisted ones; None when nothing was blacklisted."""
        if not self._first_added:
            return None
        return len(self.true_positives) / len(self._first_added)

    @property
    def recall(self) -> float | None:
        """Blacklisted nodes among the slow ones; None when no node was slow."""
        if not self.slow_nodes:
            return None
        return len(self.true_positives) / len(self.slow_nodes)

    @property
    def onset_to_blacklist_s(self) -> dict[str, float | None]:
        """Seconds from the fault onset to each slow node's first blacklisting (None: never)."""
        return {
            node: None if node not in self._first_added else (self._first_added[node] - self.onset_us) / US_PER_S
            for node in self.slow_nodes
        }

    def first_blacklisted_us(self, node_id: str) -> int | None:
        return self._first_added.get(node_id)

    def spans(self) -> list[Span]:
        """Each stay of each node on the blacklist, by node then start time."""
        spans = self._closed + [Span(node, start, None) for node, start in self._open.items()]
        return sorted(spans, key=lambda span: (span.node_id, span.start_us))
