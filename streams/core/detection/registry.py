"""``DETECTORS``: every node-level detector by name, each built from the ranking configuration.

A factory takes the ``RankingConfig`` and picks the hyperparameters it needs. Policies
(``streams.core.decision.registry.POLICIES``) name the detector they run by its factory.

>>> DETECTORS.names()
('pcores', 'noop')
>>> from streams.core.ranking_config import RankingConfig
>>> DETECTORS.get("pcores")(RankingConfig(min_tasks=7)).min_tasks
7
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from streams.core.detection.base import NodeDetector, NoopDetector
from streams.core.detection.pcores import PCoresDetector
from streams.core.registry import Registry

if TYPE_CHECKING:  # ranking_config validates policy names against the registries that import this module
    from streams.core.ranking_config import RankingConfig

DetectorFactory = Callable[["RankingConfig"], NodeDetector]


def pcores_detector(config: RankingConfig) -> PCoresDetector:
    return PCoresDetector(config.min_tasks, config.significance_floor, config.confidence)


def noop_detector(config: RankingConfig) -> NoopDetector:
    return NoopDetector()


DETECTORS: Registry[DetectorFactory] = Registry("detector")
DETECTORS.register("pcores", pcores_detector,
                   "P-Cores level 0 with at least min_tasks samples, clearly above the significance floor (DSB)")
DETECTORS.register("noop", noop_detector, "suspects nothing: only the deny-list is listed")
