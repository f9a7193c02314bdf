"""``hawkeye-adaptive``: Hawkeye with its (quantile, multiplier) chosen per job type and size from rewards.

The paper learns the pair with REINFORCE (policy gradient, its eq. 13) over a state of job type, job
size and the current pair, rewarded by the change of job completion time with a moving-average
baseline (its "differential reward"), trained for two days in simulation. Here the choice is made once
per job, when its first checkpoint arrives, so the problem is a contextual bandit: context = the job's
task type and size bucket, arm = a (quantile, multiplier) pair of ``ARMS``, reward = the cut of the
job's completion time in laggard's trace-driven simulator (speculate mode: the original keeps running,
the first to finish wins). River's ``bandit.LinUCBDisjoint`` (one Bayesian linear regression per arm on
the one-hot context, pulled by upper confidence bound) is the streaming equivalent; no gradient steps
and no episodes to tune, and its posterior says how sure it is.

Two departures, both said where they happen: (1) when a job ends, the simulator replays it for *every*
arm, because the shadow predictors of all arms ran beside the chosen one on the same checkpoints; so
every arm is updated with its counterfactual reward (full information, which a real cluster's single
run cannot give, but the simulator can). (2) The reward is made differential per job, as the paper's
baseline intends: an arm's cut minus the mean cut of all arms on that job, so that easy and hard jobs
do not drown the difference between arms. Rewards are in percentage points; the regression's prior
(weights with std 10 points, noise std 5 points) is set a priori, not tuned.

Rewards come only from jobs that have ended, so a job is never scored with a pair learned on itself
(progressive validation across jobs, as River evaluates). Until a job has ended, Spark's default pair.

>>> chooser = ArmChooser(seed=1)
>>> chooser.choose({"size=small": 1.0}).name  # nothing learned yet: Spark's default
'q0.75-m1.5'
>>> for _ in range(5):
...     chooser.learn({"size=small": 1.0}, {rule.name: (0.2 if rule.name == "q0.5-m1.2" else 0.0) for rule in ARMS})
>>> chooser.choose({"size=small": 1.0}).name
'q0.5-m1.2'
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from river import bandit

from streams.core.evaluation.prediction import oracle_tau
from streams.core.evaluation.simulation import Mode, simulate, timelines
from streams.core.events import Event, StragglerPrediction, TaskCheckpoint, TaskFinish
from streams.core.prediction.hawkeye.ledger import JobLedger
from streams.core.prediction.hawkeye.method import DEFAULT_PROB, HostLearning, Rule, assess, prediction
from streams.core.prediction.threshold import Threshold

QUANTILES = (0.5, 0.75, 0.9)
MULTIPLIERS = (1.2, 1.5, 2.0, 3.0)
ARMS = tuple(Rule(q, m) for q in QUANTILES for m in MULTIPLIERS)  # holds both of Spark's pairs
DEFAULT = Rule(0.75, 1.5)
SIZE_EDGES = (50, 200, 1000)


def context(ledger: JobLedger) -> dict[str, float]:
    """One-hot job type and size bucket (tasks: <50, 50-199, 200-999, 1000+), plus an intercept."""
    size = ledger.size
    bucket = next((f"<{edge}" for edge in SIZE_EDGES if size < edge), f"{SIZE_EDGES[-1]}+")
    features = {"bias": 1.0, f"size={bucket}": 1.0}
    if ledger.task_type:
        features[f"type={ledger.task_type}"] = 1.0
    return features


class ArmChooser:
    """River's LinUCB over ``arms``; ``choose`` a rule for a context, ``learn`` the rewards of a job."""

    def __init__(self, arms: Sequence[Rule] = ARMS, default: Rule = DEFAULT, seed: int = 0) -> None:
        self.arms = {rule.name: rule for rule in arms}
        self.default = default
        self.policy = bandit.LinUCBDisjoint(alpha=0.01, beta=0.04, seed=seed)
        self.jobs = 0

    def choose(self, features: Mapping[str, float]) -> Rule:
        if not self.jobs:
            return self.default
        return self.arms[str(self.policy.pull(list(self.arms), dict(features)))]

    def learn(self, features: Mapping[str, float], cuts: Mapping[str, float]) -> None:
        """``cuts``: each arm's JCT cut on one job (fraction); the differential reward is learned."""
        known = {name: cut for name, cut in cuts.items() if name in self.arms}
        if not known:
            return
        mean = statistics.fmean(known.values())
        for name, cut in known.items():
            self.policy.update(name, dict(features), 100.0 * (cut - mean))  # type: ignore[no-untyped-call]
        self.jobs += 1


@dataclass(frozen=True)
class RewardModel:
    """How a finished job is replayed to reward the arms: simulator mode, spare machines, seeded draws."""

    mode: Mode = "speculate"
    spares: int | None = 0
    repeats: int = 3
    seed: int = 0

    def cuts(self, job_id: str, events: Sequence[Event], flags: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
        """Mean JCT cut of each arm's flags (task -> first flag time, s) over the seeded draws."""
        return {arm: outcome.cut for arm, outcome in self.outcomes(job_id, events, flags).items()}

    def outcomes(
        self, job_id: str, events: Sequence[Event], flags: Mapping[str, Mapping[str, float]]
    ) -> dict[str, ArmOutcome]:
        """Each arm's simulated outcome on one ended job, averaged over the seeded draws ({}: no pool)."""
        tasks = timelines(events)
        durations = [e.duration_us / 1e6 for e in events if isinstance(e, TaskFinish) and e.succeeded]
        if len(tasks) < 2 or not durations:
            return {}
        tau = oracle_tau(durations)  # known once the job ended: rewards only ever reach later jobs
        pool = sorted(d for d in durations if d < tau)
        if not pool:
            return {}
        result = {}
        for arm, flagged in flags.items():
            runs = [
                simulate(tasks, flagged, partial(random.Random(f"{self.seed}/{job_id}/{r}").choice, pool),
                         self.spares, self.mode)
                for r in range(self.repeats)
            ]  # fmt: skip
            relaunches = sum(run.relaunches for run in runs)
            result[arm] = ArmOutcome(
                cut=statistics.fmean(run.reduction for run in runs),
                wasted_s=statistics.fmean(run.wasted_s for run in runs),
                relaunches=relaunches / len(runs),
                success=sum(run.successes for run in runs) / relaunches if relaunches else None,
            )
        return result


@dataclass(frozen=True, slots=True)
class ArmOutcome:
    """One arm on one job: JCT cut, wasted machine seconds, relaunches, share of copies that won."""

    cut: float
    wasted_s: float
    relaunches: float
    success: float | None


@dataclass
class _Job:
    features: dict[str, float] | None = None
    rule: Rule | None = None
    shadow: dict[str, dict[str, float]] = field(default_factory=dict)  # arm -> task -> first flag time (s)
    events: list[Event] = field(default_factory=list)


class AdaptiveJob:
    """One job: picks its rule at the first checkpoint; all arms' flags are kept in the shadow."""

    method = "hawkeye-adaptive"

    def __init__(self, owner: AdaptiveHawkeyeMethod, ledger: JobLedger, record: _Job) -> None:
        self.owner, self.ledger, self.record = owner, ledger, record

    def predict(self, event: TaskCheckpoint) -> StragglerPrediction | None:
        record = self.record
        if record.rule is None:
            record.features = context(self.ledger)
            record.rule = self.owner.chooser.choose(record.features)
        if event.task_id in self.ledger.finished:
            return None
        seen = assess(self.owner.hosts.book, self.ledger, event)
        if seen is None:
            return None
        result = None
        for rule in self.owner.arms:
            flags = record.shadow.setdefault(rule.name, {})
            if event.task_id not in flags and rule.reason(self.ledger, seen) is not None:
                flags[event.task_id] = event.ts_us / 1e6
                if rule.name == record.rule.name:
                    result = prediction(event, seen, rule, self.method)
        return result

    def learn(self, event: Event) -> None:
        """Nothing of its own: the method's ``learn`` keeps the ledger and rewards the arms."""


class AdaptiveHawkeyeMethod:
    """``hawkeye-adaptive``: shared host learning, and a pair per job from ``ArmChooser`` (module doc).

    >>> method = AdaptiveHawkeyeMethod()
    >>> [rule.name for rule in method.arms][:3]
    ['q0.5-m1.2', 'q0.5-m1.5', 'q0.5-m2']
    """

    name = "hawkeye-adaptive"
    uses_threshold = False

    def __init__(self, prob: float = DEFAULT_PROB, rewards: RewardModel | None = None, seed: int = 0) -> None:
        self.arms = tuple(Rule(r.quantile, r.multiplier, prob) for r in ARMS)
        self.chooser = ArmChooser(self.arms, Rule(DEFAULT.quantile, DEFAULT.multiplier, prob), seed=seed)
        self.rewards = rewards or RewardModel(seed=seed)
        self.hosts = HostLearning()
        self.jobs: dict[str, _Job] = {}

    def job(self, job_id: str, threshold: Threshold | None) -> AdaptiveJob:
        record = self.jobs.setdefault(job_id, _Job())
        return AdaptiveJob(self, self.hosts.ledger(job_id), record)

    def learn(self, event: Event) -> None:
        record = self.jobs.get(event.job_id)
        if record is not None:
            record.events.append(event)
        if self.hosts.learn(event) is None or record is None:
            return
        del self.jobs[event.job_id]
        if record.features is None:
            return
        flags = {rule.name: record.shadow.get(rule.name, {}) for rule in self.arms}
        cuts = self.rewards.cuts(event.job_id, record.events, flags)
        if cuts and not any(math.isnan(c) for c in cuts.values()):
            self.chooser.learn(record.features, cuts)

    def snapshot(self) -> object:
        """Host learning, running jobs (pair, shadow flags, events) and the bandit's learned state."""
        return {"hosts": self.hosts.snapshot(), "jobs": dict(self.jobs), "policy": self.chooser.policy,
                "learned": self.chooser.jobs}  # fmt: skip

    def restore(self, state: object) -> None:
        if not isinstance(state, dict) or not isinstance(state.get("policy"), bandit.LinUCBDisjoint):
            raise ValueError("not a hawkeye-adaptive snapshot")
        self.hosts.restore(state["hosts"])
        self.jobs = dict(state["jobs"])
        self.chooser.policy = state["policy"]
        self.chooser.jobs = int(state["learned"])
