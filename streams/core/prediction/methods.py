"""One verb for every prediction method, and the registry of methods by name.

Every method is a per-job object with ``observe(event) -> list[StragglerPrediction]``: feed it every
event of one job in event-time order; it returns the tasks it flags (each task at most once). The
evaluation loop and the stream agent drive all methods alike.

>>> sorted(METHODS)[:3]
['elapsed-tau', 'hadoop', 'hst']
>>> make_method("spark-q0.75-m1.5", tau_s=None).method
'spark-q0.75-m1.5'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from streams.core.events import Event, StragglerPrediction
from streams.core.prediction.baselines import ElapsedTauJob, HadoopJob, OutlierJob, SpeculationJob
from streams.core.prediction.nurd.nurd import NurdJob
from streams.core.prediction.threshold import JobP90, Oracle, Threshold


class Predictor(Protocol):
    """A per-job straggler predictor."""

    method: str

    def observe(self, event: Event) -> list[StragglerPrediction]: ...


@dataclass(frozen=True)
class Options:
    """Hyperparameters shared by the methods that use them."""

    alpha: float = 0.5
    epsilon: float = 0.05
    initial_fraction: float = 0.04


def _nurd(weighting: str) -> Callable[[Threshold, Options], Predictor]:
    def build(threshold: Threshold, o: Options) -> Predictor:
        return NurdJob(threshold, alpha=o.alpha, epsilon=o.epsilon, initial_fraction=o.initial_fraction,
                       weighting=weighting)  # type: ignore[arg-type]  # fmt: skip

    return build


def _batch(threshold: Threshold, o: Options) -> Predictor:
    from streams.core.prediction.nurd.batch import NurdBatchJob  # scikit-learn is optional

    # "on-change" gives the predictions of refitting at every checkpoint (deterministic fits) in half the time
    return NurdBatchJob(
        threshold, alpha=o.alpha, epsilon=o.epsilon, initial_fraction=o.initial_fraction, refit="on-change"
    )


# name -> (builder, whether it decides against tau)
METHODS: dict[str, tuple[Callable[[Threshold, Options], Predictor], bool]] = {
    "nurd": (_nurd("calibrated"), True),
    "nurd-nc": (_nurd("propensity"), True),
    "supervised": (_nurd("none"), True),
    "nurd-batch": (_batch, True),
    "spark-q0.75-m1.5": (lambda t, o: SpeculationJob(0.75, 1.5), False),
    "spark-q0.9-m3": (lambda t, o: SpeculationJob(0.9, 3.0), False),
    "hadoop": (lambda t, o: HadoopJob(0.05, 1.0), False),
    "hst": (lambda t, o: OutlierJob(initial_fraction=o.initial_fraction), False),
    # A yardstick, not a predictor: what knowing tau and elapsed time alone is worth under the same protocol.
    "elapsed-tau": (lambda t, o: ElapsedTauJob(t, o.initial_fraction), True),
}
ALIASES = {"spark": ("spark-q0.75-m1.5", "spark-q0.9-m3")}


def uses_threshold(name: str) -> bool:
    """Whether ``name`` compares against tau (so the oracle and online thresholds differ)."""
    return METHODS[name][1]


def make_method(name: str, tau_s: float | None, options: Options | None = None) -> Predictor:
    """Build method ``name`` for one job: tau_s is the oracle tau, None for the online estimate."""
    builder, _ = METHODS[name]
    threshold: Threshold = Oracle(tau_s) if tau_s is not None else JobP90()
    return builder(threshold, options or Options())
