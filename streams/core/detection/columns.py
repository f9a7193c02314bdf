"""The running-task detector's tallies as columns, one entry per node (issue 18, session 17): every node's tally
over every scale from the scored tasks (``scale_columns``), one node's ``Tally`` objects (``tallies_at``), and the
judgement of the nodes no scale could pass (``plain_words``, ``plain_evidence``).

At every boundary a large cluster has thousands of nodes whose tallies fall short of every scale's levels; for
each, ``RunningTaskDetector._judge`` would build a ``Tally`` per scale and say "not clearly slow", with the best
z, its effect and tasks, and a score. ``plain_words`` gives the same numbers from the columns, ``plain_evidence``
the Evidence of them: the same float operations, so the same bits, and the first scale of the highest z as ``max``
picks it.

>>> import numpy as np
>>> cols = [(np.array([6, 7]), None, None, np.array([3.0, 9.0]), np.array([4.0, 1.0]), None)]
>>> could, numbers = plain_words(cols, [(4.0, 0.3)], min_tasks=5)
>>> could.tolist(), [(e.score, e.reason) for e in plain_evidence(["a"], numbers[:1])]
([False, True], [(-0.25, 'not clearly slow: at most z +1.5, effect +0.75 over 6 tasks')])

A scale holding none of a node's tasks is not its best: the words name the scale that holds them.

>>> empty = (np.array([0]), None, None, np.array([0.0]), np.array([0.0]), None)
>>> faster = (np.array([8]), None, None, np.array([-2.0]), np.array([4.0]), None)
>>> [(e.score, e.reason) for e in plain_evidence(["a"], plain_words([empty, faster], [(4.0, 0.3)] * 2, 5)[1])]
[(-1.5, 'not clearly slow: at most z -1.0, effect -0.50 over 8 tasks')]
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from streams.core.detection.base import Evidence
from streams.core.detection.scales import Tally

Columns = tuple[npt.NDArray[Any], ...]  # one scale: tasks, running, past median, sums of x, of v, of log ratios
# the node names it is for, each plain node's numbers (NaN rows for the others) and its Evidence, by node code
PlainCache = tuple[list[str], npt.NDArray[np.float64], npt.NDArray[np.object_]]


def scale_columns(nodes: npt.NDArray[Any], starts: npt.NDArray[Any], usable: npt.NDArray[np.bool_],
                  finished: npt.NDArray[np.bool_], past: npt.NDArray[np.bool_], x: npt.NDArray[Any],
                  v: npt.NDArray[Any], scaled: npt.NDArray[Any], windows: Sequence[int], end: int, m: int
                  ) -> list[Columns]:
    """Per scale (tasks started in the last ``windows[k]`` before ``end``), the columns of the ``m`` nodes'
    tallies over the ``usable`` tasks: their count, those still running, those past their job's median, and the
    sums of contributions ``x``, of null variances ``v`` and of log ratios ``scaled``."""
    out: list[Columns] = []
    for window in windows:
        mask = usable & (starts >= end - window)
        at = nodes[mask]
        out.append((np.bincount(at, minlength=m), np.bincount(nodes[mask & ~finished], minlength=m),
                    np.bincount(nodes[mask & past], minlength=m), np.bincount(at, weights=x[mask], minlength=m),
                    np.bincount(at, weights=v[mask], minlength=m),
                    np.bincount(at, weights=scaled[mask], minlength=m)))
    return out


def tallies_at(columns: Sequence[Columns], i: int) -> list[Tally]:
    """Node ``i``'s tally over every scale."""
    return [Tally(int(c[0][i]), int(c[1][i]), int(c[2][i]), float(c[3][i]), float(c[4][i]), float(c[5][i]))
            for c in columns]


def plain_words(cols: Sequence[tuple[Any, ...]], levels: Sequence[tuple[float, float]], min_tasks: int
                ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64]]:
    """``cols``: per scale, the judged nodes' columns (tasks, running, past median, sum of contributions, sum of
    null variances, sum of log ratios: ``Tally``); ``levels``: per scale, the z and effect a look must reach.
    Returns per node whether some scale could pass it (its tasks, effect and z before the spread, which only
    lowers z, all reach the scale's levels: ``_clearly_slow``'s first test), and per node the numbers its score (the
    largest effect less two standard errors) and the words ``_judge`` gives a node no scale passed are made of, a
    row each (score, z, effect, tasks: equal rows, equal score and words; ``plain_evidence``)."""
    could = np.zeros(len(cols[0][0]), dtype=bool)
    zs, picks, effects, scores = [], [], [], []
    for (tasks, _, _, total, info, _), (z_level, effect_level) in zip(cols, levels, strict=True):
        positive = info > 0
        root = np.sqrt(np.where(positive, info, 1.0))
        z = np.where(positive, total / root, 0.0)
        effect = np.where(positive, total / np.where(positive, info, 1.0), 0.0)
        could |= (tasks >= min_tasks) & (effect >= effect_level) & (z >= z_level)
        zs.append(z)
        picks.append(np.where(tasks > 0, z, -math.inf))  # a scale with no task says nothing of the node
        effects.append(effect)
        scores.append(np.where(positive, effect - 2 * (1.0 / root), -math.inf))
    z_all: npt.NDArray[np.float64] = np.stack(zs)
    # the first scale with tasks of the highest z, as max() picks it (the first scale when none has tasks)
    at = np.argmax(np.stack(picks), axis=0)
    best_of = np.arange(len(at))
    top = np.max(np.stack(scores), axis=0)
    effect_all = np.stack(effects)
    numbers = np.stack([top, z_all[at, best_of], effect_all[at, best_of],
                        np.stack([c[0] for c in cols])[at, best_of]], axis=1).astype(np.float64)
    return could, numbers


def plain_evidence(nodes: Sequence[str], numbers: npt.NDArray[np.float64]) -> list[Evidence]:
    """The Evidence of nodes no scale could pass, from their rows of ``plain_words``' numbers (made of these numbers
    and nothing else). ``%`` formats a float as an f-string's spec does; column lists, ``%`` and ``map`` make the ~5 k
    a boundary on Google 2011 a third cheaper than a comprehension over rows with f-strings (session 27)."""
    scores, zs, effects = numbers[:, 0].tolist(), numbers[:, 1].tolist(), numbers[:, 2].tolist()
    tasks = numbers[:, 3].astype(np.int64).tolist()  # counts: int() of each
    reasons = ["not clearly slow: at most z %+.1f, effect %+.2f over %d tasks" % words  # noqa: UP031 (~20 % faster)
               for words in zip(zs, effects, tasks, strict=True)]
    return list(map(Evidence, nodes, itertools.repeat(False), scores, reasons))


class PlainReuse:
    """Each plain node's last numbers and the Evidence made of them, by node code in a list of node names (a cache)."""

    def __init__(self) -> None:
        self._cache: PlainCache | None = None

    def reusable(self, names: list[str], kept: npt.NDArray[np.intp], plain: npt.NDArray[np.bool_],
                 numbers: npt.NDArray[np.float64]
                 ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.object_], npt.NDArray[np.object_]]:
        """Per judged node (``kept``: codes in ``names``), whether its plain Evidence in the cache is still right (its
        numbers are equal; a cache of another list of names is not: codes may name other nodes), the cache's Evidence
        by node code, and the array this period's go into (the cache from now on)."""
        key = np.full((len(names), 4), math.nan)
        made = np.full(len(names), None, dtype=object)
        if len(kept):
            key[kept[plain]] = numbers[plain]
        cache, self._cache = self._cache, (names, key, made)
        if cache is None or cache[0] is not names or not len(kept):
            return np.zeros(len(kept), dtype=bool), made, made
        old = cache[1]
        seen = kept < len(old)  # codes of nodes new since then have no earlier Evidence
        same = np.zeros(len(kept), dtype=bool)
        same[seen] = (old[kept[seen]] == numbers[seen]).all(axis=1)  # NaN (not plain then) is never equal
        return same & plain, cache[2], made
