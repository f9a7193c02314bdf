"""The typed, pure configuration of node ranking and blacklisting (SPEC 3).

Every name mirrors a setting of ``streams.settings.Settings`` (in event-time microseconds rather than
seconds), so the pipeline builds one from the other; the core never reads settings itself.

>>> config = RankingConfig()
>>> config.min_tasks, config.significance_floor, config.max_fraction, config.min_dwell_periods
(5, 0.25, 0.1, 1)
>>> config.window_size_us // 60_000_000, config.period_us // 60_000_000
(60, 5)
>>> RankingConfig(max_fraction=0.0)
Traceback (most recent call last):
...
ValueError: max_fraction must be in (0, 1], got 0.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from streams.core.decision.registry import POLICIES

MINUTE_US = 60_000_000


@dataclass(frozen=True, slots=True)
class RankingConfig:
    """Hyperparameters of window statistics, the detector and the blacklist policy's guards; ``policy``
    is a name of ``streams.core.decision.registry.POLICIES``."""

    policy: str = "pcores"
    window_size_us: int = 60 * MINUTE_US
    period_us: int = 5 * MINUTE_US
    min_tasks: int = 5
    significance_floor: float | None = 0.25
    max_fraction: float = 0.1
    min_dwell_periods: int = 1
    allow_list: frozenset[str] = field(default_factory=frozenset)
    deny_list: frozenset[str] = field(default_factory=frozenset)
    seed: int = 0
    cluster_id: str = "default"
    confidence: float = 0.95
    # ML-NA (policy mlna, SPEC 6): the "day", the days per "month", the classifier and its threshold.
    mlna_sub_period_us: int = 86_400_000_000
    mlna_sub_periods: int = 30
    mlna_classifier: str = "forest"
    mlna_threshold: float = 0.4
    # The running detector's floor in duration terms (None: its tuned default; 1.0: off).
    running_min_ratio: float | None = None

    def __post_init__(self) -> None:
        problem = self._problem()
        if problem is not None:
            raise ValueError(problem)
        # Accept any iterable of names from callers (lists from settings), store frozensets.
        object.__setattr__(self, "allow_list", frozenset(self.allow_list))
        object.__setattr__(self, "deny_list", frozenset(self.deny_list))

    def _problem(self) -> str | None:
        if self.policy not in POLICIES:
            return f"unknown policy {self.policy!r}; one of: {', '.join(POLICIES.names())}"
        if self.window_size_us <= 0 or self.period_us <= 0:
            return "window_size_us and period_us must be positive"
        if self.window_size_us < self.period_us:
            # the window slides by one period: a shorter window would leave tasks between windows unranked
            return (f"the window ({self.window_size_us / 1e6:g} s) must be at least the ranking period "
                    f"({self.period_us / 1e6:g} s), or the tasks between two windows are never ranked")  # fmt: skip
        if self.min_tasks < 1:
            # Below 2 it changes nothing: a node needs 2 samples for an interval anyway.
            return f"min_tasks must be at least 1, got {self.min_tasks}"
        if self.significance_floor is not None and not math.isfinite(self.significance_floor):
            return f"significance_floor must be a finite number or None, got {self.significance_floor}"
        if not 0.0 < self.max_fraction <= 1.0:
            return f"max_fraction must be in (0, 1], got {self.max_fraction}"
        if self.min_dwell_periods < 0:
            return f"min_dwell_periods must be >= 0, got {self.min_dwell_periods}"
        if not 0.0 < self.confidence < 1.0:
            return f"confidence must be in (0, 1), got {self.confidence}"
        if self.mlna_sub_period_us <= 0 or self.mlna_sub_periods <= 0:
            return "mlna_sub_period_us and mlna_sub_periods must be positive"
        if not 0.0 <= self.mlna_threshold <= 1.0:
            return f"mlna_threshold must be in [0, 1], got {self.mlna_threshold}"
        if self.running_min_ratio is not None and not self.running_min_ratio >= 1.0:
            return f"running_min_ratio must be at least 1.0 (off) or None, got {self.running_min_ratio}"
        both = set(self.allow_list) & set(self.deny_list)
        if both:
            return f"nodes on both the allow-list and the deny-list: {', '.join(sorted(both))}"
        return None

    @property
    def min_dwell_us(self) -> int:
        """How long a blacklisted node stays at least after the period it was added in, in event time."""
        return self.min_dwell_periods * self.period_us

    def cap(self, nodes_seen: int) -> int:
        """The most nodes the blacklist may hold when ``nodes_seen`` nodes were seen (``policy.nodes_seen``)."""
        # A tiny epsilon keeps 0.1 * 40 from becoming 3.9999999.
        return math.floor(self.max_fraction * nodes_seen + 1e-9)
