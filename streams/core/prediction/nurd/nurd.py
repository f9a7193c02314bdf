"""Nurd on River: online negative-unlabeled straggler prediction for one job (SPEC 4).

Per checkpoint of a running task: y_hat = h(x) from a River regressor trained on finished tasks'
last vectors and true durations; z = g(x) = P(finished | x) from a River logistic regression of
finished (1) against running (0) vectors; w = max(eps, min(z + delta, 1)) with delta fixed at the job's
first prediction; flag once when y_hat / w >= tau. ``weighting`` selects the variants reported beside
it: "calibrated" (nurd), "propensity" (nurd-nc, w = z) and "none" (supervised, w = 1).

Model choice, measured on the four jobs of google2011-nurd-timeseries (oracle tau, mean over the jobs).

* h is chosen by its own accuracy, not by anyone's F1: the mean absolute error of its log-latency
  prediction at every scored checkpoint of a task, against the task's true latency known later
  (prequential; the criterion every variant shares). StandardScaler | KNNRegressor(5) over a sliding
  window of the 50 latest finished tasks (River's LazySearch), inside a TargetStandardScaler on log
  seconds: 0.265. The same with a 20 / 30 / 100 / 200 / 1000 window: 0.32 / 0.27 / 0.29 / 0.31 / 0.36 (the
  latest finishers describe the tasks still running best: a job's later tasks run longer); k = 3 / 10:
  0.26 / 0.31; without the target scaler 0.32 (its running mean lifts old neighbours' targets as the
  job's latencies drift up); log-scaled features change nothing (0.266). Linear models diverge:
  StandardScaler | LinearRegression at SGD lr 0.003 (this module's first h) errs by 31 on average, and
  by 120 on job 6266469130: an online StandardScaler meets a feature whose variance was ~0 so far
  (eviction counts), the standardised value explodes and so does exp(prediction). At lr 0.001 with a
  target scaler it stays sane (0.38) but one step away from the cliff. HoeffdingAdaptiveTree 0.55.
* g: StandardScaler | LogisticRegression, SGD lr 0.01, trained on the usage features plus log(1 +
  elapsed seconds), which is observed at the checkpoint. Class balance: each running checkpoint (label
  0) is followed by one replayed finished vector (label 1), unit steps. Variants measured by nurd's F1
  with the h above, all within 0.03 of each other: log-scaled and clipped features, lr 0.05, a KNN
  classifier, no elapsed time; weighting the rare positive or not balancing at all did worse.
* What the reweighting is worth here (mean F1, alpha = 0): nurd 0.46, nurd-nc 0.28, supervised (h
  alone) 0.75; alpha = 0.5: nurd 0.41. The reweighting inflates every running task: g scores typical
  non-stragglers ~0.35 (z of stragglers 0.10-0.33), so y_hat / w is about 3 y_hat for most tasks and
  false positives follow. Checkpoint-level ROC AUC of 1 - z for "will straggle": 0.52-0.79. The better h
  is, the more the reweighting costs; with the divergent linear h above, its wild predictions made
  supervised look weak (0.53) and nurd close to it (0.51). Nurd's published gains used features
  weighted by the final latency (a leak this code does not repeat) and a boosted-tree h.
* Where the gap comes from: nurd flags a superset of supervised's tasks (w <= 1, same h), so it can only
  win when its extra flags are right often enough (precision > F1 / (2 - F1) = 0.6 of supervised's);
  they are right 4 % of the time. Raising epsilon far above the paper's "small" value lifts nurd to
  0.78 (epsilon 0.9), but a constant w = 0.9 with no propensity at all scores 0.79: that gain is a
  uniform 11 % inflation of y_hat (the neighbours' mean under-predicts the tail), not the reweighting.
  Recent-only positives in g (20 / 50 / 200) and g without elapsed time change nothing (0.455-0.457).

>>> from streams.core.events import JobStart, TaskCheckpoint, TaskFinish, Status
>>> from streams.core.prediction.threshold import Oracle
>>> job = NurdJob(Oracle(tau_s=0.5), initial_fraction=0.5)
>>> job.learn(JobStart("j", 0, declared_tasks=2))
>>> fast = TaskCheckpoint("j", "fast", 0, "n1", 10_000_000, 10_000_000, {"cpu": 0.1})
>>> job.predict(fast) is None  # nothing finished yet
True
>>> job.learn(fast)
>>> job.learn(TaskFinish("j", "fast", 0, "n1", 10_000_000, 10_000_000, Status.SUCCEEDED))
>>> flag = job.predict(TaskCheckpoint("j", "slow", 0, "n2", 20_000_000, 20_000_000, {"cpu": 0.9}))
>>> (flag.task_id, flag.method, flag.adjusted_us >= flag.threshold_us == 500_000)
('slow', 'nurd', True)
>>> job.delta is not None  # fixed at the job's first prediction
True
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Any, Literal, cast

from river import base, compose, linear_model, neighbors, optim, preprocessing

from streams.core.events import Event, StragglerPrediction, TaskCheckpoint, TaskFinish
from streams.core.prediction.nurd.calibration import delta_at_first_prediction, weight
from streams.core.prediction.tasks import JobTasks
from streams.core.prediction.threshold import Threshold

Vector = dict[Hashable, Any]  # River's feature dicts
Weighting = Literal["calibrated", "propensity", "none"]
_METHOD_NAMES: dict[str, str] = {"calibrated": "nurd", "propensity": "nurd-nc", "none": "supervised"}


def default_regressor(window: int = 50, target_scaler: bool = True) -> base.Regressor:
    """The latency model h: log(duration) from the 5 nearest of the ``window`` latest finished tasks (see
    above), inside a TargetStandardScaler unless ``target_scaler`` is False."""
    knn = neighbors.KNNRegressor(n_neighbors=5, engine=neighbors.LazySearch(window_size=window))
    scaled = cast(base.Regressor, preprocessing.StandardScaler() | knn)  # a Pipeline ending in a regressor is one
    return preprocessing.TargetStandardScaler(regressor=scaled) if target_scaler else scaled


def default_propensity(lr: float = 0.01) -> compose.Pipeline:
    """The propensity model g: standardised features, logistic regression (SGD at ``lr``)."""
    return preprocessing.StandardScaler() | linear_model.LogisticRegression(optimizer=optim.SGD(lr))


class NurdJob:
    """Nurd's per-job state; drive it with ``step`` (predict, then learn) on every event of one job, in time order.

    ``predict`` reads h and g as they are and records what a prediction decides (the task's flag, delta at
    the job's first prediction, the task's latency estimate for an online threshold); the checkpoint's vector
    is its input, seen by both verbs. ``learn`` trains g on the running vector and h and g on finished ones.

    Hyperparameters: ``threshold`` (tau), ``regressor`` and ``propensity`` (River models, cloned),
    ``alpha`` and ``epsilon`` (calibration), ``initial_fraction`` (share of tasks that must finish first),
    ``weighting`` (the variant), ``log_target`` (h learns log seconds), ``balance`` (finished vectors
    weigh running checkpoints / finished tasks in g, so g sees both classes as the batch method does).
    """

    def __init__(
        self,
        threshold: Threshold,
        regressor: base.Regressor | compose.Pipeline | None = None,
        propensity: base.Classifier | compose.Pipeline | None = None,
        alpha: float = 0.5,
        epsilon: float = 0.05,
        initial_fraction: float = 0.04,
        weighting: Weighting = "calibrated",
        log_target: bool = True,
        balance: Literal["replay", "weight", "none"] = "replay",
        elapsed: Literal["none", "propensity", "both"] = "propensity",
    ) -> None:
        self.threshold = threshold
        self.regressor = regressor
        self.propensity = propensity
        self.alpha = alpha
        self.epsilon = epsilon
        self.initial_fraction = initial_fraction
        self.weighting = weighting
        self.log_target = log_target
        self.balance = balance
        self.elapsed = elapsed
        self.method = _METHOD_NAMES[weighting]
        # learned state
        # Built on first use: most jobs of a trace without checkpoints never need them, and building River
        # pipelines (clone, signature inspection) was a fifth of a Kafka worker's time on Google 2011.
        self._models: tuple[Any, Any] | None = None
        self.tasks = JobTasks(initial_fraction=initial_fraction)
        self.rho: float | None = None
        self.delta: float | None = None
        self.flagged: set[str] = set()
        self._negatives = 0
        self._positives: list[Vector] = []
        self._last: dict[str, tuple[Vector, Vector]] = {}

    @property
    def _h(self) -> Any:
        return self._built()[0]

    @property
    def _g(self) -> Any:
        return self._built()[1]

    def _built(self) -> tuple[Any, Any]:
        if self._models is None:
            self._models = ((self.regressor or default_regressor()).clone(),
                            (self.propensity or default_propensity()).clone())  # fmt: skip
        return self._models

    def predict(self, event: TaskCheckpoint) -> StragglerPrediction | None:
        """Flag ``event``'s task now (once), from h and g as they are before this checkpoint is learned."""
        self.tasks.update(event)  # x of this checkpoint, as learn records it (idempotent)
        if not self.tasks.complete(event.features) or not self.tasks.ready or event.task_id in self.flagged:
            return None
        flag = self._predict(event, *self._vectors(event))
        if flag is not None:
            self.flagged.add(event.task_id)
        return flag

    def learn(self, event: Event) -> None:
        """Learn from any event of the job: finished tasks train h and g, running checkpoints train g."""
        self.tasks.update(event)
        if isinstance(event, TaskFinish):
            last = self._last.pop(event.task_id, None)
            if event.succeeded and last is not None:
                self._learn_finished(event, *last)
            elif event.succeeded:
                self.threshold.estimate(event.task_id, event.duration_us / 1e6)
            return
        if not isinstance(event, TaskCheckpoint) or not self.tasks.complete(event.features):
            return
        _, xg = self._last[event.task_id] = self._vectors(event)
        self._g.learn_one(xg, False)
        self._negatives += 1
        if self.balance == "replay" and self._positives:
            # one finished vector per running one: balanced classes with unit steps (see class doc)
            self._g.learn_one(self._positives[self._negatives % len(self._positives)], True)

    def _vectors(self, event: TaskCheckpoint) -> tuple[Vector, Vector]:
        x: Vector = {name: value for name, value in event.features.items()}
        timed: Vector = dict(x)
        timed["log_elapsed_s"] = math.log1p(event.elapsed_us / 1e6)
        return (timed if self.elapsed == "both" else x), (x if self.elapsed == "none" else timed)

    def predict_latency(self, x: Vector) -> float:
        """h(x) in seconds (not adjusted)."""
        raw = float(self._h.predict_one(x))
        return math.exp(min(raw, 50.0)) if self.log_target else max(raw, 0.0)

    def propensity_score(self, x: Vector) -> float:
        """z = g(x) = P(finished | x)."""
        return float(self._g.predict_proba_one(x).get(True, 0.0))

    def _learn_finished(self, event: TaskFinish, xh: Vector, xg: Vector) -> None:
        seconds = event.duration_us / 1e6
        self._h.learn_one(xh, math.log(max(seconds, 1e-3)) if self.log_target else seconds)
        self._positives.append(xg)
        w = max(1.0, self._negatives / len(self._positives)) if self.balance == "weight" else 1.0
        self._g.learn_one(xg, True, w=w)
        self.threshold.estimate(event.task_id, seconds)

    def _weight(self, xg: Vector) -> float:
        if self.weighting == "none":
            return 1.0
        z = self.propensity_score(xg)
        if self.weighting == "propensity":
            return max(z, 1e-9)
        if self.delta is None:
            self.rho, self.delta = delta_at_first_prediction(*self.tasks.complete_vectors(), self.alpha)
        return weight(z, self.delta, self.epsilon)

    def _predict(self, event: TaskCheckpoint, xh: Vector, xg: Vector) -> StragglerPrediction | None:
        predicted = self.predict_latency(xh)
        w = self._weight(xg)
        adjusted = predicted / w
        self.threshold.estimate(event.task_id, max(adjusted, event.elapsed_us / 1e6))
        tau = self.threshold.value()
        if tau is None or adjusted < tau:
            return None
        return StragglerPrediction(
            event.job_id, event.task_id, event.attempt, event.node_id, event.ts_us, event.elapsed_us,
            predicted_us=predicted * 1e6, adjusted_us=adjusted * 1e6, threshold_us=tau * 1e6,
            weight=w, method=self.method,
        )  # fmt: skip
