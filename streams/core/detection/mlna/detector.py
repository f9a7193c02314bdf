"""ML-NA as a node detector (SPEC 6): close sub-periods in event time, predict next period's weak nodes.

Samples are placed by their task's event time (``ts_us``) in periods of ``sub_periods`` sub-periods of
``sub_period_us`` counted from ``origin_us``. A period closes once the ranking window's end has passed its end
by ``lateness_us`` (samples of long jobs become final after their tasks ended; those still later are counted
in ``late_samples`` and left out). Closing a period clusters it, lets the classifier learn and predicts
the next period; ``detect`` then says, for every node of the last closed period, whether it is predicted
weak (``suspect``, p at or above ``threshold``) and why, in words. Provisional samples are ignored: the
final value of the same task follows.

>>> from streams.core.events import NormalizedTask
>>> detector = MlnaDetector(sub_period_us=10, sub_periods=2, classifier="forest", seed=1)
>>> for start in (0, 20, 40):
...     for i in range(40):
...         for node in range(12):
...             z = (1.5 if node < 2 else -0.2) + (i % 5 - 2) / 10 + node / 100
...             detector.learn(NormalizedTask("j", str(i), 0, f"n{node}", start + i % 20, 1, z))
>>> evidence = detector.detect(WindowView(0, 60, {}))
>>> sorted(node for node, e in evidence.items() if e.suspect)
['n0', 'n1']
>>> evidence["n0"].reason
'weak cluster 2 of 7 in 3 of the last 3 periods, predicted weak next period with p = 0.99'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streams.core.detection.base import Evidence, WindowView
from streams.core.detection.mlna.features import FeatureTable, PeriodBuilder
from streams.core.detection.mlna.model import MlnaModel, PeriodOutcome
from streams.core.events import NodeClass, NormalizedTask

SNAPSHOT_VERSION = 1
_UNITS = {3_600_000_000: "hours", 86_400_000_000: "days"}


class MlnaDetector:
    """Node detector: learn samples, close periods in event time, list the nodes predicted weak next period."""

    name = "mlna"

    def __init__(self, sub_period_us: int = 86_400_000_000, sub_periods: int = 30, classifier: str = "forest",
                 threshold: float = 0.4, origin_us: int = 0, lateness_us: int = 0, seed: int = 0) -> None:
        if sub_period_us <= 0 or sub_periods <= 0:
            raise ValueError("sub_period_us and sub_periods must be positive")
        self.sub_period_us = sub_period_us
        self.sub_periods = sub_periods
        self.classifier = classifier
        self.threshold = threshold
        self.origin_us = origin_us
        self.lateness_us = lateness_us
        self.seed = seed
        self.late_samples = 0
        self._reset()

    def _reset(self) -> None:
        self.model = MlnaModel((self.classifier,), seed=self.seed)
        self.last: PeriodOutcome | None = None
        self._open: dict[int, PeriodBuilder] = {}
        self._next: int | None = None  # index of the next period to close
        self._classes: list[NodeClass] = []  # records of the periods closed since the last take_node_classes()

    @property
    def period_us(self) -> int:
        return self.sub_period_us * self.sub_periods

    def learn(self, sample: NormalizedTask) -> None:
        if sample.provisional:
            return
        index = (sample.ts_us - self.origin_us) // self.period_us
        if self._next is None:
            self._next = index
        if index < self._next:
            self.late_samples += 1
            return
        builder = self._open.get(index)
        if builder is None:
            start = self.origin_us + index * self.period_us
            builder = self._open[index] = PeriodBuilder(start, self.sub_period_us, self.sub_periods)
        builder.add(sample.node_id, sample.ts_us, sample.z)

    def advance(self, now_us: int) -> list[PeriodOutcome]:
        """Close every period whose end (plus the lateness) ``now_us`` has passed, in order."""
        closed: list[PeriodOutcome] = []
        while self._next is not None and self._period_end(self._next) + self.lateness_us <= now_us:
            builder = self._open.pop(self._next, None)
            start = self.origin_us + self._next * self.period_us
            table = (builder or PeriodBuilder(start, self.sub_period_us, self.sub_periods)).table()
            self.last = self.model.close(table)
            closed.append(self.last)
            self._classes.extend(self.node_classes())
            self._next += 1
        return closed

    def _period_end(self, index: int) -> int:
        return self.origin_us + (index + 1) * self.period_us

    def detect(self, window: WindowView) -> Mapping[str, Evidence]:
        self.advance(window.end_us)
        if self.last is None:  # no period closed yet: say when one will (ML-NA's periods are long: 30 days)
            first = "" if self._next is None else (
                f", the first at {(self._period_end(self._next) + self.lateness_us) / 3.6e9:g} h")
            why = f"no ML-NA period closed yet ({self.sub_periods} x {self.sub_period_us / 3.6e9:g} h{first})"
            return {node: Evidence(node, False, 0.0, why) for node in window.stats}
        probabilities = self.last.predictions[self.classifier]
        return {node: self._evidence(node, p) for node, p in probabilities.items()}

    def take_node_classes(self) -> list[NodeClass]:
        """The node-classes records of the periods closed since the last call (shells publish them)."""
        classes, self._classes = self._classes, []
        return classes

    def node_classes(self) -> list[NodeClass]:
        """One record per node of the last closed period: its cluster, label and next-period odds."""
        last = self.last
        if last is None:
            return []
        table, choice = last.table, last.choice
        final = 3 * (table.sub_periods - 1)
        out = []
        for i, node in enumerate(table.nodes):
            p = last.predictions[self.classifier][node]
            cluster = choice.chosen.labels[i] + 1 if choice is not None else 0
            out.append(NodeClass(
                node, table.start_us, table.end_us, choice.k if choice is not None else 0, cluster,
                choice.weak + 1 if choice is not None else 0, node in last.weak, p, p >= self.threshold,
                self.classifier, table.counts[i], table.values[i][final], table.values[i][final + 1],
                self.model.weak_count(node), len(self.model.history), self._evidence(node, p).reason))
        return out

    def _evidence(self, node: str, p: float) -> Evidence:
        assert self.last is not None
        choice, suspect = self.last.choice, p >= self.threshold
        unit = _UNITS.get(self.period_us, "periods")
        seen = f"{self.model.weak_count(node)} of the last {len(self.model.history)} {unit}"
        where = f"weak cluster {choice.weak + 1} of {choice.k}" if choice is not None else "no clustering"
        verdict = "predicted weak" if suspect else f"not predicted weak (threshold {self.threshold:g})"
        reason = f"{where} in {seen}, {verdict} next period with p = {p:.2f}"
        return Evidence(node, suspect, p, reason, still_slow=suspect)

    def snapshot(self) -> dict[str, Any]:
        """Open periods, the learned pairs (replayed on restore), the last closed period and its outcome."""
        last = self.last
        return {
            "version": SNAPSHOT_VERSION,
            "next": self._next,
            "late": self.late_samples,
            "open": {str(i): b.cells() for i, b in self._open.items()},
            "pairs": [[rows, labels] for rows, labels in self.model.pairs],
            "learned": self.model.learned_periods,
            "history": [sorted(weak) for weak in self.model.history],
            "previous": _table_state(self.model.previous),
            "last": None if last is None else {"index": last.index, "table": _table_state(last.table)},
        }

    def restore(self, state: dict[str, Any]) -> None:
        if state.get("version") != SNAPSHOT_VERSION:
            raise ValueError(f"mlna snapshot version {state.get('version')!r}, expected {SNAPSHOT_VERSION}")
        self._reset()
        try:
            self._next = state["next"]
            self.late_samples = int(state["late"])
            for index, cells in state["open"].items():
                start = self.origin_us + int(index) * self.period_us
                builder = self._open[int(index)] = PeriodBuilder(start, self.sub_period_us, self.sub_periods)
                builder.restore_cells(cells)
            for rows, labels in state["pairs"]:
                self.model.replay(rows, labels)
            self.model.learned_periods = int(state["learned"])
            self.model.history.extend(frozenset(weak) for weak in state["history"])
            last = state["last"]
            self.model.restore_previous(_table_from(state["previous"]), 0 if last is None else last["index"] + 1)
            if last is not None:
                self.last = self._replayed(last["index"], _table_from(last["table"]))
        except (KeyError, TypeError, ValueError) as exc:
            self._reset()
            raise ValueError(f"unreadable mlna snapshot: {exc}") from exc

    def _replayed(self, index: int, table: FeatureTable | None) -> PeriodOutcome | None:
        """The last outcome again: clustering is seeded and the classifier restored, so it is the same."""
        if table is None:
            return None
        from streams.core.detection.mlna.clustering import choose_k

        model = self.model
        choice = choose_k(table.values, table.sub_periods, model.k_values, model.max_weak_fraction, model.seed)
        weak = frozenset(n for i, n in enumerate(table.nodes) if choice is not None and choice.is_weak(i))
        predictions = {name: dict(zip(table.nodes, clf.predict_proba(table.values), strict=True))
                       for name, clf in model.classifiers.items()}  # fmt: skip
        return PeriodOutcome(index, table, choice, weak, predictions, model.learned_periods)


def _table_state(table: FeatureTable | None) -> dict[str, Any] | None:
    if table is None:
        return None
    return {"start": table.start_us, "sub_period": table.sub_period_us, "sub_periods": table.sub_periods,
            "nodes": list(table.nodes), "values": [list(v) for v in table.values], "counts": list(table.counts)}


def _table_from(state: dict[str, Any] | None) -> FeatureTable | None:
    if state is None:
        return None
    return FeatureTable(int(state["start"]), int(state["sub_period"]), int(state["sub_periods"]),
                        tuple(state["nodes"]), tuple(tuple(float(x) for x in v) for v in state["values"]),
                        tuple(int(c) for c in state["counts"]))
