"""The predictor protocol: task-level straggler predictors with separate ``predict`` and ``learn`` verbs.

A *method* (``PredictionMethod``) is built once per run or partition from a ``PredictionContext`` and
holds what spans jobs (a host's step times for Hawkeye, node evidence for node-aware features); it makes
one ``JobPredictor`` per job, which holds what a job's tasks taught it (SPEC 4 is per job). Every driver
(the evaluation library, the in-process runner, the ``predict_stragglers`` agent) moves them the same
way, with ``step``: at a checkpoint the job predictor predicts *before* it learns, as River's
progressive validation does, so no method can see the event it is judged on.

>>> from streams.core.events import TaskCheckpoint
>>> class Never:
...     method = "never"
...     def predict(self, event): return None
...     def learn(self, event): return None
>>> class NeverMethod:
...     name, uses_threshold = "never", False
...     def job(self, job_id, threshold): return Never()
...     def learn(self, event): return None
>>> method = NeverMethod()
>>> step(method, method.job("j", None), TaskCheckpoint("j", "t", 0, "n1", 5, 5, {}))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from streams.core.events import Event, StragglerPrediction, TaskCheckpoint
from streams.core.prediction.threshold import Threshold

if TYPE_CHECKING:
    from streams.core.ranking import Ranking


@dataclass
class ClusterView:
    """What the rest of laggard knows about nodes, for node-aware predictors: each node's current window
    mean z (its score in the ranking) and the current blacklist. Drivers update it as rankings come
    (``observe``); methods built for a context hold the same view, so they see every update.

    >>> from streams.core.ranking import NodeRank, Ranking
    >>> from streams.core.windows import NodeStats
    >>> view = ClusterView()
    >>> slow = NodeRank("n1", NodeStats("n1", 9, 1.8, 0.4, 1.5, 2.1), 1, True, True, "slow")
    >>> gone = NodeRank("n2", None, None, False, True, "listed, no sample in the window")
    >>> view.observe(Ranking(0, 60, "pcores", (slow, gone), cap=2))
    >>> view.node_mean_z, sorted(view.listed)
    ({'n1': 1.8}, ['n1', 'n2'])
    """

    node_mean_z: dict[str, float] = field(default_factory=dict)
    listed: frozenset[str] = frozenset()

    def observe(self, ranking: Ranking) -> None:
        """Take a new ranking's window: each ranked node's mean z (a node without samples in the window has
        none) and the nodes it lists. Updated in place: every holder of this view sees it."""
        self.node_mean_z.clear()
        self.node_mean_z.update((row.node_id, row.stats.mean) for row in ranking.nodes if row.stats is not None)
        self.listed = ranking.blacklist


@dataclass(frozen=True)
class PredictionContext:
    """Everything a method's factory may use. ``params`` holds method-specific hyperparameters by name
    (``nurd_alpha``, ``hawkeye_quantile``, ...): a method reads its own and ignores the rest."""

    initial_fraction: float = 0.04
    params: Mapping[str, float] = field(default_factory=dict)
    cluster: ClusterView = field(default_factory=ClusterView)
    seed: int = 0


class JobPredictor(Protocol):
    """One job's predictor."""

    method: str

    def predict(self, event: TaskCheckpoint) -> StragglerPrediction | None:
        """Flag this running task now, or not; a task is flagged at most once."""
        ...

    def learn(self, event: Event) -> None:
        """Update the job's state with any event of the job (start, checkpoint, finish, job end)."""
        ...


class PredictionMethod(Protocol):
    """A method: cluster-level state, and a job predictor per job."""

    name: str
    uses_threshold: bool  # decides against tau, so the oracle and online thresholds differ

    def job(self, job_id: str, threshold: Threshold) -> JobPredictor:
        """A fresh predictor for job ``job_id`` deciding against ``threshold``."""
        ...

    def learn(self, event: Event) -> None:
        """Cluster-level learning from every event of every job, after the job predictor learned it."""
        ...


@runtime_checkable
class StatefulMethod(Protocol):
    """A method whose cluster-level state must survive a restart: ``PredictorFleet`` saves ``snapshot()``
    (picklable plain data) beside its jobs and hands it to ``restore`` on the method built after a restart.
    Methods whose state is all per job (``PerJobMethod``) do not implement it."""

    def snapshot(self) -> object: ...

    def restore(self, state: object) -> None: ...


def step(method: PredictionMethod, job: JobPredictor, event: Event) -> StragglerPrediction | None:
    """Move one event through a method: predict before learning, then the job, then the cluster learn."""
    flag = job.predict(event) if isinstance(event, TaskCheckpoint) else None
    job.learn(event)
    method.learn(event)
    return flag
