"""The running-task detector: evidence from every task a node started, finished or still running (issue 21).

Finished-task z-values come late: a node that turned 2x slow shows it only once its slow tasks end, and their
jobs end. This detector watches the task events themselves (``observe``: starts and finishes, in event time)
and, at every ranking boundary, scores each task against its own job's siblings with censored normal scores
(``streams.core.detection.censored``): a task still running long past its job's finished durations is
evidence at once, a task that has just started is none. Per node and per ``Scale`` (tasks started in the last
``window_us``), the sums give a standard-normal statistic ``z`` on a healthy node and an *effect*: how many
job standard deviations its tasks run behind (0 on a healthy node, about +0.5 at 1.3x, +1.4 at 2x for this
spread of task times).

A node is *clearly slow* over a scale when ``z >= z_list`` (a strict level, per scale if it says so: a 100-node
cluster is looked at tens of thousands of times a day) and its effect is at least ``min_effect`` (a robust effect
size: slightly slower healthy hardware is significant over hours but small), with at least ``min_tasks`` tasks.
A scale with ``repeat_us`` lists only once the node's consecutive passing looks cover that much event time
(``Scale.looks_needed``: 3 looks for 3 minutes at a 1-minute period, 1 at a 5-minute one), or at once where its z
against the cluster's spread of node effects also reaches the scale's ``at_once`` (on heterogeneous hardware a
healthy node's lucky high passes once; ``Scale``). It is a suspect after
``persistence`` periods in a row, never in the first ``warmup_us`` of what it watched (a cold start sees young
jobs only). Once a suspect, its effect is remembered and it stays *still slow* until
it has *recovered*: some scale with at least ``release_tasks`` tasks shows an effect clearly (``z_release``
standard errors) below ``recovery_ratio`` times the one it was found with. A node that started no
task for ``quiet_us`` and runs none (the scheduler honours the list) is forgotten, its old tasks with it, and
left to the decision layer's "no recent evidence"; it gets new tasks and is judged afresh.

A checkpoint with a ``progress`` feature (at least ``min_progress``) projects its running task's duration; the
task then scores as if it had ended then (at least as long as it has run), so a node whose tasks progress at half
their siblings' rate shows it before they end. With ``recent_rate`` (the default) the rest of the task is
projected at its rate since its previous report (``elapsed + (1 - progress) / rate``), not its mean rate since it
started (``elapsed / progress``): a task that slows down when its node does shows the change at its next report,
against its own earlier progress, instead of having it diluted by the healthy part of its run.

Events are buffered and applied in event-time order at the boundary (``streams.core.detection.task_log``), so the
evidence at ``B`` is the tasks started before ``B`` whatever the arrival order (as long as every event before ``B``
arrived).

>>> from streams.core.events import Status, TaskFinish, TaskStart
>>> MIN = 60_000_000
>>> det = RunningTaskDetector((Scale(15 * MIN), Scale(60 * MIN)), z_list=4.0)
>>> import random
>>> rng, found_at = random.Random(1), None
>>> for minute in range(120):  # 20 nodes, one 3-minute-ish task a minute each; n0 turns 3x slow at minute 60
...     for k in range(20):
...         node, job = f"n{k}", f"j{minute // 3}"
...         slow = 3.0 if node == "n0" and minute >= 60 else 1.0
...         start = minute * MIN + k
...         det.observe(TaskStart(job, f"{minute}-{k}", 0, node, start))
...         duration = round(rng.lognormvariate(0, 0.5) * 3 * MIN * slow)
...         det.observe(TaskFinish(job, f"{minute}-{k}", 0, node, start + duration, duration, Status.SUCCEEDED))
...     if (minute + 1) % 5 == 0:
...         evidence = det.detect(WindowView(0, (minute + 1) * MIN, {}))
...         if found_at is None and evidence["n0"].suspect:
...             found_at = minute + 1
>>> found_at, [node for node, e in evidence.items() if e.suspect]
(75, ['n0'])
>>> evidence["n0"].reason.split(" for ")[0]
'clearly slow over 15 min'
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from streams.core.detection.base import Evidence, WindowView
from streams.core.detection.censored import log_ratios, node_spread, task_scores
from streams.core.detection.columns import Columns, PlainReuse, plain_evidence, plain_words, scale_columns, tallies_at
from streams.core.detection.looks import PassingLooks, look_identity
from streams.core.detection.node_codes import CodeSet, NameOrder, by_code
from streams.core.detection.scales import MINUTE_US, Scale, Tally, _tasks, _why, _z, looks_at
from streams.core.detection.task_log import TaskLog
from streams.core.detection.task_table import DROPPED as _DROPPED
from streams.core.detection.task_table import IntArray
from streams.core.events import Event, NormalizedTask

SNAPSHOT_VERSION = 2


class RunningTaskDetector:
    """Suspect nodes whose started tasks, finished or running, run clearly behind their jobs' siblings;
    hold them until they recovered (see the module text)."""

    name = "running"
    # ``learn`` uses nothing; the ranking's window statistics (NodeScores, the cap's count of nodes) then come from
    # the partitions' summaries, provisional values included, as under pcores: no sample crosses one by one, and a
    # source without job ends loses no value to its idle timeout (session 17).
    learns_from_samples = False
    # It judges the nodes with a task started over its longest scale (and its suspects): nodes of the cluster that
    # may have no sample in the window yet, such as one released a moment ago after an hour on a closed loop's
    # list. The cap counts them (``base.judges_recent_nodes``; issue 21, session 26).
    judges_recent_nodes = True

    def __init__(self, scales: Sequence[Scale], z_list: float = 5.0, min_effect: float = 0.3,
                 min_tasks: int = 5, persistence: int = 1, recovery_ratio: float = 0.5, z_release: float = 1.5,
                 min_job_tasks: int = 4, quiet_us: int = 60 * MINUTE_US, warmup_us: int = 0,
                 release_tasks: int | None = None, min_progress: float = 0.1, recent_rate: bool = True,
                 period_us: int | None = None, release_information: float = 0.0, min_ratio: float = 1.0) -> None:
        if not scales:
            raise ValueError("the running-task detector needs at least one scale")
        self.scales = tuple(sorted(scales, key=lambda s: (s.window_us, s.min_effect or 0.0, s.z or 0.0)))
        self.z_list, self.min_effect, self.min_tasks = z_list, min_effect, min_tasks
        self.persistence, self.recovery_ratio, self.z_release = persistence, recovery_ratio, z_release
        self.min_job_tasks, self.quiet_us, self.warmup_us = min_job_tasks, quiet_us, warmup_us
        self.release_tasks = min_tasks if release_tasks is None else release_tasks  # a scale judging recovery
        self.release_information = release_information  # ... and its information (finished tasks' worth)
        self.period_us = period_us  # boundaries this far apart (None: unknown); see ``looks_at``
        self.min_ratio = min_ratio  # a passing look's tasks run at least this many times their siblings' durations
        self.memory_us = self.scales[-1].window_us + quiet_us  # older tasks of recent jobs shape their curves
        # the task events, applied in event-time order; nothing is listed before warmup_us after its first
        self._log = TaskLog(min_progress, recent_rate)
        self._since: dict[str, int] = {}  # tasks of the node started before this are forgotten
        self._streak: dict[str, tuple[int, int]] = {}
        # a scale with ``repeat_us`` lists only after ``looks.needed`` consecutive passing looks
        self._looks = PassingLooks(self.scales, period_us)
        self._effect: dict[str, float] = {}  # suspects not yet recovered -> the effect they were found with
        self._found: dict[str, int] = {}  # suspects not yet recovered -> the boundary they were found at
        # A cache, not state: each plain node's last numbers and the Evidence made of them, by node code in the
        # task table's names (valid while that list is the same object: a compaction renumbers), given again while
        # the numbers are equal (on Google 2011 about half the nodes a period): no Evidence or words made for them
        # (alone ~7 % of the in-process CPU on Google's first 300 k events, A B B A). Empty after a restore.
        self._plain_cache = PlainReuse()
        self._order = NameOrder()  # a cache too: the task table's node codes in name order

    def learn(self, sample: NormalizedTask) -> None:
        return None  # the task events (``observe``) carry everything this detector uses

    def observe(self, event: Event) -> None:
        """A task event (start, finish, or a checkpoint with a ``progress`` feature; job events are ignored),
        any order within a period."""
        self._log.observe(event)

    def observe_row(self, ts: int, kind: int, job: str, task: str, node: str, value: int, ppm: int) -> None:
        """``observe`` of the event a row stands for (``streams.core.task_rows``): what a Kafka worker's ranking
        is sent."""
        self._log.observe_row(ts, kind, job, task, node, value, ppm)

    def detect(self, window: WindowView) -> Mapping[str, Evidence]:
        end = window.end_us
        self._log.apply_before(end)
        quiet: list[str] = []
        names, kept, columns = self._columns(end, quiet)
        cols = [tuple(column[kept] for column in scale_columns) for scale_columns in columns]
        info = cols[-1][4] if cols else np.zeros(0)
        longest = (cols[-1][0] >= self.min_tasks) & (info > 0) if cols else np.zeros(0, dtype=bool)
        # Estimated at most once per period end, and only when a spread-using scale looks at a node it could list
        # (the 180-minute scale every 5 minutes): it costs a few ms on thousands of nodes.
        spread = functools.cache(lambda: node_spread(cols[-1][3][longest] / info[longest], info[longest]))
        # no usable task this look: no run (a forgotten node has none either, so this clears its counters too)
        judged = np.zeros(len(names), dtype=bool)
        judged[kept] = True
        self._looks.keep_only(CodeSet(self._log.table.node_code, judged))
        plain, numbers = self._plain(kept, cols)
        same, earlier, made = self._reusable(names, kept, plain, numbers)
        # The judged nodes in name order (their evidence is made, and their new keys of state go in, in that order):
        # the plain ones' Evidence at once, last period's where the numbers are equal; the others' one by one.
        codes, nodes = self._order.judged(names, judged)
        at = np.searchsorted(kept, codes)  # each one's index in ``kept``
        values, reuse, fresh = np.empty(len(codes), dtype=object), same[at], plain[at] & ~same[at]
        values[reuse] = earlier[codes[reuse]]
        values[fresh] = np.fromiter(plain_evidence(nodes[fresh].tolist(), numbers[at[fresh]]), dtype=object,
                                    count=int(fresh.sum()))
        made[codes[plain[at]]] = values[plain[at]]
        in_order, plain_streak, after = nodes.tolist(), (0, end), 0
        for k in [*np.flatnonzero(~plain[at]).tolist(), len(in_order)]:
            self._streak.update(zip(in_order[after:k], itertools.repeat(plain_streak)))
            if k < len(in_order):
                values[k] = self._judge(in_order[k], tallies_at(columns, int(codes[k])), end, spread)
            after = k + 1
        evidence = dict(zip(in_order, values.tolist(), strict=True))
        for node in quiet:
            if node not in evidence:
                evidence[node] = Evidence(node, False, -math.inf, f"no recent evidence: no task started on it for "
                                          f"{self.quiet_us / MINUTE_US:g} min, none running; its old tasks forgotten")
        return evidence

    def _reusable(self, names: list[str], kept: npt.NDArray[np.intp], plain: npt.NDArray[np.bool_],
                  numbers: npt.NDArray[np.float64]
                  ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.object_], npt.NDArray[np.object_]]:
        """Per judged node, whether its plain Evidence of last period is still right (its numbers are equal), last
        period's Evidence by node code, and the array this period's go into (the cache from now on)."""
        return self._plain_cache.reusable(names, kept, plain, numbers)

    def _plain(self, kept: npt.NDArray[np.intp], cols: list[Columns]
               ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64]]:
        """Per judged node (by code, ``kept``), whether no scale could pass it and it carries nothing from earlier
        looks (no suspicion, no passing run, no streak): its score and words then come from the columns
        (``plain_words``: the ``numbers`` they are made of, ``plain_evidence``); False for a node ``_judge`` must
        see."""
        if not cols:
            return np.zeros(len(kept), dtype=bool), np.zeros((len(kept), 4))
        could, numbers = plain_words(cols, [self._levels(scale) for scale in self.scales], self.min_tasks)
        carrying = itertools.chain(self._effect, self._looks.nodes(),
                                   [node for node, (count, _) in self._streak.items() if count])
        codes = np.fromiter(map(self._log.table.node_code.get, carrying, itertools.repeat(-1)), dtype=np.intp)
        where = np.full(len(self._log.table.node_names), -1, dtype=np.intp)
        where[kept] = np.arange(len(kept))
        at = where[codes[codes >= 0]]
        could[at[at >= 0]] = True
        return ~could, numbers

    # --- state ------------------------------------------------------------------------------------------------

    def _forget(self, end: int, nodes: IntArray, starts: IntArray, durations: IntArray, quiet: list[str]) -> None:
        """Nodes that started no task for ``quiet_us`` and run none are forgotten with their old tasks."""
        table = self._log.table
        busy = np.bincount(nodes[(starts >= end - self.quiet_us) | (durations == -1)], minlength=len(table.node_names))
        # the nodes with state (a streak or a suspicion) not in the table, or idle in it: set operations, no loop
        watched = self._effect.keys() | self._streak.keys()
        idle = watched - table.node_code.keys()
        idle |= watched.intersection([table.node_names[c] for c in np.flatnonzero(busy == 0).tolist()])
        for node in sorted(idle):  # in name order: a set's order changed with PYTHONHASHSEED (checkpoints too)
            if node in self._effect:
                quiet.append(node)
            self._since[node] = end
            self._effect.pop(node, None)
            self._found.pop(node, None)
            self._streak.pop(node, None)
        for node in [node for node, since in self._since.items() if since < end - self.memory_us]:
            del self._since[node]

    def _tally(self, end: int, quiet: list[str]) -> dict[str, list[Tally]]:
        """Per node judged at ``end``, its tally over every scale (``_columns``; for tools and tests: ``detect``
        builds them only for nodes a scale could pass)."""
        names, kept, columns = self._columns(end, quiet)
        return {names[i]: tallies_at(columns, i) for i in kept.tolist()}

    def _columns(self, end: int, quiet: list[str]) -> tuple[list[str], npt.NDArray[np.intp], list[Columns]]:
        """The node names, the indices of those judged at ``end`` (a task started over the longest scale, or a
        suspect), and per scale the columns of every node's tally: tasks, running, past their job's median, the
        sums of contributions, of null variances and of log ratios (``Tally``)."""
        self._log.compact(end - self.memory_us, end - 4 * self.memory_us)
        table = self._log.table
        jobs, nodes, starts, durations = table.views()  # nothing is put until the next boundary
        self._forget(end, nodes, starts, durations, quiet)
        projected = table.column(self._log.projected)
        keep = (starts < end) & (durations != _DROPPED)
        jobs, nodes, starts, durations, projected = (jobs[keep], nodes[keep], starts[keep], durations[keep],
                                                     projected[keep])
        if not len(jobs):
            return table.node_names, np.zeros(0, dtype=np.intp), []
        finished = durations >= 0
        # A running task whose checkpoint projects its duration scores as if it had finished then (at least as
        # long as it has already run): its progress rate is evidence before it ends.
        known = finished | (projected > 0)
        times = np.where(finished, durations, np.where(projected > 0, np.maximum(projected, end - starts),
                                                       end - starts))
        del durations, projected  # the scoring's peak is the detector's (issue 18)
        x, v, past = task_scores(jobs, starts, times, known, end)
        scaled = log_ratios(jobs, times, known, x)  # contributions in log duration (``Tally.ratio``)
        names = table.node_names
        since = by_code(self._since, table.node_code, len(names), -1)  # tasks started before are forgotten
        usable = (np.bincount(jobs)[jobs] >= self.min_job_tasks) & (starts >= since[nodes])
        columns = scale_columns(nodes, starts, usable, finished, past, x, v, scaled,
                                [scale.window_us for scale in self.scales], end, len(names))
        # tasks started over the longest scale (the scales run shortest first), or a suspect
        judged = (columns[-1][0] > 0) | (by_code(dict.fromkeys(self._effect, 1), table.node_code, len(names), 0) > 0)
        return names, np.flatnonzero(judged), columns

    # --- judgement --------------------------------------------------------------------------------------------

    def _clearly_slow(self, scale: Scale, tally: Tally, spread: Callable[[], float]) -> bool:
        """Whether one look over ``scale`` passes (``_hits`` says whether the scale lists the node)."""
        z, effect = self._levels(scale)
        if tally.tasks < self.min_tasks or tally.effect < effect or tally.z < z or not self._long_enough(tally):
            return False  # the spread only ever lowers z: no need to estimate it for this node
        return _z(scale, tally, spread() if scale.spread else 0.0) >= z

    def _long_enough(self, tally: Tally) -> bool:
        """Whether the node's tasks run at least ``min_ratio`` times their siblings' durations (off at 1.0). An
        effect in job standard deviations is a small slowdown where a job's tasks are alike (issue 21: healthy
        hardware 1.1x slow is 0.45 job std at Google's spread, 0.19 at the suite's 0.5); HDFS's slow-peer detector
        and Falcon ask an absolute floor as well. An unknown ratio (NaN) never passes."""
        return self.min_ratio <= 1.0 or tally.ratio >= self.min_ratio

    def _levels(self, scale: Scale) -> tuple[float, float]:
        """The z and the effect a look over ``scale`` must reach (the detector's own where the scale sets none)."""
        return (self.z_list if scale.z is None else scale.z,
                self.min_effect if scale.min_effect is None else scale.min_effect)

    def _hits(self, node: str, tallies: list[Tally], end: int, spread: Callable[[], float]
              ) -> list[tuple[Scale, Tally, int]]:
        """The scales listing ``node`` at boundary ``end``, each with its consecutive passing looks: a look that
        passes lists at once on a scale needing 1 (``looks.needed``), otherwise only the needed-th passing look in
        a row, or one whose z against the spread reaches the scale's ``at_once``. Looks are counted in the warm-up
        too (nothing is listed then), each boundary once however often it is judged."""
        first = self._log.first_us
        warm = first is not None and end >= first + self.warmup_us
        passed = [None if scale.every_us is not None and not looks_at(end, scale.every_us, self.period_us)
                  else self._clearly_slow(scale, t, spread) for scale, t in zip(self.scales, tallies, strict=True)]
        runs, hits = self._looks.count(node, end, passed), []
        for k, (scale, t) in enumerate(zip(self.scales, tallies, strict=True)):
            if not (warm and passed[k]):
                continue
            # the spread is estimated only for a node that passed short of its repeats
            if runs[k] >= self._looks.needed[k] or (scale.at_once is not None and
                                                    t.z / math.sqrt(1.0 + spread() * t.information) >= scale.at_once):
                hits.append((scale, t, runs[k]))
        return hits

    def _judge(self, node: str, tallies: list[Tally], end: int, spread: Callable[[], float] = lambda: 0.0
               ) -> Evidence:
        """``spread``: gives the variance of node effects between healthy nodes (``node_spread``), for scales that
        ask; called only when one does."""
        hits = self._hits(node, tallies, end, spread)
        count, counted_at = self._streak.get(node, (0, -1))
        streak = count if counted_at == end else count + 1 if hits else 0
        self._streak[node] = (streak, end)
        score = max((t.effect - 2 * t.stderr for t in tallies if t.information > 0), default=-math.inf)
        effect = self._effect.get(node)
        recovered = None if effect is None else self._recover(node, tallies, end, score, effect)
        if recovered is not None:
            return recovered
        if hits and streak >= self.persistence:
            scale, t, looks = hits[0]
            needed = self._looks.needed[self.scales.index(scale)]
            if effect is None:
                self._effect[node], self._found[node] = t.effect, end
            z = self._levels(scale)[0]
            against = spread() if scale.spread or needed > 1 else 0.0  # the words say: its looks or the spread
            return Evidence(node, True, score, _why(scale, t, streak, z, against, looks, needed, self.min_ratio),
                            still_slow=True)
        if effect is not None:
            return Evidence(node, False, score, f"still slow: found {effect:+.2f} job std behind, no scale shows it "
                            f"clearly below {self.recovery_ratio * effect:+.2f} yet", still_slow=True)
        if hits:
            return Evidence(node, False, score, f"clearly slow over {hits[0][0].label} for {streak} of "
                            f"{self.persistence} periods needed")
        waiting = self._looks.waiting(node, end, self.warmup_us)
        if waiting:
            return Evidence(node, False, score, waiting)
        # a scale with no task would say "z +0.0 over 0 tasks" of a node whose other scales show it faster
        best = max((t for t in tallies if t.tasks), key=lambda t: t.z, default=tallies[0])
        return Evidence(node, False, score, f"not clearly slow: at most z {best.z:+.1f}, effect {best.effect:+.2f} "
                        f"over {best.tasks} tasks")

    def _recover(self, node: str, tallies: list[Tally], end: int, score: float, effect: float) -> Evidence | None:
        """The release of a suspect found with ``effect`` that some scale shows recovered (``_recovery_scale``),
        forgetting its suspicion, its streak and its looks, and its tasks from before that scale; None if none."""
        judged = self._recovery_scale(tallies, effect, end - self._found.get(node, end))
        if judged is None:
            return None
        scale, t = judged
        self._since[node] = end - scale.window_us
        self._streak[node] = (0, end)
        self._looks.forget(node)
        del self._effect[node]
        self._found.pop(node, None)
        return Evidence(node, False, score, f"recovered: {_tasks(t)} started in the last {scale.label} run "
                        f"{abs(t.effect):.2f} job std {'behind' if t.effect >= 0 else 'ahead of'} their jobs "
                        f"(censored scores, +-{t.stderr:.2f}), "
                        f"clearly below {self.recovery_ratio:g} x the {effect:+.2f} it was found with")

    def _recovery_scale(self, tallies: list[Tally], effect: float, listed_us: int) -> tuple[Scale, Tally] | None:
        """The shortest scale, among those holding only tasks started since the node was found (``listed_us``
        ago: older tasks are what found it), whose effect is clearly (``z_release`` standard errors) below
        ``recovery_ratio`` times the effect the node was found with."""
        for scale, t in zip(self.scales, tallies, strict=True):
            clearly_lower = t.effect + self.z_release * t.stderr < self.recovery_ratio * effect
            enough = t.tasks >= self.release_tasks and t.information >= self.release_information
            if scale.window_us <= listed_us and enough and clearly_lower:
                return scale, t
        return None

    # --- life cycle -------------------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        return {"version": SNAPSHOT_VERSION, **self._log.snapshot(),
                "since": self._since, "streak": {n: list(v) for n, v in self._streak.items()},
                **self._looks.snapshot(self._identities()),
                "effect": self._effect, "found": self._found}

    def _identities(self) -> list[tuple[Any, ...]]:
        """Per scale, what a pass over it means: a counter of passing looks carries over only to a scale with the
        same (``look_identity``)."""
        return [look_identity(s, *self._levels(s), self.min_tasks, self.min_ratio) for s in self.scales]

    def restore(self, state: dict[str, Any]) -> None:
        version = state.get("version")
        if version not in (1, SNAPSHOT_VERSION):
            raise ValueError(f"unknown running-task detector snapshot version {version!r}")
        self._log.restore(state, checkpoints=version == SNAPSHOT_VERSION)  # v1: checkpoints in another encoding
        self._since = {k: int(v) for k, v in state["since"].items()}
        self._streak = {k: (int(v[0]), int(v[1])) for k, v in state["streak"].items()}
        self._looks.restore(state, self._identities())
        self._effect = {k: float(v) for k, v in state["effect"].items()}
        self._found = {k: int(v) for k, v in state["found"].items()}
        self._plain_cache = PlainReuse()
