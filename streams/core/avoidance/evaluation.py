"""Would the adviser have avoided stragglers, at what cost in refused placements, and would jobs end sooner?

One pass over a trace (``collect_samples``) records every successful task's features at entry and, once its
job is final, its z. Predictions are then made without looking ahead:

* ``prequential_cart``: CART per type refit every ``period_us`` on the placements labelled by then, used for
  the placements of the next period (the paper's periodic rebuild);
* ``prequential_hoeffding``: River's tree predicts at each entry and learns each label when it becomes known;
* ``split_predictions``: both learn on the placements of the first hours (labelled by then) and score the rest.

``assess`` refuses the scored placements whose expected z exceeds the threshold and reports the share of
stragglers refused (the paper's definition: a duration at least ``ratio`` times its job's median,
``stragglers_by_median``; or z >= 1, ``stragglers_by_z``, which marks about a tenth of every job, healthy or
not), the share of placements refused, and the job time saved when a
refused task is re-placed as ``laggard run`` re-places tasks of listed nodes
(``streams.core.evaluation.avoidance``: a duration drawn from the job's tasks that were not moved), against
a null baseline that refuses as many random placements of the same jobs. Open loop: a re-placed task does not
load its new node, and refused load does not leave its old one.

>>> from streams.core.events import JobFinish, Status, TaskFinish, TaskStart
>>> events = [TaskStart("j", str(i), 0, f"n{i % 2}", 10 + i) for i in range(4)]
>>> events += [TaskFinish("j", str(i), 0, f"n{i % 2}", 100 + 50 * (i % 2), 90 + 50 * (i % 2) - i,
...                       Status.SUCCEEDED) for i in range(4)]
>>> samples = collect_samples(sorted(events, key=lambda e: e.ts_us) + [JobFinish("j", 200)])
>>> [(s.node_id, round(s.z, 2), s.x["running"]) for s in samples]
[('n0', -0.96, 0.0), ('n0', -1.04, 1.0), ('n1', 1.04, 0.0), ('n1', 0.96, 1.0)]
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from streams.core.avoidance.budget import Budget, refusals
from streams.core.avoidance.calibration import CalibratedBudget
from streams.core.avoidance.features import FEATURES, features, task_type_of
from streams.core.avoidance.status import NodeStatusTracker
from streams.core.avoidance.trees import CartTrees, HoeffdingTrees, Matrix, Metrics, regression_metrics
from streams.core.evaluation.avoidance import Placement, _redraw  # the re-placement of `laggard run`
from streams.core.events import Event, NormalizedTask, TaskFinish, TaskStart
from streams.core.zscore import JobNormalizer

Predictions = list[float | None]


@dataclass(frozen=True, slots=True)
class Sample:
    """One successful task: where and when it entered, its features then, and its z (known at ``label_us``)."""

    job_id: str
    task_id: str
    node_id: str
    task_type: str
    start_us: int
    duration_us: int
    label_us: int
    z: float
    x: Mapping[str, float]


def collect_samples(
    events: Iterable[Event], job_idle_timeout_us: int = 3_600_000_000, tracker: NodeStatusTracker | None = None
) -> list[Sample]:
    """Replay ``events`` (event-time order) through the status tracker and the job normaliser; pass a
    ``tracker`` to keep the nodes' status at the trace's end."""
    tracker = NodeStatusTracker() if tracker is None else tracker
    normalizer = JobNormalizer(job_idle_timeout_us)
    pending: dict[tuple[str, str, int], tuple[str, dict[str, float]]] = {}
    samples: list[Sample] = []
    last_us = 0

    def label(found: list[NormalizedTask], at_us: int) -> None:
        for sample in found:
            tracker.observe(sample, at_us)
            entry = pending.pop((sample.job_id, sample.task_id, sample.attempt), None)
            if entry is not None:
                samples.append(Sample(sample.job_id, sample.task_id, sample.node_id, entry[0],
                                      sample.ts_us - sample.duration_us, sample.duration_us, at_us, sample.z,
                                      entry[1]))  # fmt: skip

    for event in events:
        last_us = max(last_us, event.ts_us)
        if isinstance(event, TaskStart):
            kind = task_type_of(event.task_type, event.scheduling_class, event.priority)
            status = tracker.status(event.node_id, event.ts_us, kind)
            pending[(event.job_id, event.task_id, event.attempt)] = (
                kind, features(status, event.cpu_request, event.memory_request))
        tracker.update(event)
        if isinstance(event, TaskFinish) and not event.succeeded:
            pending.pop((event.job_id, event.task_id, event.attempt), None)
        label(normalizer.update(event), event.ts_us)
    label(normalizer.flush(), last_us)
    return samples


def _matrix(samples: Sequence[Sample]) -> Matrix:
    return np.array([[s.x[name] for name in FEATURES] for s in samples], dtype=np.float64).reshape(-1, len(FEATURES))


def prequential_cart(
    samples: Sequence[Sample], period_us: int, trees: CartTrees, min_train: int = 200, max_train: int = 20_000
) -> Predictions:
    """Expected z of each sample from CART refit at the start of its period on what was labelled by then
    (the latest ``max_train`` labels of its type); None while its type has fewer than ``min_train``."""
    if not samples:
        return []
    matrix, z = _matrix(samples), np.array([s.z for s in samples])
    by_label = sorted(range(len(samples)), key=lambda i: samples[i].label_us)
    learned: dict[str, list[int]] = {}
    predictions: Predictions = [None] * len(samples)
    order = sorted(range(len(samples)), key=lambda i: samples[i].start_us)
    cursor, k = 0, 0
    start = samples[order[0]].start_us
    while k < len(order):
        period_end = start + period_us
        while cursor < len(by_label) and samples[by_label[cursor]].label_us <= start:
            index = by_label[cursor]
            learned.setdefault(samples[index].task_type, []).append(index)
            cursor += 1
        for kind, indices in learned.items():
            if len(indices) >= min_train:
                rows = indices[-max_train:]
                trees.fit_array(kind, matrix[rows], z[rows])
        batch: dict[str, list[int]] = {}
        while k < len(order) and samples[order[k]].start_us < period_end:
            batch.setdefault(samples[order[k]].task_type, []).append(order[k])
            k += 1
        for kind, indices in batch.items():
            values = trees.predict_array(kind, matrix[indices])
            if values is not None:
                for index, value in zip(indices, values, strict=True):
                    predictions[index] = value
        start = period_end
    return predictions


def prequential_hoeffding(samples: Sequence[Sample], trees: HoeffdingTrees) -> Predictions:
    """Expected z of each sample at its entry; each label is learned when it becomes known (labels first at a tie)."""
    steps = [(s.start_us, 1, i) for i, s in enumerate(samples)] + [(s.label_us, 0, i) for i, s in enumerate(samples)]
    predictions: Predictions = [None] * len(samples)
    for _, kind, index in sorted(steps):
        sample = samples[index]
        if kind == 1:
            predictions[index] = trees.predict_one(sample.task_type, sample.x)
        else:
            trees.learn_one(sample.task_type, sample.x, sample.z)
    return predictions


def split_predictions(
    samples: Sequence[Sample], learn_until_us: int, cart: CartTrees, hoeffding: HoeffdingTrees | None
) -> tuple[list[int], Predictions, Predictions]:
    """Learn on the samples that entered and were labelled before ``learn_until_us``; predict those entering
    after. Returns the scored indices and the CART and Hoeffding predictions for them."""
    train = [i for i, s in enumerate(samples) if s.label_us <= learn_until_us]
    test = [i for i, s in enumerate(samples) if s.start_us >= learn_until_us]
    matrix, z = _matrix(samples), np.array([s.z for s in samples])
    for kind in sorted({samples[i].task_type for i in train}):
        rows = [i for i in train if samples[i].task_type == kind]
        cart.fit_array(kind, matrix[rows], z[rows])
    if hoeffding is not None:
        for i in sorted(train, key=lambda i: samples[i].label_us):
            hoeffding.learn_one(samples[i].task_type, samples[i].x, samples[i].z)
    cart_pred: Predictions = [cart.predict_one(samples[i].task_type, samples[i].x) for i in test]
    hoeff_pred: Predictions = [
        hoeffding.predict_one(samples[i].task_type, samples[i].x) if hoeffding else None for i in test
    ]
    return test, cart_pred, hoeff_pred


def metrics_by_type(
    samples: Sequence[Sample], indices: Sequence[int], predictions: Predictions
) -> dict[str, Metrics]:
    """The paper's metrics per task type (and ``all``) over the samples that have a prediction."""
    groups: dict[str, tuple[list[float], list[float]]] = {}
    for index, value in zip(indices, predictions, strict=True):
        if value is None:
            continue
        for key in (samples[index].task_type, "all"):
            truth, predicted = groups.setdefault(key, ([], []))
            truth.append(samples[index].z)
            predicted.append(value)
    return {key: regression_metrics(*groups[key]) for key in sorted(groups)}


def choose_threshold(predictions: Iterable[float | None], budget: float, floor: float = 0.0) -> float:
    """The smallest threshold (at least ``floor``) that refuses at most ``budget`` of these placements.

    >>> choose_threshold([0.0, 0.5, 1.2, 2.0, None], budget=0.25)
    1.2
    """
    items = list(predictions)
    values = sorted(v for v in items if v is not None)
    total = len(items)  # a placement with no prediction is never refused, but it is a placement
    for candidate in sorted(set(values)):
        if candidate >= floor and sum(1 for v in values if v > candidate) <= budget * total:
            return candidate
    return max([floor, *values])


@dataclass(frozen=True, slots=True)
class AdviceScore:
    """The adviser on the scored placements of a trace, beside the null baseline."""

    threshold: float | Mapping[str, float]
    placements: int
    refused: int
    stragglers: int
    avoided: int  # stragglers among the refused
    null_avoided: float  # the same for as many random refusals in the same jobs (mean over repeats)
    jobs_touched: int
    jct_reduction: float | None  # mean over the touched jobs
    null_reduction: float | None

    @property
    def refused_share(self) -> float:
        return self.refused / self.placements if self.placements else math.nan

    @property
    def avoided_share(self) -> float:
        return self.avoided / self.stragglers if self.stragglers else math.nan

    @property
    def null_avoided_share(self) -> float:
        return self.null_avoided / self.stragglers if self.stragglers else math.nan


def stragglers_by_median(samples: Sequence[Sample], ratio: float = 1.5) -> list[bool]:
    """The paper's stragglers: tasks taking at least ``ratio`` times their job's median duration."""
    durations: dict[str, list[int]] = {}
    for sample in samples:
        durations.setdefault(sample.job_id, []).append(sample.duration_us)
    median = {job: float(np.median(values)) for job, values in durations.items()}
    return [s.duration_us >= ratio * median[s.job_id] for s in samples]


def stragglers_by_z(samples: Sequence[Sample], z: float = 1.0) -> list[bool]:
    """Tasks at least ``z`` job standard deviations above their job's mean."""
    return [s.z >= z for s in samples]


def assess(
    samples: Sequence[Sample], predictions: Predictions, threshold: float | Mapping[str, float],
    scored: Sequence[bool], straggler: Sequence[bool], repeats: int = 5, seed: int = 0,
    budget: Budget | None = None,
) -> AdviceScore:  # fmt: skip
    """Refuse every scored placement whose expected z exceeds ``threshold`` (one, or one per task type: a type
    without one is never refused) while ``budget`` (if any) pays for it, placements taken in entry order;
    score it beside random refusals. A ``CalibratedBudget`` first observes the
    requests of the unscored (learning) placements, and earns their tokens, as a live adviser would."""
    limits = threshold if isinstance(threshold, Mapping) else {s.task_type: threshold for s in samples}
    keep = [i for i, on in enumerate(scored) if on]
    if isinstance(budget, CalibratedBudget):  # it ranks against the learning hours' requests too
        for index in sorted((i for i, on in enumerate(scored) if not on), key=lambda i: samples[i].start_us):
            budget.observe(predictions[index], earn=True)
    chosen = refusals([predictions[i] for i in keep], [samples[i].task_type for i in keep],
                      [samples[i].start_us for i in keep], limits, budget)  # fmt: skip
    refuse = [False] * len(samples)
    for index, refused in zip(keep, chosen, strict=True):
        refuse[index] = refused
    jobs: dict[str, list[int]] = {}
    for index, sample in enumerate(samples):
        jobs.setdefault(sample.job_id, []).append(index)
    cuts: list[float] = []
    nulls: list[float] = []
    null_avoided = 0.0
    for job_id, indices in sorted(jobs.items()):
        flags = [refuse[i] for i in indices]
        count = sum(flags)
        if not count or count == len(indices):
            continue
        placements = [Placement(samples[i].node_id, samples[i].start_us / 1e6, samples[i].duration_us / 1e6)
                      for i in indices]  # fmt: skip
        candidates = [k for k, i in enumerate(indices) if scored[i]]
        cut = null = 0.0
        for r in range(repeats):
            rng = random.Random(f"{seed}/{job_id}/{r}")
            cut += _redraw(placements, flags, rng.choice).reduction
            picked = set(rng.sample(candidates, count))
            null += _redraw(placements, [k in picked for k in range(len(indices))], rng.choice).reduction
            null_avoided += sum(straggler[indices[k]] for k in picked) / repeats
        cuts.append(cut / repeats)
        nulls.append(null / repeats)
    return AdviceScore(
        threshold=threshold, placements=sum(scored), refused=sum(refuse),
        stragglers=sum(1 for on, s in zip(scored, straggler, strict=True) if on and s),
        avoided=sum(1 for r, s in zip(refuse, straggler, strict=True) if r and s), null_avoided=null_avoided,
        jobs_touched=len(cuts), jct_reduction=sum(cuts) / len(cuts) if cuts else None,
        null_reduction=sum(nulls) / len(nulls) if nulls else None,
    )  # fmt: skip


def hindsight_ceilings(predictions: Predictions, scored: Sequence[bool], straggler: Sequence[bool],
                       share: float = 0.10) -> tuple[float, float]:  # fmt: skip
    """What refusing ``share`` of the scored placements could avoid, knowing the whole run: (an oracle that
    refuses stragglers first, the trees' own top ``share`` of predictions -- ties at the boundary drawn
    evenly). The first bounds any adviser, the second any calibration of these trees' predictions.

    >>> hindsight_ceilings([0.9, 0.5, 0.5, 0.1], [True] * 4, [True, True, False, False], share=0.5)
    (1.0, 0.75)
    """
    rows = [(-math.inf if p is None else p, s) for p, on, s in zip(predictions, scored, straggler, strict=True) if on]
    stragglers = sum(s for _, s in rows)
    if not stragglers:
        return math.nan, math.nan
    k = int(share * len(rows))
    values = sorted((v for v, _ in rows), reverse=True)
    if k == 0:
        return 0.0, 0.0
    edge = values[k - 1]
    above = [s for v, s in rows if v > edge]
    tied = [s for v, s in rows if v == edge]
    trees = sum(above) + (k - len(above)) * sum(tied) / len(tied)
    return min(1.0, k / stragglers), trees / stragglers
