"""The shift detector: a node's z-values tested over several windows at once, with persistence and recovery.

One window cannot be both fast and careful. Over an hour, a node that became 2x slow ten minutes ago still
looks almost healthy (fifty minutes of old samples dilute the new ones), and a node 1.3x slow needs hours of
samples before its interval clears a floor that a slightly older hardware generation (about +0.17 job
standard deviations) must not clear. So each ``Scale`` is a window with its own floor and confidence: a short
window with a high floor lists large shifts soon; a long window with the usual floor and a stricter
confidence lists small ones eventually. A node is a *suspect* once some scale has found it clearly slow
(``ci_low > floor``, at least ``min_tasks`` samples) in ``persistence`` consecutive periods, as HDFS's
slow-peer detector wants repeated reports before acting.

Beside the windows, a one-sided CUSUM per node (``streams.core.detection.cusum``, optional) sums the
evidence since the node changed, so a small shift is not diluted by the samples from before its onset.

Once a suspect, the node's *effect* (between ``ci_low`` and the mean of the scale that found it, or the CUSUM's
mean since the change) is remembered, and the node stays *still slow* until it has *recovered*: among the
samples since it was found, the shortest scale whose mean is precise enough (standard error at most
``effect / resolution``) shows a mean below ``recovery_ratio * effect``. This is the decision layer's
hysteresis: a slower node elsewhere never makes a slow node look healthy, and a recovered node leaves without
waiting for its old samples to leave the window (they are forgotten at recovery: they are not evidence against
it any more). A node silent for ``memory_us`` is forgotten, and left to the decision layer's "no recent
evidence": when the scheduler honours the list, a listed node yields no samples, so this bounds its stay.

>>> MIN = 60_000_000
>>> detector = ShiftDetector((Scale(20 * MIN, 0.5, 0.95, 5), Scale(60 * MIN, 0.25, 0.95, 5)), persistence=2)
>>> for i in range(60):  # one sample a minute per node; n0 becomes slow at minute 40
...     for node in ("n0", "n1", "n2"):
...         z = 1.6 if node == "n0" and i >= 40 else (-0.3, 0.1, 0.4)[i % 3]
...         detector.learn(NormalizedTask(f"j{i}", node, 0, node, i * MIN, 1, z))
...     if (i + 1) % 5 == 0:
...         found = detector.detect(WindowView(0, (i + 1) * MIN, {}))
...         if found["n0"].suspect:
...             break
>>> i + 1, found["n0"].still_slow, found["n1"].suspect
(60, True, False)
>>> found["n0"].reason.split(":")[0]
'clearly slow over 20 min for 2 periods'
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from streams.core.detection.base import Evidence, WindowView
from streams.core.detection.cusum import Cusum
from streams.core.events import NormalizedTask
from streams.core.windows import NodeStats, summarize

SNAPSHOT_VERSION = 1
MINUTE_US = 60_000_000


@dataclass(frozen=True, slots=True)
class Scale:
    """One window of the detector: its length, the floor ``ci_low`` must clear, the confidence of the
    interval and the samples it needs."""

    window_us: int
    floor: float
    confidence: float = 0.95
    min_tasks: int = 5

    @property
    def label(self) -> str:
        return f"{self.window_us / MINUTE_US:g} min"


class ShiftDetector:
    """Suspect nodes whose z-values are clearly high over any of several windows; remember them until
    they have recovered (see the module text)."""

    name = "shift"

    def __init__(self, scales: Sequence[Scale], persistence: int = 2, recovery_ratio: float = 0.5,
                 resolution: float = 3.0, cusum: tuple[float, float] | None = None,
                 memory_us: int = 240 * MINUTE_US) -> None:
        if not scales:
            raise ValueError("the shift detector needs at least one scale")
        self.scales = tuple(sorted(scales, key=lambda s: s.window_us))
        self.persistence = persistence
        self.recovery_ratio = recovery_ratio
        self.resolution = resolution
        self.cusum = cusum  # (reference, threshold), None: no CUSUM
        self.memory_us = max(memory_us, self.scales[-1].window_us)  # a node silent this long is forgotten
        self._cusums: dict[str, Cusum] = {}
        self._fresh: list[tuple[int, str, float]] = []  # final samples not yet in the CUSUMs
        self._samples: dict[str, dict[tuple[str, str], tuple[int, float]]] = {}
        self._node_of: dict[tuple[str, str], str] = {}
        self._since: dict[str, int] = {}  # samples before this time are forgotten (recovery)
        self._streak: dict[str, tuple[int, int]] = {}  # node -> (periods in a row clearly slow, as of window end)
        self._effect: dict[str, float] = {}  # suspects not yet recovered -> effect when found (its ci_low)
        self._found: dict[str, int] = {}  # suspects not yet recovered -> window end when found

    def learn(self, sample: NormalizedTask) -> None:
        key = (sample.job_id, sample.task_id)
        previous = self._node_of.get(key)
        if previous is not None and previous != sample.node_id:
            self._samples[previous].pop(key, None)
        self._samples.setdefault(sample.node_id, {})[key] = (sample.ts_us, sample.z)
        self._node_of[key] = sample.node_id
        if self.cusum is not None and not sample.provisional:
            self._fresh.append((sample.ts_us, sample.node_id, sample.z))

    def detect(self, window: WindowView) -> Mapping[str, Evidence]:
        end = window.end_us
        self._forget_before(end - self.memory_us)
        self._accumulate(end)
        evidence = {}
        for node in sorted(self._samples):
            stats = self._stats(node, end)
            found = self._found.get(node)
            evidence[node] = self._judge(node, stats, end, None if found is None else self._stats(node, end, found))
        return evidence

    def _accumulate(self, end: int) -> None:
        if self.cusum is None:
            return
        self._fresh.sort()
        later = [item for item in self._fresh if item[0] >= end]
        for ts, node, z in self._fresh[:len(self._fresh) - len(later)]:
            if node in self._samples and ts >= self._since.get(node, ts):
                self._cusums.setdefault(node, Cusum(*self.cusum)).update(z)
        self._fresh = later

    def _forget_before(self, start: int) -> None:
        for node in list(self._samples):
            samples = self._samples[node]
            since = max(start, self._since.get(node, start))
            for key in [k for k, (ts, _) in samples.items() if ts < since]:
                del samples[key]
                del self._node_of[key]
            if not samples:
                del self._samples[node]
                for state in (self._since, self._streak, self._effect, self._found, self._cusums):
                    state.pop(node, None)

    def _stats(self, node: str, end: int, since: int | None = None) -> list[NodeStats | None]:
        values = sorted(self._samples[node].values())
        out: list[NodeStats | None] = []
        for scale in self.scales:
            start = end - scale.window_us if since is None else max(since, end - scale.window_us)
            recent = [z for ts, z in values if start <= ts < end]
            out.append(summarize(node, recent, scale.confidence) if recent else None)
        return out

    def _judge(self, node: str, stats: list[NodeStats | None], end: int,
               since_found: list[NodeStats | None] | None) -> Evidence:
        hits = [(scale, s) for scale, s in zip(self.scales, stats, strict=True)
                if s is not None and s.n >= scale.min_tasks and s.ci_low is not None and s.ci_low > scale.floor]
        cusum = self._cusums.get(node)
        changed = cusum is not None and cusum.alarm
        count, counted_at = self._streak.get(node, (0, -1))
        # Detecting the same window again (a restored shell repeating its last period) counts it once.
        streak = count if counted_at == end else count + 1 if hits or changed else 0
        self._streak[node] = (streak, end)
        score = max((s.ci_low for s in stats if s is not None and s.ci_low is not None), default=-math.inf)
        effect = self._effect.get(node)
        if effect is not None and since_found is not None:
            judged = self._recovery_scale(since_found, effect)
            if judged is not None and judged[1].mean < self.recovery_ratio * effect:
                scale, s = judged
                self._since[node] = end - scale.window_us
                self._streak[node] = (0, end)
                del self._effect[node], self._found[node]
                if cusum is not None:
                    cusum.reset()
                return Evidence(node, False, score, f"recovered: mean {s.mean:+.2f} over {scale.label} (n={s.n}) "
                                f"below {self.recovery_ratio:g} x the effect {effect:+.2f} it was found with")
        if (hits or changed) and streak >= self.persistence:
            if hits:
                scale, s = hits[0]
                assert s.ci_low is not None
                found, why = (s.ci_low + s.mean) / 2, _why(scale, s, streak)
            else:
                assert cusum is not None
                found, why = cusum.mean, _why_changed(cusum, streak)
            if effect is None:
                self._effect[node], self._found[node] = found, end
            return Evidence(node, True, score, why, still_slow=True)
        if effect is not None:
            return Evidence(node, False, score, f"still slow: found with effect {effect:+.2f}, no recent scale "
                            f"shows it below {self.recovery_ratio * effect:+.2f} yet", still_slow=True)
        if hits or changed:
            where = hits[0][0].label if hits else "its CUSUM"
            return Evidence(node, False, score, f"clearly slow over {where} for {streak} of "
                            f"{self.persistence} periods needed")
        return Evidence(node, False, score, "not clearly slow over any window")

    def _recovery_scale(self, stats: list[NodeStats | None], effect: float) -> tuple[Scale, NodeStats] | None:
        """The shortest scale whose mean is precise enough (standard error at most ``effect / resolution``)
        to tell ``effect`` from nothing."""
        for scale, s in zip(self.scales, stats, strict=True):
            if s is None or s.n < scale.min_tasks:
                continue
            if s.std / math.sqrt(s.n) <= abs(effect) / self.resolution:
                return scale, s
        return None

    def snapshot(self) -> dict[str, Any]:
        return {"version": SNAPSHOT_VERSION,
                "samples": [[job, task, node, ts, z] for node, samples in sorted(self._samples.items())
                            for (job, task), (ts, z) in sorted(samples.items())],
                "since": self._since, "streak": {n: list(v) for n, v in self._streak.items()},
                "effect": self._effect, "found": self._found,
                "cusums": {n: [c.statistic, c.count, c.total] for n, c in self._cusums.items()},
                "fresh": [list(item) for item in self._fresh]}

    def restore(self, state: dict[str, Any]) -> None:
        if state.get("version") != SNAPSHOT_VERSION:
            raise ValueError(f"unknown shift detector snapshot version {state.get('version')!r}")
        self._samples, self._node_of = {}, {}
        for job, task, node, ts, z in state["samples"]:
            self._samples.setdefault(node, {})[(job, task)] = (int(ts), float(z))
            self._node_of[(job, task)] = node
        self._since = {k: int(v) for k, v in state["since"].items()}
        self._streak = {k: (int(v[0]), int(v[1])) for k, v in state["streak"].items()}
        self._effect = {k: float(v) for k, v in state["effect"].items()}
        self._found = {k: int(v) for k, v in state["found"].items()}
        self._cusums = {}
        if self.cusum is not None:
            for node, (statistic, count, total) in state["cusums"].items():
                self._cusums[node] = Cusum(*self.cusum, statistic=float(statistic), count=int(count),
                                           total=float(total))
        self._fresh = [(int(ts), str(node), float(z)) for ts, node, z in state["fresh"]]


def _why(scale: Scale, s: NodeStats, streak: int) -> str:
    assert s.ci_low is not None and s.ci_high is not None
    return (f"clearly slow over {scale.label} for {streak} periods: its {s.n} tasks ran {s.mean:+.2f} job "
            f"standard deviations from their jobs' means (std {s.std:.2f}), {scale.confidence:.0%} interval "
            f"[{s.ci_low:+.2f}, {s.ci_high:+.2f}] above the floor {scale.floor:g}")


def _why_changed(cusum: Cusum, streak: int) -> str:
    return (f"changed for {streak} periods: CUSUM of its z-values {cusum.statistic:.1f} above {cusum.threshold:g} "
            f"(reference {cusum.reference:g}); its {cusum.count} tasks since the change ran {cusum.mean:+.2f} job "
            "standard deviations from their jobs' means")
