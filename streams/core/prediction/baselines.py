"""Baselines that share Nurd's ``predict``/``learn`` verbs (``streams.core.prediction.base``; SPEC 4).

* ``SpeculationJob``: Spark's speculation rule: once a quantile q of the job's tasks finished, flag a
  running task whose elapsed time exceeds multiplier x the median finished duration.
* ``HadoopJob``: once 5 % finished, flag a running task whose elapsed time exceeds mean + k std of the
  finished durations (Hadoop's LATE-style rule).
* ``OutlierJob``: River HalfSpaceTrees on checkpoint features; flag when a task's anomaly score is in
  the top tenth of the scores seen in the job so far. It never looks at latency, which is the point:
  stragglers are outliers in latency, not necessarily in feature space.

These decide on elapsed time or features only, never on tau: the oracle threshold does not apply; except
``ElapsedTauJob``, a reference rather than a predictor: flag a running task once its elapsed time passes tau.
Under the oracle protocol it shows what knowing tau and elapsed time alone is worth, the yardstick for every
method that decides against tau.

Each job predictor flags a task at most once. A checkpoint's elapsed time and features are its input x:
``predict`` records them (idempotently, so ``learn`` on the same event changes nothing more); what is
learned from labels (durations of finished tasks, the anomaly model) moves only in ``learn``.

>>> from streams.core.events import JobStart, TaskCheckpoint, TaskFinish, Status
>>> spark = SpeculationJob(quantile=0.5, multiplier=1.5)
>>> spark.learn(JobStart("j", 0, declared_tasks=2))
>>> spark.learn(TaskFinish("j", "a", 0, "n1", 10_000_000, 10_000_000, Status.SUCCEEDED))
>>> spark.predict(TaskCheckpoint("j", "b", 0, "n2", 16_000_000, 16_000_000, {})).task_id
'b'
"""

from __future__ import annotations

import statistics

from river import anomaly, preprocessing, stats

from streams.core.events import Event, StragglerPrediction, TaskCheckpoint, TaskFinish
from streams.core.prediction.tasks import JobTasks
from streams.core.prediction.threshold import Threshold


def _flag(event: TaskCheckpoint, method: str, limit_s: float, score: float | None = None) -> StragglerPrediction:
    elapsed = float(event.elapsed_us)
    value = elapsed if score is None else score
    return StragglerPrediction(
        event.job_id, event.task_id, event.attempt, event.node_id, event.ts_us, event.elapsed_us,
        predicted_us=value, adjusted_us=value, threshold_us=limit_s * 1e6 if score is None else limit_s,
        weight=1.0, method=method,
    )  # fmt: skip


class _ElapsedRule:
    """Flag a running task once its elapsed time passes ``limit()``; each task once."""

    method = "elapsed"

    def __init__(self, start_fraction: float) -> None:
        self.tasks = JobTasks(initial_fraction=start_fraction)
        self.flagged: set[str] = set()

    def limit(self) -> float:
        raise NotImplementedError

    def predict(self, event: TaskCheckpoint) -> StragglerPrediction | None:
        self.learn(event)  # a checkpoint teaches a rule nothing but its elapsed time, x itself
        if event.task_id in self.flagged or not self.tasks.ready:
            return None
        limit = self.limit()
        if event.elapsed_us / 1e6 <= limit:
            return None
        self.flagged.add(event.task_id)
        return _flag(event, self.method, limit)

    def learn(self, event: Event) -> None:
        self.tasks.update(event)


class ElapsedTauJob(_ElapsedRule):
    """Flag a running task once its elapsed time passes tau (the threshold object: oracle or online).

    >>> from streams.core.events import JobStart, Status
    >>> from streams.core.prediction.threshold import Oracle
    >>> rule = ElapsedTauJob(Oracle(12.0), start_fraction=0.5)
    >>> rule.learn(JobStart("j", 0, declared_tasks=2))
    >>> rule.learn(TaskFinish("j", "b", 0, "n2", 5_000_000, 5_000_000, Status.SUCCEEDED))
    >>> rule.predict(TaskCheckpoint("j", "a", 0, "n1", 10_000_000, 10_000_000, {})) is None
    True
    >>> rule.predict(TaskCheckpoint("j", "a", 0, "n1", 13_000_000, 13_000_000, {})).task_id
    'a'
    """

    method = "elapsed-tau"

    def __init__(self, threshold: Threshold, start_fraction: float = 0.04) -> None:
        super().__init__(start_fraction)
        self.threshold = threshold

    def learn(self, event: Event) -> None:
        if isinstance(event, TaskFinish) and event.succeeded:
            self.threshold.estimate(event.task_id, event.duration_us / 1e6)
        elif isinstance(event, TaskCheckpoint):  # the latest estimate per task: idempotent
            self.threshold.estimate(event.task_id, event.elapsed_us / 1e6)
        super().learn(event)

    def limit(self) -> float:
        tau = self.threshold.value()
        return float("inf") if tau is None else tau


class SpeculationJob(_ElapsedRule):
    """Spark speculation: after ``quantile`` of tasks finished, elapsed > ``multiplier`` x median."""

    def __init__(self, quantile: float = 0.75, multiplier: float = 1.5) -> None:
        super().__init__(start_fraction=quantile)
        self.quantile = quantile
        self.multiplier = multiplier
        self.method = f"spark-q{quantile:g}-m{multiplier:g}"

    def limit(self) -> float:
        return self.multiplier * statistics.median(self.tasks.durations_s)


class HadoopJob(_ElapsedRule):
    """Hadoop: after ``start_fraction`` finished, elapsed > mean + ``k`` x std of finished durations."""

    method = "hadoop"

    def __init__(self, start_fraction: float = 0.05, k: float = 1.0) -> None:
        super().__init__(start_fraction=start_fraction)
        self.start_fraction = start_fraction
        self.k = k

    def limit(self) -> float:
        durations = self.tasks.durations_s
        return statistics.fmean(durations) + self.k * statistics.pstdev(durations)


class OutlierJob:
    """HalfSpaceTrees on min-max scaled checkpoint features; flag scores in the job's running top tenth."""

    method = "hst"

    def __init__(self, quantile: float = 0.9, initial_fraction: float = 0.04, seed: int = 42) -> None:
        self.quantile = quantile
        self.initial_fraction = initial_fraction
        self.seed = seed
        self._model = preprocessing.MinMaxScaler() | anomaly.HalfSpaceTrees(seed=seed)
        self._scores = stats.Quantile(quantile)
        self.tasks = JobTasks(initial_fraction=initial_fraction)
        self.flagged: set[str] = set()
        self._scored: TaskCheckpoint | None = None  # the checkpoint whose score joined the quantile last

    def predict(self, event: TaskCheckpoint) -> StragglerPrediction | None:
        self.tasks.update(event)
        if not self.tasks.complete(event.features):
            return None
        score = self._score(event)  # the job's top tenth includes this score, as the quantile of the job so far
        if event.task_id in self.flagged or not self.tasks.ready:
            return None
        limit = self._scores.get()
        if limit is None or score <= limit:
            return None
        self.flagged.add(event.task_id)
        return _flag(event, self.method, float(limit), score=score)

    def learn(self, event: Event) -> None:
        self.tasks.update(event)
        if not isinstance(event, TaskCheckpoint) or not self.tasks.complete(event.features):
            return
        if self._scored is not event:  # not predicted first: score it before the model learns it
            self._score(event)
        self._model.learn_one(dict(event.features))

    def _score(self, event: TaskCheckpoint) -> float:
        score = float(self._model.score_one(dict(event.features)))
        self._scores.update(score)
        self._scored = event
        return score
