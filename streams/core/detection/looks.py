"""The running-task detector's count of passing looks (issue 21, session 10): per node and per scale, how many
looks in a row the node has passed, the boundary they were counted at, their snapshot and restore, and the words
for a node still short of the looks its scale needs (``streams.core.detection.running`` judges the looks).

A scale with ``repeat_us`` lists a node only once its consecutive passing looks cover that much event time
(``Scale.looks_needed``): on heterogeneous hardware a healthy node's pass is a lucky high, gone at the next look.
A counter survives a restart only onto a scale that judges a pass the same way (``look_identity``): a restart
with another window or level starts that scale's counting afresh.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Sequence
from typing import Any

from streams.core.detection.scales import MINUTE_US, Scale


def look_identity(scale: Scale, z: float, min_effect: float, min_tasks: int, min_ratio: float = 1.0
                  ) -> tuple[Any, ...]:
    """What a pass over ``scale`` means, at the z, effect and duration-ratio levels it is judged at and the tasks it
    needs (a ratio floor of 1.0, off, keeps the identity counters had before there was one)."""
    ratio = () if min_ratio <= 1.0 else (float(min_ratio),)
    return (scale.window_us, float(z), scale.every_us, scale.spread, float(min_effect), min_tasks, *ratio)


class PassingLooks:
    """Per node, the consecutive passing looks per scale and the boundary they were counted at; only nodes with
    some passing run are kept. Each boundary is counted once however often it is judged.

    >>> scales = (Scale(10 * MINUTE_US, repeat_us=3 * MINUTE_US), Scale(60 * MINUTE_US))
    >>> looks = PassingLooks(scales, MINUTE_US)
    >>> looks.needed
    (3, 1)
    >>> [looks.count("n1", m * MINUTE_US, [True, False]) for m in (1, 2, 2)]
    [[1, 0], [2, 0], [2, 0]]
    >>> looks.waiting("n1", 2 * MINUTE_US, 0)
    'passed 2 of 3 looks over 10 min; listed after 3 in a row (3 min of event time)'
    >>> looks.count("n1", 3 * MINUTE_US, [False, None]), looks.waiting("n1", 3 * MINUTE_US, 0)
    ([0, 0], '')
    """

    def __init__(self, scales: Sequence[Scale], period_us: int | None) -> None:
        self.scales, self.period_us = tuple(scales), period_us
        self.needed = tuple(s.looks_needed(period_us) for s in self.scales)  # passing looks that list, per scale
        self._runs: dict[str, tuple[list[int], int]] = {}

    def count(self, node: str, end: int, passed: Sequence[bool | None]) -> list[int]:
        """The node's consecutive passing looks per scale after boundary ``end``, where ``passed[k]`` says whether
        the look over scale ``k`` passed (None: the scale does not look at ``end``; its run stands)."""
        before, counted_at = self._runs.get(node, ([0] * len(self.scales), -1))
        runs = list(before)
        if counted_at != end:
            for k, p in enumerate(passed):
                if p is not None:
                    runs[k] = runs[k] + 1 if p else 0
        if any(runs):
            self._runs[node] = (runs, end)
        else:
            self._runs.pop(node, None)
        return runs

    def has_run(self, node: str) -> bool:
        """Whether ``node`` has a passing run on some scale."""
        return node in self._runs

    def nodes(self) -> Iterable[str]:
        """The nodes with a passing run on some scale."""
        return self._runs.keys()

    def keep_only(self, nodes: Container[str]) -> None:
        """Forget the runs of nodes outside ``nodes``: no usable task this look is no run."""
        self._runs = {node: runs for node, runs in self._runs.items() if node in nodes}

    def forget(self, node: str) -> None:
        self._runs.pop(node, None)

    def waiting(self, node: str, end: int, warmup_us: int) -> str:
        """The words for a node some scale has seen pass at ``end`` short of its looks (the longest such run, the
        shortest scale first), or "" for none."""
        runs, counted_at = self._runs.get(node, ((), -1))
        if counted_at != end:
            return ""
        waiting = [(r, k) for k, r in enumerate(runs) if r > 0 and self.needed[k] > 1]
        if not waiting:
            return ""
        r, k = max(waiting, key=lambda rk: (rk[0], -rk[1]))
        return waiting_words(self.scales[k], r, self.needed[k], self.period_us, warmup_us)

    def snapshot(self, identities: Sequence[tuple[Any, ...]]) -> dict[str, Any]:
        """The counters, with ``identities``: per scale, what a pass over it means now (``look_identity``)."""
        return {"looks": {n: [runs, at] for n, (runs, at) in self._runs.items()},
                "look_scales": [list(i) for i in identities]}

    def restore(self, state: dict[str, Any], identities: Sequence[tuple[Any, ...]]) -> None:
        """The snapshot's counters, each on the scale judged the same way now (``identities``, per scale: a restart
        with another window or level starts that scale's counting afresh, as does a snapshot from before the
        identities were kept)."""
        saved = [tuple(i) for i in state.get("look_scales", [])]
        where = [saved.index(i) if i in saved else None for i in identities]
        self._runs = {}
        for node, (runs, at) in state.get("looks", {}).items():
            kept = [0 if j is None or j >= len(runs) else int(runs[j]) for j in where]
            if any(kept):
                self._runs[node] = (kept, int(at))


def waiting_words(scale: Scale, runs: int, needed: int, period_us: int | None, warmup_us: int) -> str:
    """The words for a node that passed ``runs`` consecutive looks over ``scale``, which lists after ``needed``."""
    if runs >= needed:
        return (f"passed {runs} consecutive looks over {scale.label}, not listed in the first "
                f"{warmup_us / MINUTE_US:g} min of what the detector watched (warm-up)")
    once = "" if scale.at_once is None else f" or at once at z {scale.at_once:g} against the spread"
    repeat = needed * max(period_us or 0, scale.every_us or 0)
    return (f"passed {runs} of {needed} looks over {scale.label}; listed after {needed} in a row "
            f"({repeat / MINUTE_US:g} min of event time){once}")
