"""Factories for the predictor registry: ``hawkeye`` and ``hawkeye-adaptive`` from a ``PredictionContext``.

Parameters are read from ``context.params`` by name (absent: the defaults): ``hawkeye_quantile`` and
``hawkeye_multiplier`` (Spark's 0.75 and 1.5), ``hawkeye_prob`` (PoF threshold, 0.5), and for the adaptive
method ``hawkeye_spares`` (spare machines of the reward simulator; negative = unlimited; default 0).

>>> from streams.core.prediction.base import PredictionContext
>>> make_hawkeye(PredictionContext(params={"hawkeye_multiplier": 2.0})).rule.name
'q0.75-m2'
>>> make_hawkeye_adaptive(PredictionContext(seed=3)).name
'hawkeye-adaptive'
"""

from __future__ import annotations

from streams.core.prediction.base import PredictionContext
from streams.core.prediction.hawkeye.adaptive import AdaptiveHawkeyeMethod, RewardModel
from streams.core.prediction.hawkeye.method import DEFAULT_PROB, HawkeyeMethod

DOCS = {
    "hawkeye": "Hawkeye (fixed q0.75/m1.5): per-host straggling ratio and per-host Pareto PoF; speculate",
    "hawkeye-adaptive": "Hawkeye with (quantile, multiplier) per job type and size from River LinUCB on "
    "simulated JCT cuts of jobs already ended",
}


def make_hawkeye(context: PredictionContext) -> HawkeyeMethod:
    params = context.params
    return HawkeyeMethod(
        quantile=params.get("hawkeye_quantile", 0.75),
        multiplier=params.get("hawkeye_multiplier", 1.5),
        prob=params.get("hawkeye_prob", DEFAULT_PROB),
    )


def make_hawkeye_adaptive(context: PredictionContext) -> AdaptiveHawkeyeMethod:
    params = context.params
    spares = int(params.get("hawkeye_spares", 0))
    rewards = RewardModel(spares=None if spares < 0 else spares, seed=context.seed)
    return AdaptiveHawkeyeMethod(prob=params.get("hawkeye_prob", DEFAULT_PROB), rewards=rewards, seed=context.seed)
