"""The ``hawkeye`` prediction method: Algorithm 1 of Hawkeye on laggard's checkpoints.

At a checkpoint of a running task, once ``quantile`` of the job's tasks finished (Spark's
``spark.speculation.quantile``), the task is flagged for speculation when either

1. its host is one where a task is unlikely to meet the deadline: PoF = 1 - (t_min/T)^beta <= ``prob``,
   with (t_min, beta) the host's Pareto fit and T = multiplier x the job's mean finished task time (the
   paper's DT = MT x AT, eq. 11; lines 6-8 of Algorithm 1); or
2. its straggling ratio SR >= ``multiplier`` (eq. 10; lines 10-22), SR measured against the host's
   expected task time (``steps``).

The cluster-level ``learn`` keeps a ``JobLedger`` per job and, as each job ends, adds what it saw to the
per-host ``HostBook``; the job predictors only read. ``prob`` = 0.5 is chosen a priori, not tuned: the
paper gives no value, and 0.5 reads "a task on this host more likely misses the deadline than meets it".
Not built: the paper's clone-at-start list of straggler-prone hosts and its attempt-priority formula
(eq. 14) are scheduler actions, not identification; laggard's simulator speculates every flag.

>>> from streams.core.events import JobStart, Status, TaskCheckpoint, TaskFinish
>>> from streams.core.prediction.base import step
>>> method = HawkeyeMethod(quantile=0.5, multiplier=1.5)
>>> job = method.job("j", None)
>>> _ = step(method, job, JobStart("j", 0, declared_tasks=2))
>>> _ = step(method, job, TaskFinish("j", "a", 0, "n1", 10_000_000, 10_000_000, Status.SUCCEEDED))
>>> step(method, job, TaskCheckpoint("j", "b", 0, "n2", 12_000_000, 12_000_000, {}))  # SR 1.2
>>> flag = step(method, job, TaskCheckpoint("j", "b", 0, "n2", 16_000_000, 16_000_000, {}))
>>> flag.task_id, flag.method, round(flag.adjusted_us / flag.threshold_us, 2)  # SR = 16/10 >= 1.5
('b', 'hawkeye', 1.07)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streams.core.events import Event, JobFinish, StragglerPrediction, TaskCheckpoint
from streams.core.prediction.hawkeye.ledger import JobLedger
from streams.core.prediction.hawkeye.pareto import Pareto
from streams.core.prediction.hawkeye.steps import HostBook, straggling_ratio
from streams.core.prediction.threshold import Threshold

DEFAULT_PROB = 0.5


@dataclass(frozen=True, slots=True)
class Assessment:
    """What Hawkeye sees of one checkpointing task: SR, ET_host (s), the job's mean task time AT (s),
    and its host's Pareto law of relative task times (None: fewer than 3 samples)."""

    ratio: float
    expected_s: float
    mean_s: float
    law: Pareto | None

    def pof(self, multiplier: float) -> float | None:
        """P(a task on this host finishes before DT = multiplier x AT); in units of AT, DT = multiplier."""
        return None if self.law is None else self.law.pof(multiplier)


def assess(book: HostBook, ledger: JobLedger, event: TaskCheckpoint) -> Assessment | None:
    """SR and PoF inputs for ``event`` (None before the job's first finished task: no AT yet)."""
    mean = ledger.mean_s
    if mean is None or mean <= 0:
        return None
    host = event.node_id
    local = tuple(t / mean for t in ledger.local_tasks.get(host, ()))
    expected = mean * book.expected_factor(host, local)
    elapsed = event.elapsed_us / 1e6
    progress = event.features.get("progress")
    phase = event.features.get("phase")
    steps_done = int(phase) - 1 if phase is not None else ledger.steps_done(event.task_id, event.attempt) + 1
    step_s = None
    job_step = ledger.mean_step_s
    if job_step is not None:
        local_steps = tuple(s / mean for s in ledger.local_steps.get(host, ()))
        step_s = mean * book.step_factor(host, job_step / mean, local_steps)
    ratio = straggling_ratio(elapsed, expected, step_s, steps_done, progress)
    return Assessment(ratio, expected, mean, book.pareto(host, local))


@dataclass(frozen=True, slots=True)
class Rule:
    """One (quantile, multiplier) pair with the probability threshold: whether an assessment flags."""

    quantile: float
    multiplier: float
    prob: float = DEFAULT_PROB

    def reason(self, ledger: JobLedger, seen: Assessment) -> str | None:
        """'pof' or 'sr' when the task is to be speculated, else None (Algorithm 1's order)."""
        if not ledger.ready(self.quantile):
            return None
        pof = seen.pof(self.multiplier)
        if pof is not None and pof <= self.prob:
            return "pof"
        return "sr" if seen.ratio >= self.multiplier else None

    @property
    def name(self) -> str:
        return f"q{self.quantile:g}-m{self.multiplier:g}"


def prediction(event: TaskCheckpoint, seen: Assessment, rule: Rule, method: str) -> StragglerPrediction:
    """The published flag: SR x ET_host is the expected total time, multiplier x ET_host the limit."""
    pof = seen.pof(rule.multiplier)
    return StragglerPrediction(
        event.job_id, event.task_id, event.attempt, event.node_id, event.ts_us, event.elapsed_us,
        predicted_us=seen.ratio * seen.expected_s * 1e6, adjusted_us=seen.ratio * seen.expected_s * 1e6,
        threshold_us=rule.multiplier * seen.expected_s * 1e6, weight=1.0 if pof is None else pof, method=method,
    )  # fmt: skip


class HawkeyeJob:
    """One job's Hawkeye predictor with a fixed rule; reads the method's ledger and host book."""

    def __init__(self, book: HostBook, ledger: JobLedger, rule: Rule, method: str = "hawkeye") -> None:
        self.book, self.ledger, self.rule, self.method = book, ledger, rule, method
        self.flagged: set[str] = set()

    def predict(self, event: TaskCheckpoint) -> StragglerPrediction | None:
        if event.task_id in self.flagged or event.task_id in self.ledger.finished:
            return None
        seen = assess(self.book, self.ledger, event)
        if seen is None or self.rule.reason(self.ledger, seen) is None:
            return None
        self.flagged.add(event.task_id)
        return prediction(event, seen, self.rule, self.method)

    def learn(self, event: Event) -> None:
        """Nothing of its own: the method's ``learn`` keeps the ledger this predictor reads."""


@dataclass
class HostLearning:
    """The cluster-level half shared by ``hawkeye`` and ``hawkeye-adaptive``: ledgers and the host book."""

    book: HostBook = field(default_factory=HostBook)
    ledgers: dict[str, JobLedger] = field(default_factory=dict)

    def ledger(self, job_id: str) -> JobLedger:
        return self.ledgers.setdefault(job_id, JobLedger())

    def learn(self, event: Event) -> JobLedger | None:
        """Update the job's ledger; when the job ends, fold it into the book and return it."""
        ledger = self.ledger(event.job_id)
        ledger.update(event)
        if not ledger.ended and not isinstance(event, JobFinish):
            return None
        del self.ledgers[event.job_id]
        mean = ledger.mean_s
        if mean:
            for host in ledger.local_tasks.keys() | ledger.local_steps.keys():
                self.book.add(
                    host,
                    [t / mean for t in ledger.local_tasks.get(host, ())],
                    [s / mean for s in ledger.local_steps.get(host, ())],
                )
        return ledger

    def snapshot(self) -> dict[str, object]:
        """Plain data: each host's relative task and step times, and the ledgers of running jobs."""
        hosts = {h: (list(e.tasks), list(e.steps)) for h, e in self.book.hosts.items()}
        return {"hosts": hosts, "ledgers": dict(self.ledgers)}

    def restore(self, state: dict[str, object]) -> None:
        hosts = state.get("hosts", {})
        ledgers = state.get("ledgers", {})
        if not isinstance(hosts, dict) or not isinstance(ledgers, dict):
            raise ValueError("not a Hawkeye snapshot")
        self.book.hosts.clear()
        for host, (tasks, steps) in hosts.items():
            self.book.add(host, list(tasks), list(steps))
        self.ledgers = dict(ledgers)


class HawkeyeMethod:
    """``hawkeye`` with fixed (quantile, multiplier); defaults are Spark's (0.75, 1.5)."""

    name = "hawkeye"
    uses_threshold = False

    def __init__(self, quantile: float = 0.75, multiplier: float = 1.5, prob: float = DEFAULT_PROB,
                 window: int = 200, prior: float = 2.0) -> None:  # fmt: skip
        self.rule = Rule(quantile, multiplier, prob)
        self.hosts = HostLearning(HostBook(window=window, prior=prior))

    def job(self, job_id: str, threshold: Threshold | None) -> HawkeyeJob:
        return HawkeyeJob(self.hosts.book, self.hosts.ledger(job_id), self.rule, self.name)

    def learn(self, event: Event) -> None:
        self.hosts.learn(event)

    def snapshot(self) -> object:
        """Cluster-level state for a restart (``StatefulMethod``): the host book and running jobs' ledgers."""
        return self.hosts.snapshot()

    def restore(self, state: object) -> None:
        if not isinstance(state, dict):
            raise ValueError("not a Hawkeye snapshot")
        self.hosts.restore(state)
