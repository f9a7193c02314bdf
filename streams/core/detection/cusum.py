"""One-sided CUSUM (Page 1954) of a node's z-values: evidence accumulated since the node changed.

A window of fixed length dilutes a fault that began inside it with the samples from before; CUSUM instead
sums ``z - reference`` since the last time the sum was zero, so a small shift (a node 1.3x slow runs about
0.45 job standard deviations behind) builds up from its onset whatever came before, while a healthy node's
sum keeps returning to zero. ``threshold`` sets how rarely that happens by chance. z-values are clipped to
``±clip`` first: task durations are skewed, and one very long task should not decide alone.

Hand-written rather than River's ``drift.PageHinkley``: the decision needs the statistic itself, the
samples since the change and their mean (the effect), and River's detector keeps the running mean of all
samples as its baseline, which is the cluster's job-normalised mean (0) here by construction anyway.

>>> cusum = Cusum(reference=0.25, threshold=3.0)
>>> [round(cusum.update(z), 2) for z in (0.1, -0.4, 1.0, 1.2, 0.9, 1.1)]
[0.0, 0.0, 0.75, 1.7, 2.35, 3.2]
>>> cusum.alarm, cusum.count, round(cusum.mean, 2)
(True, 4, 1.05)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Cusum:
    """``S = max(0, S + clip(z) - reference)``; ``alarm`` once ``S > threshold``; ``count``/``mean`` of the
    samples since ``S`` was last zero."""

    reference: float
    threshold: float
    clip: float = 3.0
    statistic: float = 0.0
    count: int = 0
    total: float = 0.0

    def update(self, z: float) -> float:
        z = max(-self.clip, min(self.clip, z))
        self.statistic = max(0.0, self.statistic + z - self.reference)
        if self.statistic == 0.0:
            self.count, self.total = 0, 0.0
        else:
            self.count += 1
            self.total += z
        return self.statistic

    @property
    def alarm(self) -> bool:
        return self.statistic > self.threshold

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    def reset(self) -> None:
        self.statistic, self.count, self.total = 0.0, 0, 0.0
