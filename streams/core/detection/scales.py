"""What the running-task detector judges a node on: a scale (how far back, at what level, how often), the
node's tally over it, the tally's z (against the cluster's spread of node effects where the scale asks), and
the words of a listing (``streams.core.detection.running``; the words for a node short of its scale's passing
looks are with the looks' counting, ``streams.core.detection.looks``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from streams.core.detection.censored import LOG_RATIO_CLIP

MINUTE_US = 60_000_000


@dataclass(frozen=True, slots=True)
class Scale:
    """Tasks started in the last ``window_us``; ``z``: the level a node must reach over it (None: the
    detector's ``z_list``); ``every_us``: judged for listing only at boundaries that are a multiple of it (None:
    every boundary). A long window changes little in a minute, and each look is one more chance of a healthy
    node's lucky high: its level is set for looks this far apart, whatever the ranking period. ``spread``: its
    z is judged against the cluster's spread of node effects too (``node_spread``): over hours, healthy
    hardware a little slower than the rest is significant but no fault. ``min_effect``: the effect a node must
    show over it (None: the detector's); a scale asking a large one may ask a lower z. ``repeat_us``: event time
    (None: none) a node must keep passing over it before it is listed: its consecutive passing looks must cover that
    much, ``looks_needed`` of them (``repeat_us`` over the scale's look interval, max(ranking period, ``every_us``),
    rounded up, at least 1), unless ``at_once`` (None: never) is set and its z against the cluster's spread of node
    effects reaches it too: on heterogeneous hardware a healthy node's pass is a lucky high of a slightly slower
    generation, z near the level against the spread and gone at the next look, while a slow node keeps passing or
    stands beyond the spread (issue 21, session 10). In event time, not looks: at a 1-minute period 3 minutes are 3
    looks, at a 5-minute period 1 (session 10, later).

    >>> scan = Scale(10 * MINUTE_US, repeat_us=3 * MINUTE_US)
    >>> [scan.looks_needed(p * MINUTE_US) for p in (1, 2, 5, 10)]
    [3, 2, 1, 1]
    >>> window = Scale(60 * MINUTE_US, every_us=5 * MINUTE_US, repeat_us=15 * MINUTE_US)
    >>> [window.looks_needed(p * MINUTE_US) for p in (1, 2, 5, 10)]
    [3, 3, 3, 2]
    """

    window_us: int
    z: float | None = None
    every_us: int | None = None
    spread: bool = False
    min_effect: float | None = None
    repeat_us: int | None = None
    at_once: float | None = None

    def __post_init__(self) -> None:
        if self.every_us is not None and self.every_us <= 0:
            raise ValueError(f"a scale's every_us must be positive, not {self.every_us}")
        if self.repeat_us is not None and self.repeat_us <= 0:
            raise ValueError(f"a scale's repeat_us must be positive, not {self.repeat_us}")

    def looks_needed(self, period_us: int | None) -> int:
        """The consecutive passing looks that list a node (short of ``at_once``): enough to cover ``repeat_us`` of
        event time at one look every max(``period_us``, ``every_us``), at least 1."""
        if self.repeat_us is None:
            return 1
        interval = max(period_us or 0, self.every_us or 0)
        if interval <= 0:
            raise ValueError("a scale with repeat_us needs its look interval: the ranking period or its every_us")
        return max(1, -(-self.repeat_us // interval))

    @property
    def label(self) -> str:
        large = "" if self.min_effect is None else f" (an effect of at least {self.min_effect:g})"
        return f"{self.window_us / MINUTE_US:g} min{large}"


@dataclass(frozen=True, slots=True)
class Tally:
    """One node over one scale: tasks, of which still running and running past their job's median, the sum of
    contributions and of their null variances, and ``scaled``: the sum of their slowdowns in log duration against
    their jobs' medians (``censored.log_ratios``; NaN: not known), so ``ratio`` is the effect in duration terms."""

    tasks: int
    running: int
    past_median: int
    total: float
    information: float
    scaled: float = math.nan

    @property
    def z(self) -> float:
        return self.total / math.sqrt(self.information) if self.information > 0 else 0.0

    @property
    def effect(self) -> float:
        return self.total / self.information if self.information > 0 else 0.0

    @property
    def ratio(self) -> float:
        """How many times longer than their job siblings the node's tasks run (exp of the effect in log duration;
        NaN when not known): independent of how widely a job's task times spread, where ``effect`` is not."""
        if self.information <= 0 or not math.isfinite(self.scaled):
            return math.nan
        # Within the per-task clip (censored.LOG_RATIO_CLIP, 4x): running tasks carry their contributions with
        # little information, and a node with only such tasks had a mean log ratio past exp's range, which crashed
        # a worker (OverflowError, CI at 92fcd13). Beyond 4x or 1/4x no floor decision changes.
        return math.exp(min(LOG_RATIO_CLIP, max(-LOG_RATIO_CLIP, self.scaled / self.information)))

    @property
    def stderr(self) -> float:
        return 1.0 / math.sqrt(self.information) if self.information > 0 else math.inf


def _tasks(t: Tally) -> str:
    return f"its {t.tasks} tasks ({t.running} still running)"


def _z(scale: Scale, t: Tally, spread: float) -> float:
    """The tally's z; with ``scale.spread``, of its effect against its standard error and the cluster's spread of
    node effects together: ``effect / sqrt(stderr^2 + spread)`` (a random-effects z)."""
    return t.z / math.sqrt(1.0 + spread * t.information) if scale.spread else t.z


def _why(scale: Scale, t: Tally, streak: int, z_list: float, spread: float = 0.0, looks: int = 1,
         needed: int = 1, min_ratio: float = 1.0) -> str:
    """``looks``: the scale's consecutive passing looks; with ``needed`` (``Scale.looks_needed``) > 1 the words say
    whether those or the z against the spread (``at_once``) listed the node."""
    period = "period" if streak == 1 else "periods"
    against = f"; against the nodes' spread +-{math.sqrt(spread):.2f}: z {_z(scale, t, spread):.1f}" if (
        scale.spread and spread > 0) else ""
    how = ""
    if needed > 1:
        how = (f"; {looks} consecutive looks passed" if looks >= needed else
               f"; at once: against the nodes' spread +-{math.sqrt(spread):.2f} z "
               f"{t.z / math.sqrt(1.0 + spread * t.information):.1f} >= {scale.at_once:g}")
    ratio = f", {t.ratio:.2f}x their durations >= {min_ratio:g}x" if min_ratio > 1.0 else ""
    return (f"clearly slow over {scale.label} for {streak} {period}: its {t.tasks} tasks ({t.running} still "
            f"running, {t.past_median} of them already past their job's median) run {t.effect:+.2f} job std "
            f"behind their jobs' siblings (censored normal scores, z {t.z:.1f}{against} >= {z_list:g}{how}{ratio})")


def looks_at(end: int, every_us: int, period_us: int | None) -> bool:
    """Whether a scale judged every ``every_us`` looks at boundary ``end``: the first boundary at or after each
    multiple of ``every_us`` when boundaries are ``period_us`` apart (so a 2-minute period looks about every 5
    minutes too, not every lcm(2, 5) = 10), ``end`` a multiple of it when the period is unknown.

    >>> [m for m in range(0, 21, 2) if looks_at(m, 5, 2)]
    [0, 6, 10, 16, 20]
    >>> [m for m in range(0, 11) if looks_at(m, 5, 1)] == [m for m in range(0, 11) if looks_at(m, 5, None)]
    True
    """
    if period_us is None:
        return end % every_us == 0
    return end // every_us > (end - period_us) // every_us

