"""A method whose state is all per job: today's predictors (Nurd, its batch form, the baselines).

Such a method keeps nothing across jobs: ``job`` builds a fresh job predictor around the threshold and
``learn`` has nothing to do. A method with cluster-level state (a host's step times, say) implements
``PredictionMethod`` itself instead.

>>> from streams.core.prediction.baselines import HadoopJob
>>> from streams.core.prediction.threshold import JobP90
>>> hadoop = PerJobMethod("hadoop", False, lambda threshold: HadoopJob())
>>> hadoop.job("j1", JobP90()).method, hadoop.uses_threshold
('hadoop', False)
"""

from __future__ import annotations

from collections.abc import Callable

from streams.core.events import Event
from streams.core.prediction.base import JobPredictor
from streams.core.prediction.threshold import Threshold


class PerJobMethod:
    """``name``, whether it decides against tau, and how to build one job's predictor from a threshold."""

    def __init__(self, name: str, uses_threshold: bool, build: Callable[[Threshold], JobPredictor]) -> None:
        self.name = name
        self.uses_threshold = uses_threshold
        self.build = build

    def job(self, job_id: str, threshold: Threshold) -> JobPredictor:
        """A fresh predictor for one job (the job's id does not matter to it)."""
        return self.build(threshold)

    def learn(self, event: Event) -> None:
        """Nothing spans jobs."""
        return None
