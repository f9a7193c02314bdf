"""``POLICIES``: every blacklist policy by name, the one list settings, the CLI and the docs read.

A policy is a detector (a factory of ``DETECTORS``, or any ``Callable[[RankingConfig], NodeDetector]``)
and a selection rule for when more nodes are suspect than the cap allows; the guards (allow/deny-lists,
cap, dwell, release) are the decision layer's and the same for all. Adding one is one call::

    POLICIES.register("mine", Policy(my_detector_factory, highest("score")), "one line of help")

after which ``laggard run --policy mine`` and ``LAGGARD_POLICY=mine`` accept it.

>>> POLICIES.names()
('pcores', 'pcores-top-k', 'noop', 'shift', 'running', 'mlna')
>>> POLICIES.get("pcores-top-k").detector is DETECTORS.get("pcores")
True
>>> floor_policies()
('pcores', 'pcores-top-k', 'shift')
"""

from __future__ import annotations

from dataclasses import dataclass

from streams.core.decision.selection import Selection, highest, top_k_by_std_and_mean_rule
from streams.core.detection.registry import DETECTORS, DetectorFactory
from streams.core.registry import Registry


@dataclass(frozen=True, slots=True)
class Policy:
    """What a policy name stands for: the detector it runs and how it chooses under the cap; ``reads_floor``: its
    detector lists only nodes whose interval clears the significance floor (the setting means nothing to others)."""

    detector: DetectorFactory
    select: Selection
    reads_floor: bool = False


POLICIES: Registry[Policy] = Registry("policy")
POLICIES.register("pcores", Policy(DETECTORS.get("pcores"), highest("ci_low"), reads_floor=True),
                  "DSB without number: level-0 nodes clearly above the floor; under the cap the highest ci_low")
POLICIES.register("pcores-top-k", Policy(DETECTORS.get("pcores"), top_k_by_std_and_mean_rule, reads_floor=True),
                  "DSB with number: as pcores, under the cap the top-k by std and mean, boundary drawn with a seed")
POLICIES.register("noop", Policy(DETECTORS.get("noop"), highest("score")),
                  "lists only the deny-list (the guards alone, a baseline)")
POLICIES.register("shift", Policy(DETECTORS.get("shift"), highest("score"), reads_floor=True),
                  "the shift detector (several windows, CUSUM, persistence, recovery); under the cap the highest "
                  "ci_low")
POLICIES.register("running", Policy(DETECTORS.get("running"), highest("score")),
                  "the running-task detector (finished and running tasks against their jobs, censored); under the "
                  "cap the largest effect (its lower bound)")
POLICIES.register("mlna", Policy(DETECTORS.get("mlna"), highest("score")),
                  "ML-NA: nodes predicted weak for the next period (k-means labels, a classifier); under the cap "
                  "the most probable")


def floor_policies() -> tuple[str, ...]:
    """The policies whose detector reads the significance floor (``Policy.reads_floor``), in registration order."""
    return tuple(name for name in POLICIES.names() if POLICIES.get(name).reads_floor)
