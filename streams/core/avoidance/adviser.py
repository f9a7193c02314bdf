"""The scheduler adviser (the paper's Algorithm 1): allow or avoid a node for a task, with the tree path in words.

``advise(node, task_type, snapshot)`` walks the task type's tree with the node's status at entry; a placement
whose expected z exceeds ``threshold`` is avoided. A node on the blacklist is avoided whatever the tree says
(the list is the ranking's verdict over an hour of evidence; the tree is a guess about the next task). A
task type with no tree yet is allowed: an adviser that knows nothing must not stop a scheduler.

``priority`` maps the same prediction to the 0-10 score of Kubernetes' scheduler extenders: 10 for a node
where the task is expected to run well below its job's mean, 0 at or beyond the threshold and for listed nodes.

>>> from streams.core.avoidance.status import NodeStatus
>>> from streams.core.avoidance.trees import CartTrees
>>> trees = CartTrees(max_depth=1, min_samples_leaf=1)
>>> trees.fit("map", [{"running": float(r)} for r in range(20)], [0.0] * 11 + [1.4] * 9)
>>> adviser = Adviser(trees, threshold=1.0)
>>> advice = adviser.advise("n7", "map", NodeStatus("n7", 0, running=14))
>>> advice.verdict, advice.reason
('avoid', 'running tasks 14 > 10.5: expected z +1.40 > +1.00')
>>> adviser.advise("n7", "map", NodeStatus("n7", 0, running=3)).reason
'running tasks 3 <= 10.5: expected z +0.00 <= +1.00'

Trees that learned the straggler label (``label="p"``, ``thresholds.relabel``) predict a probability:

>>> chance = CartTrees(max_depth=1, min_samples_leaf=1)
>>> chance.fit("map", [{"running": float(r)} for r in range(20)], [0.0] * 11 + [1.0] * 9)
>>> Adviser(chance, 0.3, label="p").advise("n7", "map", NodeStatus("n7", 0, running=14)).reason
'running tasks 14 > 10.5: straggling chance 1.00 > 0.30'
>>> Adviser(trees, 1.0, listed={"n7"}).advise("n7", "map", NodeStatus("n7", 0, running=3)).reason
'n7 is on the blacklist'

With a refusal budget (``streams.core.avoidance.budget``), ``place`` is one placement decision: a refusal
the budget cannot pay for is an allowance that says so (``settle`` does it for a scheduler's candidate nodes).

>>> from streams.core.avoidance.budget import RefusalBudget
>>> budgeted = Adviser(trees, 1.0, budget=RefusalBudget(share=0.5, window=10))
>>> [budgeted.place("n7", "map", NodeStatus("n7", ts, running=14)).verdict for ts in range(4)]
['avoid', 'allow', 'allow', 'avoid']
>>> budgeted.place("n7", "map", NodeStatus("n7", 4, running=14)).reason.partition(", but ")[2]
'budget spent: 2 of the last 5 placements refused (at most 50.0 % of the last 10 placements, or one)'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from streams.core.avoidance.budget import RefusalBudget
from streams.core.avoidance.calibration import CalibratedBudget
from streams.core.avoidance.features import describe, features
from streams.core.avoidance.status import NodeStatus
from streams.core.avoidance.trees import CartTrees, Split

Verdict = Literal["allow", "avoid"]
MAX_PRIORITY = 10  # Kubernetes' MaxExtenderPriority


@dataclass(frozen=True, slots=True)
class Advice:
    """One answer: the verdict, the expected z (None without a tree), the path, and all of it in words."""

    node_id: str
    task_type: str
    verdict: Verdict
    expected_z: float | None
    threshold: float
    path: tuple[Split, ...]
    listed: bool
    reason: str
    budget_spent: bool = False  # the tree would avoid the node, but the refusal budget was spent: allowed

    @property
    def allowed(self) -> bool:
        return self.verdict == "allow"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}".rstrip("0").rstrip(".")


def path_words(path: Collection[Split]) -> str:
    """``running tasks 14 > 11 and CPU requested 0.71 > 0.63``."""
    return " and ".join(
        f"{describe(s.feature)} {_number(s.value)} {s.op} {_number(round(s.threshold, 2))}" for s in path
    )


class Adviser:
    """Advice from per-type trees, a threshold on expected z, and the set of listed nodes (pluggable: any
    collection; the CLI reads a file adapter's blacklist file, a live adviser would follow the snapshots),
    and optionally a refusal budget that ``place`` and ``settle`` keep (listed nodes do not spend it: the
    blacklist has its own cap)."""

    def __init__(self, trees: CartTrees, threshold: float = 1.0, listed: Collection[str] = frozenset(),
                 thresholds: Mapping[str, float] | None = None,
                 budget: RefusalBudget | CalibratedBudget | None = None, label: str = "z") -> None:  # fmt: skip
        self.trees, self.threshold, self.listed, self.budget = trees, threshold, frozenset(listed), budget
        self.label = label  # what the trees predict: z in the job, or p (the chance of straggling)
        self.thresholds = dict(thresholds or {})  # per task type, chosen on tuning clusters; else ``threshold``

    def threshold_for(self, task_type: str) -> float:
        return self.thresholds.get(task_type, self.threshold)

    def advise(
        self,
        node_id: str,
        task_type: str,
        snapshot: NodeStatus,
        cpu_request: float | None = None,
        memory_request: float | None = None,
    ) -> Advice:
        """Allow or avoid ``node_id`` for a task of ``task_type``, given the node's ``snapshot`` at entry."""
        limit = self.threshold_for(task_type)
        if node_id in self.listed:
            return Advice(node_id, task_type, "avoid", None, limit, (), True, f"{node_id} is on the blacklist")
        x = features(snapshot, cpu_request, memory_request)
        expected = self.trees.predict_one(task_type, x)
        if expected is None:
            reason = f"no tree for task type {task_type!r} yet: allowed"
            return Advice(node_id, task_type, "allow", None, limit, (), False, reason)
        path = tuple(self.trees.path(task_type, x))
        avoid = expected > limit
        words = path_words(path) or "a tree with one leaf"
        if self.label == "p":
            reason = f"{words}: straggling chance {expected:.2f} {'>' if avoid else '<='} {limit:.2f}"
        else:
            reason = f"{words}: expected {self.label} {expected:+.2f} {'>' if avoid else '<='} {limit:+.2f}"
        return Advice(node_id, task_type, "avoid" if avoid else "allow", expected, limit, path, False, reason)

    def place(self, node_id: str, task_type: str, snapshot: NodeStatus, cpu_request: float | None = None,
              memory_request: float | None = None) -> Advice:  # fmt: skip
        """One placement decision at the snapshot's event time: ``advise``, then the budget (if any)."""
        advice = self.advise(node_id, task_type, snapshot, cpu_request, memory_request)
        return self.settle([advice], snapshot.ts_us)[0]

    def settle(self, advice: Sequence[Advice], at_us: int) -> list[Advice]:
        """One placement decision over a scheduler's candidate nodes at event time ``at_us``: it refuses when
        the trees avoid any candidate; when the budget cannot pay for that, those candidates are allowed,
        saying so. Without a budget the advice is returned as it is (and nothing is counted)."""
        if self.budget is None:
            return list(advice)
        if isinstance(self.budget, CalibratedBudget):
            return self._calibrated(advice, self.budget)
        wanted = any(not a.allowed and not a.listed for a in advice)
        if self.budget.decide(at_us, wanted) or not wanted:
            return list(advice)
        words = self.budget.words()
        return [dataclasses.replace(a, verdict="allow", budget_spent=True, reason=f"{a.reason}, but {words}")
                if not a.allowed and not a.listed else a for a in advice]  # fmt: skip

    def _calibrated(self, advice: Sequence[Advice], calibration: CalibratedBudget) -> list[Advice]:
        """The calibrated verdicts: a candidate is avoided when its expected value is above its type's
        threshold (a floor here) and ranks in the calibration's top share of recent requests; one token pays
        for the call. Every candidate's value then joins the calibration's window."""
        wanted = [not a.listed and calibration.wants(a.expected_z, a.threshold) for a in advice]
        paid = calibration.pay(any(wanted))
        settled = []
        for a, want in zip(advice, wanted, strict=True):
            if a.listed or a.expected_z is None:
                settled.append(a)
                continue
            words = f"{path_words(a.path) or 'a tree with one leaf'}: {self._value_words(a.expected_z)}, "
            words += calibration.words(a.expected_z).partition(" ")[2]
            if want and not paid:
                words += ", but no token left to refuse it"
            verdict: Verdict = "avoid" if want and paid else "allow"
            settled.append(dataclasses.replace(a, verdict=verdict, budget_spent=want and not paid, reason=words))
        for a in advice:
            calibration.observe(a.expected_z)
        return settled

    def _value_words(self, value: float) -> str:
        return f"straggling chance {value:.2f}" if self.label == "p" else f"expected {self.label} {value:+.2f}"

    def priority(self, advice: Advice) -> int:
        """0-10 for a scheduler extender's prioritize verb: higher is a better place for the task."""
        if advice.listed or (advice.expected_z is None and not advice.allowed):
            return 0
        if advice.expected_z is None:
            return MAX_PRIORITY // 2
        if isinstance(self.budget, CalibratedBudget):  # its rank among recent requests: the top 1 % -> 0
            return int(min(MAX_PRIORITY, round(MAX_PRIORITY * self.budget.top_share(advice.expected_z))))
        scale = max(abs(advice.threshold), 1e-9)
        if self.label == "p":  # a chance of straggling: 0 -> 10, the threshold -> 0 (5 was the best a node could get)
            score = MAX_PRIORITY * (1.0 - advice.expected_z / scale)
        else:  # expected z = threshold -> 0, z = 0 (the job's mean) -> 5, z = -threshold -> 10
            score = MAX_PRIORITY / 2 * (1.0 - advice.expected_z / scale)
        return int(min(MAX_PRIORITY, max(0, round(score))))


def advise(
    node_id: str, task_type: str, snapshot: NodeStatus, trees: CartTrees, threshold: float = 1.0,
    listed: Collection[str] = frozenset(),
) -> Advice:  # fmt: skip
    """The paper's ``ADVISER(trees, snapshot, threshold, node, type)`` as one call."""
    return Adviser(trees, threshold, listed).advise(node_id, task_type, snapshot)
