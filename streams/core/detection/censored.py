"""Censored normal scores: how far each task of a job runs behind its siblings, finished or still running.

A task's time is only comparable with its own job's (job sizes differ by orders of magnitude), and a task still
running is evidence too: it has already outlasted some of its siblings. Per job, at the ranking boundary ``B``:

1. the job's survival curve ``S(t)`` of task durations by Kaplan-Meier, finished tasks as events, running tasks
   censored at their elapsed time (``scipy.stats.ecdf`` computes it; here it is vectorised over all jobs at
   once, the same product-limit formula, because the detector needs it for hundreds of jobs every period);
2. a finished task's normal score ``y = Phi^-1(1 - S(d))`` (mid-step: its rank among its siblings as a
   standard normal quantile, whatever the duration distribution);
3. every task's *censoring point* ``c = Phi^-1(1 - S(B - start))``: the score above which it would still be
   running at ``B`` (a task whose progress report projects its duration scores as finished then, and is censored
   at its projected time, past ``B - start``: no known task's score lies above its censoring point). A task still
   running contributes ``E[y | y > c] = phi(c) / (1 - Phi(c))`` (the inverse Mills ratio), a finished one its ``y``;
   either way the contribution has mean 0 and variance ``V(c) = Phi(c) - c phi(c) + phi(c)^2 / (1 - Phi(c))`` on a
   healthy node (the score test of a shift in a censored normal model, Tobit). A task that has just started carries
   no information (``V = 0``), one long past its job's durations carries almost a finished task's (``V -> 1``).

Summed over a node's tasks, ``sum(x) / sqrt(sum(v))`` is standard normal on a healthy node, and
``sum(x) / sum(v)`` estimates how many job standard deviations (normal-score units) its tasks run behind.
Scores are ranks, so one enormous task counts no more than "the slowest of its job".

>>> import numpy as np
>>> jobs = np.array([0, 0, 0, 0, 0, 0])
>>> starts = np.array([0, 0, 0, 0, 5, 43], dtype=np.int64)
>>> times = np.array([10, 11, 12, 13, 40, 2], dtype=np.int64)  # the last two still running at B = 45
>>> finished = np.array([True, True, True, True, False, False])
>>> x, v, past = task_scores(jobs, starts, times, finished, boundary_us=45)
>>> [round(float(a), 2) for a in x]  # the one running 40 (past every sibling) counts, the one running 2 not
[-1.28, -0.52, -0.0, 0.52, 1.4, 0.0]
>>> [round(float(a), 2) for a in v], past.tolist()
([0.96, 0.96, 0.96, 0.96, 0.96, 0.0], [False, False, False, False, True, False])
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy import optimize, special

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_CLIP = 8.0  # normal quantiles beyond +-8 are numerically 0/1
_TIME_BITS = 42  # elapsed times up to 2^42 us (50 days) in one sortable key with the job index
_JOB_BITS = 62 - _TIME_BITS  # job indices below 2^20 fit beside a time and a flag in one int64 key


def task_scores(jobs: IntArray, starts: IntArray, times: IntArray, finished: BoolArray,
                boundary_us: int) -> tuple[FloatArray, FloatArray, BoolArray]:
    """Per task: its contribution ``x``, its null variance ``v`` and whether it is still running past its
    job's median (see the module text). ``jobs`` are dense job indices; ``times`` durations (finished) or
    elapsed times at ``boundary_us`` (running); ``starts`` start times. Job indices too large to pack into the
    sort and lookup keys are renumbered in the same order (the same scores), and more jobs than a key holds are
    scored a range of jobs at a time (each job's scores are its own)."""
    n = len(jobs)
    if n == 0:
        empty = np.zeros(0)
        return empty, empty, np.zeros(0, dtype=bool)
    jobs, finished = np.asarray(jobs, dtype=np.int64), np.asarray(finished, dtype=bool)
    if int(jobs.max()) >= 1 << _JOB_BITS or int(jobs.min()) < 0:
        # The task table's codes grow until it compacts: at 100 k nodes they passed 2^20, and from 2^21 on the
        # lookup keys overflowed (wrong scores, silently) before session 18.
        jobs = np.unique(jobs, return_inverse=True)[1].reshape(-1).astype(np.int64)
        if int(jobs.max()) >= 1 << _JOB_BITS:
            return _by_job_ranges(jobs, starts, times, finished, boundary_us)
    times = np.clip(times, 0, (1 << _TIME_BITS) - 1)  # a longer time would spill into the job bits of the key
    # Each temporary is let go once used (``del``): a period holds every task of the last four hours, and at 10 k
    # nodes the scoring's temporaries were the detector's peak memory (issue 18, session 19). The same operations
    # in the same order: the same bits.
    order = _by_job_then_time(jobs, times, finished)
    sj, st, se = jobs[order], times[order], finished[order]
    first = np.ones(n, dtype=bool)
    first[1:] = sj[1:] != sj[:-1]
    group_start = np.maximum.accumulate(np.where(first, np.arange(n), 0))
    group_size = np.bincount(sj, minlength=int(sj.max()) + 1)[sj]
    at_risk = group_size - (np.arange(n) - group_start)
    del group_size
    factor = np.where(se, 1.0 - 1.0 / at_risk, 1.0)
    del at_risk
    cum = np.cumsum(np.log(np.maximum(factor, 1e-300)))
    before_group = np.where(group_start > 0, cum[np.maximum(group_start - 1, 0)], 0.0)
    survival_after = np.exp(cum - before_group)
    del cum, before_group
    survival_after[np.isclose(factor, 0.0)] = 0.0
    del factor
    survival_before = np.where(first, 1.0, np.roll(survival_after, 1))
    del first
    # Survival at each task's potential elapsed time B - start (its censoring point), looked up in its job. A known
    # task's is at or past its own time: a finished task's time is within B - start anyway, and a projected one
    # (``finished`` but still running) scores as if it had ended then, so it carries that task's information. At
    # B - start its score would lie above its censoring point, with no information where no sibling has ended yet
    # (survival 1 there: V 4e-14 against a score of O(1), a node's effect 1e13 job std; session 14).
    keys = (sj << _TIME_BITS) | st
    elapsed = np.maximum(boundary_us - starts[order], 0)
    elapsed = np.minimum(np.where(se, np.maximum(elapsed, st), elapsed), (1 << _TIME_BITS) - 1)
    del st
    where = np.searchsorted(keys, (sj << _TIME_BITS) | elapsed, side="right") - 1
    del keys, elapsed, sj
    inside = (where >= group_start) & (where >= 0)
    del group_start
    s_censor = np.where(inside, survival_after[np.maximum(where, 0)], 1.0)
    del inside, where
    c = np.clip(special.ndtri(np.clip(1.0 - s_censor, 0.0, 1.0)), -_CLIP, _CLIP)
    del s_censor
    log_pdf = _log_pdf(c)
    mills = np.exp(log_pdf - special.log_ndtr(-c))
    pdf = np.exp(log_pdf)
    del log_pdf
    variance = special.ndtr(c) - c * pdf + pdf * mills
    del c, pdf
    y = np.clip(special.ndtri(np.clip(1.0 - (survival_before + survival_after) / 2, 0.0, 1.0)), -_CLIP, _CLIP)
    del survival_before
    x = np.where(se, y, mills)
    del y, mills
    past_median = ~se & (survival_after < 0.5)
    del survival_after, se
    out_x, out_v, out_past = np.empty(n), np.empty(n), np.empty(n, dtype=bool)
    out_x[order], out_v[order], out_past[order] = x, np.clip(variance, 0.0, 1.0), past_median
    return out_x, out_v, out_past


def _by_job_then_time(jobs: IntArray, times: IntArray, finished: BoolArray) -> IntArray:
    """The tasks sorted by job, then time, events before censorings at a tie (the product-limit convention), then
    as given: one stable sort of a single int64 key (job, time, running), the order ``np.lexsort((~finished, times,
    jobs))`` gives, 2.5-15x faster (this sort was half of the detector's period at 5 k nodes; issue 18, session 18).
    ``jobs``: int64 in [0, 2^_JOB_BITS); ``times``: int64 within ``_TIME_BITS``; ``finished``: bool.

    >>> jobs, times = np.array([1, 0, 1, 0]), np.array([5, 7, 5, 2])
    >>> _by_job_then_time(jobs, times, np.array([False, True, True, True])).tolist()
    [3, 1, 2, 0]
    """
    order: IntArray = np.argsort((jobs << (_TIME_BITS + 1)) | (times << 1) | (~finished), kind="stable")
    return order


def _by_job_ranges(jobs: IntArray, starts: IntArray, times: IntArray, finished: BoolArray,
                   boundary_us: int) -> tuple[FloatArray, FloatArray, BoolArray]:
    """``task_scores`` of dense job indices past what one key holds, 2^_JOB_BITS jobs at a time."""
    x, v, past = np.empty(len(jobs)), np.empty(len(jobs)), np.empty(len(jobs), dtype=bool)
    chunk = jobs >> _JOB_BITS
    for k in np.unique(chunk).tolist():
        at = np.flatnonzero(chunk == k)
        x[at], v[at], past[at] = task_scores(jobs[at] - (k << _JOB_BITS), starts[at], times[at], finished[at],
                                             boundary_us)
    return x, v, past


LOG_RATIO_CLIP = math.log(4.0)  # one task counts as at most 4x (or 1/4x) its job's median: one outlier is no node


def log_ratios(jobs: IntArray, times: IntArray, known: BoolArray, x: FloatArray) -> FloatArray:
    """Per task, how much longer (log) it runs than its job's median task: a finished (or projected) task its log
    duration less its job's median log duration, clipped at ``LOG_RATIO_CLIP``; a running task its contribution ``x``
    (``task_scores``: the normal score it is expected to exceed) times its job's spread of log duration. Summed over a
    node's tasks and divided by their information this is the node's slowdown in log duration (``Tally.ratio``).

    Each job's median and spread are a normal probability plot's line through its known tasks: log duration against
    normal score, whose scores come from the job's survival curve, so the tasks still running bend neither (a mean
    and standard deviation of the finished tasks would describe the job's short tasks only). A job with fewer than 3
    known tasks, or no spread of scores, takes the median slope of the jobs that have one and the intercept that
    slope gives it. Why not the score times the spread throughout: a normal score is a rank, and where a job's tasks
    are alike a slow node's tasks are all its job's slowest, so the score saturates (at a spread of 0.05 a 1.5x node
    would read 1.1x); a measured duration does not (issue 21, h58).

    >>> jobs = np.array([0, 0, 0, 0, 1, 1])
    >>> times = np.array([10, 20, 40, 80, 5, 6], dtype=np.int64)
    >>> known = np.array([True, True, True, True, True, False])
    >>> x = np.array([-1.0, -0.3, 0.3, 1.0, 0.0, 0.5])  # job 0: slope 1.05 per unit score
    >>> [round(float(r), 2) for r in log_ratios(jobs, times, known, x)]  # job 1: one known task, job 0's slope
    [-1.04, -0.35, 0.35, 1.04, 0.0, 0.52]
    """
    n_jobs = int(jobs.max()) + 1 if len(jobs) else 0
    logs = np.log(np.maximum(times, 1).astype(np.float64))
    j, y, lg = jobs[known], x[known], logs[known]
    n = np.bincount(j, minlength=n_jobs).astype(np.float64)
    sy, sl = np.bincount(j, y, n_jobs), np.bincount(j, lg, n_jobs)
    syy, syl = np.bincount(j, y * y, n_jobs), np.bincount(j, y * lg, n_jobs)
    with np.errstate(divide="ignore", invalid="ignore"):
        var = syy - sy * sy / n
        slope = (syl - sy * sl / n) / var
    ok = (n >= 3) & (var > 1e-9) & np.isfinite(slope)
    slope = np.maximum(np.where(ok, slope, float(np.median(slope[ok])) if ok.any() else 0.0), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        median = np.where(n > 0, (sl - slope * sy) / n, 0.0)  # the line's log duration at score 0
    ratio = np.clip(logs - median[jobs], -LOG_RATIO_CLIP, LOG_RATIO_CLIP)
    result: FloatArray = np.where(known, ratio, slope[jobs] * x)
    return result


def _log_pdf(c: FloatArray) -> FloatArray:
    result: FloatArray = -0.5 * c * c - 0.5 * np.log(2 * np.pi)
    return result


MIN_SPREAD_NODES = 10  # fewer nodes say nothing about a cluster's spread
SPREAD_TRIM_Z = 3.0  # nodes this far from the centre (random-effects z) are suspects, not spread; see below
_SPREAD_ROUNDS = 5  # trimming settles in two or three


def node_spread(effects: FloatArray, information: FloatArray, min_nodes: int = MIN_SPREAD_NODES,
                trim_z: float = SPREAD_TRIM_Z) -> float:
    """The variance of node effects *between* nodes beyond their sampling noise (``tau^2`` of a random-effects
    model), estimated from the nodes that are not suspects. Each node's effect is standardised by its own
    ``1 / information + tau^2``, and ``tau^2`` is the value at which the median standardised distance from the
    median is the normal's (so nodes with little information weigh as little as they should; subtracting a median
    standard error from the MAD is biased upward when information differs). Nodes whose standardised distance
    is ``trim_z`` or more are left out and the rest estimated again, the normal's median for that truncation
    used, until the kept set settles (at most 5 rounds; about 2 % of random clusters of 150 nodes were still
    moving a node or two at the edge then, and give the last round's estimate). What trimming removes is the
    inflation by nodes beyond about ``trim_z`` random-effects z from the centre: on equal hardware with 10-20 % of
    nodes 0.6 job std slow (a 1.3x node over three windows), tau 0.024-0.026 trimmed, 0.052-0.091 untrimmed,
    0.022-0.023 from the healthy nodes alone (40 clusters of 100 nodes). Moderately slow nodes stay inside and
    still inflate it: with 20 % of nodes 0.35 slow on equal hardware, 0.066 trimmed, 0.089 untrimmed, 0.023
    healthy-only; on hardware generations at -0.155, 0, +0.155 with 20 % of nodes 0.6 slow, 0.210 trimmed, 0.223
    untrimmed, 0.155 healthy-only (150 nodes). Equal nodes give about 0; healthy hardware of several speeds at
    least the spread of their true effects. Not DerSimonian-Laird (statsmodels' ``combine_effects``):
    its moment estimate takes the slow nodes' effects as spread.

    >>> rng = np.random.default_rng(1)
    >>> info = np.full(300, 100.0)
    >>> equal = rng.normal(0.0, 0.1, 300)  # standard error 0.1, no spread between nodes
    >>> wide = np.repeat([-0.2, 0.0, 0.2], 100) + rng.normal(0.0, 0.1, 300)
    >>> round(node_spread(equal, info), 3), 0.12 < node_spread(wide, info) ** 0.5 < 0.22  # true: 0.16
    (0.0, True)
    >>> slow = np.where(np.arange(300) < 45, 1.4, 0.0) + rng.normal(0.0, 0.1, 300)  # 15 % of nodes 2x slow
    >>> round(node_spread(slow, info), 3), round(node_spread(slow, info, trim_z=math.inf) ** 0.5, 2)
    (0.0, 0.09)
    """
    effects, noise = _usable(effects, information)
    if len(effects) < max(min_nodes, 1):
        return 0.0
    tau2 = _trimmed_spread(effects, noise, max(min_nodes, 1), trim_z)
    return tau2 if math.isfinite(tau2) else 0.0


def _trimmed_spread(effects: FloatArray, noise: FloatArray, min_nodes: int, trim_z: float) -> float:
    """``node_spread``'s rounds: estimate, leave out the nodes ``trim_z`` or more from the centre, again, for at
    most ``_SPREAD_ROUNDS``. A kept set that comes back (a node or two at the edge in and out, round after round)
    gives the estimate from the most nodes among the sets it alternates between."""
    keep = np.ones(len(effects), dtype=bool)
    center, tau2 = _standardised_spread(effects, noise, math.inf)
    seen: list[tuple[BoolArray, float]] = []
    for _ in range(_SPREAD_ROUNDS if math.isfinite(trim_z) else 0):
        kept = np.abs(effects - center) < trim_z * np.sqrt(noise + tau2)
        if kept.sum() < min_nodes or np.array_equal(kept, keep):
            break
        back = next((i for i, (k, _) in enumerate(seen) if np.array_equal(k, kept)), None)
        if back is not None:
            return max(seen[back:], key=lambda s: int(s[0].sum()))[1]
        keep = kept
        center, tau2 = _standardised_spread(effects[keep], noise[keep], trim_z)
        seen.append((keep, tau2))
    return tau2


def _usable(effects: FloatArray, information: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The effects and sampling variances (``1 / information``) of the nodes that can say anything: a node with
    a non-finite effect or information, or information 0 or less, is left out rather than stopping the ranking."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        effects = np.asarray(effects, dtype=np.float64)
        information = np.asarray(information, dtype=np.float64)
        ok = np.isfinite(effects) & np.isfinite(information) & (information > 0)
        noise = 1.0 / information[ok]
    return effects[ok], noise


def _standardised_spread(effects: FloatArray, noise: FloatArray, trim_z: float) -> tuple[float, float]:
    """The median and the ``tau^2 >= 0`` at which ``|effect - median| / sqrt(noise + tau^2)`` has the median of
    ``|Z|`` for a standard normal ``Z`` cut at ``+-trim_z`` (0.674 uncut)."""
    center = float(np.median(effects))
    distance = np.abs(effects - center)
    target = float(special.ndtri((special.ndtr(trim_z) + 0.5) / 2))

    def excess(tau2: float) -> float:
        return float(np.median(distance / np.sqrt(noise + tau2))) - target

    at_zero = excess(0.0)
    if not at_zero > 0.0:  # no spread beyond the noise, or nothing measurable (NaN)
        return center, 0.0
    upper = float(distance.max() / target) ** 2  # every standardised distance is at most the target there
    return center, float(optimize.brentq(excess, 0.0, upper, xtol=1e-6))
