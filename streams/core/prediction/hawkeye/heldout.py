"""The held-out protocol for Hawkeye's parameters: choose on some jobs, report on others.

``replay`` makes one causal pass over a trace (events in time order): Hawkeye's host learning runs once,
and beside it every (quantile, multiplier) arm of Hawkeye and of Spark's rule flags in the shadow; when a
job ends, the simulator (``RewardModel``) replays it for every arm. That table (job x arm -> JCT cut) is
what the learners are trained on and scored with:

* ``leave_one_out``: for each job, ``hawkeye-adaptive``'s chooser learns from the other jobs only and picks
  a pair for the held-out job from its context; the "best fixed Spark pair" is the Spark arm with the best
  mean cut over the same other jobs. Both are then scored on the held-out job.
* ``split``: the same with one set of training jobs (e.g. other seeds of the synthetic cluster) and one of
  test jobs; the chooser is frozen after training.

Host evidence flows forward in time only (the pass is causal); only the arm choice is held out.

"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streams.core.events import Event, StragglerPrediction, TaskCheckpoint
from streams.core.prediction.baselines import SpeculationJob
from streams.core.prediction.hawkeye.adaptive import ARMS, DEFAULT, ArmChooser, ArmOutcome, RewardModel, context
from streams.core.prediction.hawkeye.ledger import JobLedger
from streams.core.prediction.hawkeye.method import HostLearning, Rule, assess

HAWKEYE, SPARK = "hawkeye:", "spark:"


@dataclass(frozen=True)
class JobArms:
    """One ended job: its context and every arm's simulated outcome (keys ``hawkeye:q..`` and ``spark:q..``)."""

    job_id: str
    n_tasks: int
    features: dict[str, float]
    outcomes: dict[str, ArmOutcome]

    def cut(self, arm: str) -> float:
        return self.outcomes[arm].cut if arm in self.outcomes else 0.0


@dataclass
class _Shadow:
    ledger: JobLedger
    spark: dict[str, SpeculationJob]
    events: list[Event] = field(default_factory=list)
    flags: dict[str, dict[str, float]] = field(default_factory=dict)


def replay(events: Iterable[Event], rewards: RewardModel, arms: Sequence[Rule] = ARMS) -> list[JobArms]:
    """Every arm of Hawkeye and Spark on every job of a time-ordered stream (module doc)."""
    hosts = HostLearning()
    jobs: dict[str, _Shadow] = {}
    result: list[JobArms] = []
    for event in events:
        shadow = jobs.get(event.job_id)
        if shadow is None:
            spark = {f"{SPARK}{r.name}": SpeculationJob(r.quantile, r.multiplier) for r in arms}
            shadow = jobs[event.job_id] = _Shadow(hosts.ledger(event.job_id), spark)
        shadow.events.append(event)
        if isinstance(event, TaskCheckpoint) and event.task_id not in shadow.ledger.finished:
            _hawkeye_flags(hosts, shadow, event, arms)
        for name, rule in shadow.spark.items():
            for flag in _spark_step(rule, event):
                shadow.flags.setdefault(name, {}).setdefault(flag.task_id, flag.ts_us / 1e6)
        ended = hosts.learn(event)
        if ended is not None:
            del jobs[event.job_id]
            names = [f"{HAWKEYE}{r.name}" for r in arms] + list(shadow.spark)
            flags = {name: shadow.flags.get(name, {}) for name in names}
            outcomes = rewards.outcomes(event.job_id, shadow.events, flags)
            if outcomes:
                result.append(JobArms(event.job_id, len(ended.finished), context(ended), outcomes))
    return result


def _spark_step(rule: SpeculationJob, event: Event) -> list[StragglerPrediction]:
    """Spark's rule on one event, predict before learn (or its fused ``observe`` before the split of #14)."""
    observe = getattr(rule, "observe", None)
    if observe is not None:
        return list(observe(event))
    flag = rule.predict(event) if isinstance(event, TaskCheckpoint) else None  # type: ignore[attr-defined,unused-ignore]
    rule.learn(event)  # type: ignore[attr-defined,unused-ignore]
    return [] if flag is None else [flag]


def _hawkeye_flags(hosts: HostLearning, shadow: _Shadow, event: TaskCheckpoint, arms: Sequence[Rule]) -> None:
    seen = assess(hosts.book, shadow.ledger, event)
    if seen is None:
        return
    for rule in arms:
        flags = shadow.flags.setdefault(f"{HAWKEYE}{rule.name}", {})
        if event.task_id not in flags and rule.reason(shadow.ledger, seen) is not None:
            flags[event.task_id] = event.ts_us / 1e6


def best_fixed(jobs: Sequence[JobArms], prefix: str) -> str:
    """The arm with ``prefix`` whose mean cut over ``jobs`` is highest (ties: the first in order)."""
    names = [name for name in jobs[0].outcomes if name.startswith(prefix)]
    return max(names, key=lambda name: statistics.fmean(job.cut(name) for job in jobs))


def trained(jobs: Sequence[JobArms], seed: int = 0) -> ArmChooser:
    """A chooser that learned from ``jobs`` (their Hawkeye arms' cuts), in order."""
    chooser = ArmChooser(seed=seed)
    for job in jobs:
        cuts = {name.removeprefix(HAWKEYE): o.cut for name, o in job.outcomes.items() if name.startswith(HAWKEYE)}
        chooser.learn(job.features, cuts)
    return chooser


def score(test: JobArms, chooser: ArmChooser, spark_arm: str) -> dict[str, Any]:
    """One held-out row: the adaptive pick, the trained Spark pair, and the fixed references."""
    pick = f"{HAWKEYE}{chooser.choose(test.features).name}"
    row: dict[str, Any] = {"job_id": test.job_id, "n_tasks": test.n_tasks, "adaptive_arm": pick,
                           "spark_arm": spark_arm}  # fmt: skip
    references = {
        "hawkeye-adaptive": pick, "spark-best-on-train": spark_arm, "hawkeye": f"{HAWKEYE}{DEFAULT.name}",
        "spark-q0.75-m1.5": f"{SPARK}q0.75-m1.5", "spark-q0.9-m3": f"{SPARK}q0.9-m3",
    }  # fmt: skip
    for label, arm in references.items():
        outcome = test.outcomes.get(arm)
        row[label] = None if outcome is None else _outcome(outcome)
    return row


def _outcome(outcome: ArmOutcome) -> dict[str, Any]:
    return {"cut": outcome.cut, "wasted_s": outcome.wasted_s, "relaunches": outcome.relaunches,
            "success": outcome.success}  # fmt: skip


def leave_one_out(jobs: Sequence[JobArms], seed: int = 0) -> list[dict[str, Any]]:
    """Each job scored with a pair chosen on the other jobs only (module doc)."""
    rows = []
    for i, test in enumerate(jobs):
        train = [job for j, job in enumerate(jobs) if j != i]
        if train:
            rows.append(score(test, trained(train, seed), best_fixed(train, SPARK)))
    return rows


def split(train: Sequence[JobArms], test: Sequence[JobArms], seed: int = 0) -> list[dict[str, Any]]:
    """Test jobs scored with a chooser and a Spark pair chosen on the training jobs only."""
    chooser, spark_arm = trained(train, seed), best_fixed(train, SPARK)
    return [score(job, chooser, spark_arm) for job in test]


def means(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Mean cut and wasted machine time per job of each reference over the rows."""
    labels = ("hawkeye-adaptive", "spark-best-on-train", "hawkeye", "spark-q0.75-m1.5", "spark-q0.9-m3")
    summary = {}
    for label in labels:
        present = [row[label] for row in rows if row.get(label) is not None]
        if present:
            summary[label] = {"mean_cut": statistics.fmean(p["cut"] for p in present),
                              "wasted_s_per_job": statistics.fmean(p["wasted_s"] for p in present),
                              "jobs": len(present)}  # fmt: skip
    return summary
