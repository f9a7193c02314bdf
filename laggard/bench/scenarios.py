"""Run the fault scenarios through the in-process pipeline, open and closed loop, and summarise (issue 21).

*Open loop*: the scheduler ignores the blacklist; the trace is what it would be without laggard. *Closed
loop*: generation and detection interleave in event time: the simulator asks before every placement round
which free nodes it may use, and the answer is the blacklist as the pipeline has it at that moment, so a
listed node receives no new task and yields no new evidence, as in production. (A round placed in the very
instant a node is listed may still give it tasks, counted as *at listing*: the delta came out of that round's
own first start, see ``_Scheduler``.) *Oracle*: the scheduler
avoids exactly the faulty nodes while their faults are active (a yardstick for the job time, not detection).
*Canary*: the closed loop with a way back: a listed node is offered one task every ``CANARY_EVERY_S``
(probation), so it keeps yielding a little evidence and can be seen to recover. An offer stands, round after
round, until the node takes a task; the round it is taken in gives the node that one task and no more.

The job time change compares the closed loop (or the oracle) with the open loop of the same seed: the same
jobs with the same work, only placement differs.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from producers.scenarios import ClusterSim, Scenario
from streams.core.evaluation.detection import DetectionScore, Span
from streams.core.evaluation.scenarios import RunScore, score_run
from streams.core.events import TaskStart
from streams.local import LocalPipeline
from streams.settings import Settings

LOOPS = ("open", "closed", "canary")
CANARY_EVERY_S = 300.0


@dataclass
class RunResult:
    """One scenario, one seed, one loop."""

    scenario: str
    seed: int
    loop: str
    score: RunScore
    mean_jct_s: float
    jct_change: float | None  # against the open loop of the same seed; None for the open loop itself
    oracle_jct_change: float | None
    seconds: float
    starts_on_listed: int = 0  # placed on a node the list held (open: ignored; closed: 0; canary: the canaries)
    starts_at_listing: int = 0  # placed in the instant the node was listed, before the delta existed (_Scheduler)
    tasks_per_offer: dict[int, int] = field(default_factory=dict)  # canary: tasks an offer got -> offers taken
    stays: list[Span] = field(default_factory=list)
    truth: dict[str, Any] = field(default_factory=dict)


def run_seed(scenario: Scenario, seed: int, loops: Sequence[str], overrides: dict[str, Any]) -> list[RunResult]:
    """Every loop of one seed; the open loop always runs (it is the job-time baseline)."""
    open_run, open_jobs = _run(scenario, seed, "open", overrides)
    results = [open_run] if "open" in loops else []
    oracle = _oracle_jobs(scenario, seed) if set(loops) - {"open"} else {}
    for loop in ("closed", "canary"):
        if loop in loops:
            closed, closed_jobs = _run(scenario, seed, loop, overrides)
            closed.jct_change = _jct_change(open_jobs, closed_jobs)
            closed.oracle_jct_change = _jct_change(open_jobs, oracle)
            results.append(closed)
    return results


class _Scheduler:
    """The simulated scheduler: the blacklist as the pipeline has it, and the tasks started on listed nodes.

    ``placement`` is asked before each placement round and remembers the list it answered with, so a start on
    a listed node is one of two kinds. *On listed*: the round was placed with the node already on the list
    (the open loop ignores it, the canary loop's probation tasks, and in the closed loop a violation). *At
    listing*: the node was listed after the round was placed, in the same instant. The ranking of a boundary
    is published once a task event at or past it reaches the pipeline (its watermark waits for both streams,
    ``streams/core/stages.py``, as a Kafka worker does). When no task event came between the boundary and the
    round, that event is the round's own first start, and the round's later starts can land on the node that
    ranking lists. The scheduler could not have known: the delta did not exist when it chose.
    """

    def __init__(self, loop: str) -> None:
        self.loop = loop
        self.listed: set[str] = set()
        self.given: frozenset[str] = frozenset()  # the list the latest round was placed with
        self.canaries: dict[str, int] = {}  # listed node -> time of its last task while listed
        self.every_us = round(CANARY_EVERY_S * 1e6) if loop == "canary" else None
        self.on_listed = 0
        self.at_listing = 0
        self.rounds = 0
        self.offered: frozenset[str] = frozenset()  # the probation offers of the latest round
        self.taken: Counter[tuple[str, int]] = Counter()  # (node, round) -> tasks that offer got

    def placement(self, candidates: Sequence[str], now_us: int) -> list[str] | dict[str, int | None]:
        self.given = frozenset(self.listed)
        self.rounds += 1
        if self.loop == "open":
            return list(candidates)  # told the list, ignores it: the same trace as no placement at all
        allowed: dict[str, int | None] = dict.fromkeys((n for n in candidates if n not in self.listed), None)
        if self.every_us is not None:
            for node in candidates:
                if node in self.listed and now_us - self.canaries.get(node, -self.every_us) >= self.every_us:
                    allowed[node] = 1  # one task; offered each round until taken (seen below as its TaskStart)
        self.offered = frozenset(n for n, cap in allowed.items() if cap is not None)
        return allowed

    def tasks_per_offer(self) -> dict[int, int]:
        """Offers taken by how many tasks they got: {1: n} when every probation offer gave exactly one task."""
        return dict(sorted(Counter(self.taken.values()).items()))

    def started(self, event: TaskStart) -> None:
        if event.node_id in self.offered:
            self.taken[(event.node_id, self.rounds)] += 1
        if event.node_id not in self.listed:
            return
        if event.node_id in self.given:
            self.on_listed += 1
        else:
            self.at_listing += 1
        self.canaries[event.node_id] = event.ts_us  # a task at listing also starts its probation period

    def take(self, deltas: Iterable[Any], detection: DetectionScore) -> None:
        for delta in deltas:
            detection.update(delta)
            self.listed.difference_update(r.node_id for r in delta.removed)
            self.listed.update(a.node_id for a in delta.added)


def _run(scenario: Scenario, seed: int, loop: str, overrides: dict[str, Any]) -> tuple[RunResult, dict[str, Any]]:
    began = time.perf_counter()
    settings = Settings(**overrides)
    pipeline = LocalPipeline(settings)
    scheduler = _Scheduler(loop)
    sim = ClusterSim(scenario, seed, scheduler.placement)
    truth = sim.ground_truth
    detection = DetectionScore(truth["slow_nodes"], truth["onset_us"])
    for event in sim:
        if isinstance(event, TaskStart):
            scheduler.started(event)
        scheduler.take(pipeline.feed(event), detection)
    scheduler.take(pipeline.finish(), detection)
    stays = detection.spans()
    score = score_run(truth["slow_spans"], stays, scenario.nodes, round(scenario.hours * 3_600e6),
                      settings.max_fraction)  # the scenario's end, not the drain's last event
    jobs = dict(sim.jobs)
    result = RunResult(scenario.name, seed, loop, score, _mean_jct(jobs), None, None, time.perf_counter() - began,
                       scheduler.on_listed, scheduler.at_listing, scheduler.tasks_per_offer(), stays, truth)
    return result, jobs


def _oracle_jobs(scenario: Scenario, seed: int) -> dict[str, tuple[int, int]]:
    sim = ClusterSim(scenario, seed)
    spans = sim.ground_truth["slow_spans"]

    def avoid_faulty(candidates: Sequence[str], now_us: int) -> list[str]:
        return [n for n in candidates if not any(a <= now_us < (b or now_us + 1) for a, b in spans.get(n, ()))]

    sim.placement = avoid_faulty
    for _ in sim:
        pass
    return dict(sim.jobs)


def _mean_jct(jobs: dict[str, tuple[int, int]]) -> float:
    return statistics.fmean(end - start for start, end in jobs.values()) / 1e6 if jobs else 0.0


def _jct_change(base: dict[str, tuple[int, int]], other: dict[str, tuple[int, int]]) -> float | None:
    common = [job for job in base if job in other]
    if not common:
        return None
    before = sum(base[j][1] - base[j][0] for j in common)
    after = sum(other[j][1] - other[j][0] for j in common)
    return after / before - 1.0


# --- summary over seeds -------------------------------------------------------------------------------------


def summarise(results: Sequence[RunResult]) -> list[dict[str, Any]]:
    """One row per scenario and loop, pooled over seeds (node delays pooled over all seeds' faulty nodes)."""
    groups: dict[tuple[str, str], list[RunResult]] = {}
    for result in results:
        groups.setdefault((result.scenario, result.loop), []).append(result)
    return [_row(name, loop, runs) for (name, loop), runs in groups.items()]


def _row(name: str, loop: str, runs: Sequence[RunResult]) -> dict[str, Any]:
    scores = [r.score for r in runs]
    faulty = sum(s.faulty for s in scores)
    onsets = [d for s in scores for d in s.onset_to_listing_s]
    listed = [d for d in onsets if d is not None]
    releases = [d for s in scores for d in s.recovery_to_release_s]
    released = [d for d in releases if d is not None]
    precisions = [s.precision for s in scores if s.precision is not None]
    changes = [r.jct_change for r in runs if r.jct_change is not None]
    oracle = [r.oracle_jct_change for r in runs if r.oracle_jct_change is not None]
    return {
        "scenario": name, "loop": loop, "seeds": sorted(r.seed for r in runs), "faulty": faulty,
        "precision": statistics.fmean(precisions) if precisions else None,
        "recall": sum(s.listed_faulty for s in scores) / faulty if faulty else None,
        "onset_to_listing_median_s": statistics.median(listed) if listed else None,
        "onset_to_listing_max_s": max(listed) if listed else None,
        "never_listed": len(onsets) - len(listed),
        "listed_late": sum(s.listed_late for s in scores),
        "recovery_to_release_median_s": statistics.median(released) if released else None,
        "recovery_to_release_max_s": max(released) if released else None,
        "never_released": len(releases) - len(released),
        "flaps": sum(s.flaps for s in scores),
        "starts_on_listed": sum(r.starts_on_listed for r in runs),
        "starts_at_listing": sum(r.starts_at_listing for r in runs),
        "tasks_per_offer": dict(sorted(sum((Counter(r.tasks_per_offer) for r in runs), Counter()).items())),
        "chance_listings": sum(s.chance_listings for s in scores),
        "chance_listed_min": sum(s.chance_listed_s for s in scores) / 60,
        "largest_share": max(s.largest_share for s in scores),
        "cap_exceeded": any(s.cap_exceeded for s in scores),
        "cycles_per_hour": max(s.cycles_per_hour for s in scores),
        "jct_change": statistics.fmean(changes) if changes else None,
        "oracle_jct_change": statistics.fmean(oracle) if oracle else None,
        "seconds": sum(r.seconds for r in runs),
    }  # fmt: skip


def run_suite(
    scenarios: Sequence[Scenario], seeds: Sequence[int], loops: Sequence[str], overrides: dict[str, Any],
    workers: int = 1, report: Callable[[str], None] = lambda line: None,
) -> list[RunResult]:
    """Every scenario x seed (both loops per task), in ``workers`` processes; ``report`` gets a line per task."""
    tasks = [(scenario, seed) for scenario in scenarios for seed in seeds]
    results: list[RunResult] = []
    if workers <= 1:
        for i, (scenario, seed) in enumerate(tasks, 1):
            done = run_seed(scenario, seed, loops, overrides)
            report(_progress(i, len(tasks), done))
            results.extend(done)
        return results
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # Ctrl-C reaches the whole process group: the workers ignore it and the parent stops them (a pool left to its
    # `with` ran every queued run first, minutes, and then threw the results away)
    pool = ProcessPoolExecutor(workers, initializer=_ignore_interrupts)
    try:
        futures = [pool.submit(run_seed, scenario, seed, loops, overrides) for scenario, seed in tasks]
        for i, future in enumerate(as_completed(futures), 1):
            done = future.result()
            report(_progress(i, len(tasks), done))
            results.extend(done)
    except BaseException:
        running = list((getattr(pool, "_processes", None) or {}).values())  # the runs in flight (3.11: no public way)
        pool.shutdown(wait=False, cancel_futures=True)
        for process in running:
            process.terminate()
        raise
    pool.shutdown()
    order = {(s.name, seed): k for k, (s, seed) in enumerate(tasks)}
    return sorted(results, key=lambda r: (order[(r.scenario, r.seed)], LOOPS.index(r.loop)))


def _ignore_interrupts() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _progress(i: int, total: int, done: Sequence[RunResult]) -> str:
    first = done[0]
    return f"[{i}/{total}] {first.scenario} seed {first.seed}: {sum(r.seconds for r in done):.1f} s"


def result_document(result: RunResult) -> dict[str, Any]:
    """One run as JSON-ready data (stays in seconds of event time)."""
    document = {key: value for key, value in asdict(result).items() if key not in ("stays", "truth")}
    document["stays"] = [[s.node_id, s.start_us / 1e6, None if s.end_us is None else s.end_us / 1e6]
                         for s in result.stays]
    return document
