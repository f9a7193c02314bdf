"""The work behind ``laggard advise``: load a trace into samples, train the trees, run the evaluations.

Kept apart from the click commands so the commands stay a page long and tests can call the runs directly.
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

import click

from laggard.commands.traces import echo_bad_rows, open_trace_or_fail
from laggard.errors import UserError
from streams.core.avoidance.budget import DEFAULT_SHARE, DEFAULT_WINDOW, Budget, RefusalBudget, parse_window
from streams.core.avoidance.calibration import (
    DEFAULT_BURST,
    DEFAULT_CALIBRATION_WINDOW,
    DEFAULT_LEAST,
    DEFAULT_TOP,
    CalibratedBudget,
)
from streams.core.avoidance.calibration import DEFAULT_SHARE as DEFAULT_RATE
from streams.core.avoidance.evaluation import (
    AdviceScore,
    Sample,
    assess,
    choose_threshold,
    collect_samples,
    hindsight_ceilings,
    metrics_by_type,
    prequential_cart,
    prequential_hoeffding,
    split_predictions,
    stragglers_by_median,
    stragglers_by_z,
)
from streams.core.avoidance.ranked import DEFAULT_RANK_WINDOW, DEFAULT_SAFETY, EscalatingBudget, RankedBudget
from streams.core.avoidance.status import NodeStatusTracker
from streams.core.avoidance.thresholds import (
    TuningRun,
    choose_most_passing,
    choose_per_type,
    choose_with_budget,
    objective,
    relabel,
)
from streams.core.avoidance.trees import CartTrees, HoeffdingTrees, Metrics

US_PER_H = 3_600_000_000


@dataclass(frozen=True)
class Knobs:
    """The evaluation's choices; each was fixed on seeds or hours other than those reported."""

    depth: int = 4
    min_leaf: int = 50
    period_s: float = 600.0
    budget: float = 0.09  # share of placements the threshold may refuse on the tuning data
    ratio: float = 1.5  # a straggler takes at least this times its job's median (the paper's definition)
    learn_hours: float = 1.0
    repeats: int = 5
    targets: tuple[str, ...] = ("p",)  # labels the trees may learn; with several, chosen on the tuning seeds
    per_type: bool = True  # a threshold per task type (chosen on the tuning seeds), else one for all
    rule: str = "passing"  # per-type thresholds: most tuning seeds meeting the acceptance, or "worst" seed's avoided
    refusal_budget: str = "off"  # on, off, ranked, escalate, or auto: the best on the tuning seeds' worst
    budget_share: float = DEFAULT_SHARE  # the running budget: share of the window's placements refused at most
    budget_window: str = str(DEFAULT_WINDOW)  # placements (1000) or event time (2h, 30m)
    rank_safety: float = DEFAULT_SAFETY  # ranked: refuse the worst share x safety of the recent predictions
    rank_window: int = DEFAULT_RANK_WINDOW  # ranked: predictions ranked against; escalate: decisions counted
    slope: float = 0.4  # escalate: z over the floor when the window refused its share (grows as fill squared)
    top: float = DEFAULT_TOP  # calibrated: refuse a request in this top share of the recent requests' scores
    least: float = DEFAULT_LEAST  # calibrated: ... the top share with the token bucket empty (top: full)
    calibration_window: int = DEFAULT_CALIBRATION_WINDOW  # calibrated: requests ranked against
    rate: float = DEFAULT_RATE  # calibrated: tokens the refusal bucket earns per request
    burst: float = DEFAULT_BURST  # calibrated: tokens the bucket holds at most
    floor: float = 0.0  # calibrated: never refuse a straggling chance at or below this

    def make_calibrated(self) -> CalibratedBudget:
        return CalibratedBudget(self.rate, self.top, self.calibration_window, self.burst, least=self.least)

    def make_budget(self) -> RefusalBudget:
        window, window_us = parse_window(self.budget_window)
        return RefusalBudget(self.budget_share, window, window_us)

    def make_ranked(self) -> RankedBudget:
        window, _ = parse_window(self.budget_window)
        return RankedBudget(self.budget_share, self.rank_safety, self.rank_window, window or DEFAULT_WINDOW)

    def make_escalating(self) -> EscalatingBudget:
        window, _ = parse_window(self.budget_window)
        return EscalatingBudget(self.budget_share, self.slope, self.rank_window, window or DEFAULT_WINDOW)

    def make(self, mode: str) -> Budget | None:
        """The running budget of ``mode`` (off: none)."""
        makers: dict[str, Callable[[], Budget]] = {
            "on": self.make_budget, "ranked": self.make_ranked, "escalate": self.make_escalating,
            "calibrated": self.make_calibrated}  # fmt: skip
        return makers[mode]() if mode in makers else None


RANK_SAFETIES = (0.7, 0.8, 0.9, 1.0)  # ranked knobs tried on the tuning seeds
RANK_WINDOWS = (300, 1000, 3000)
RANK_SHIFTS = tuple(k / 10 for k in range(11))
SLOPES = (0.1, 0.2, 0.3, 0.4, 0.6, 0.8, 1.2)  # escalate knobs tried on the tuning seeds (windows: RANK_WINDOWS)


def load_samples(spec: str, tracker: NodeStatusTracker | None = None) -> tuple[list[Sample], Any]:
    trace = open_trace_or_fail(spec)
    click.echo(f"reading {spec} ...", err=True)
    samples = collect_samples(iter(trace), tracker=tracker)
    echo_bad_rows(trace)
    if len(samples) < 2:
        raise UserError(f"{spec}: fewer than 2 labelled tasks (successful tasks of jobs with 2 or more of them)")
    return samples, trace


def seeded(spec: str, seed: int) -> str:
    """``synthetic:...`` with its seed replaced by ``seed``."""
    head, _, rest = spec.partition(":")
    keys = [item for item in rest.split(",") if item.strip() and not item.strip().startswith("seed=")]
    return f"{head}:{','.join([*keys, f'seed={seed}'])}"


def _scored(samples: list[Sample], learn_hours: float) -> list[bool]:
    origin = min(s.start_us for s in samples)
    return [s.start_us >= origin + learn_hours * US_PER_H for s in samples]


def _predict(samples: list[Sample], knobs: Knobs, target: str = "z") -> list[float | None]:
    trees = CartTrees(knobs.depth, knobs.min_leaf)
    return prequential_cart(relabel(samples, target, knobs.ratio), round(knobs.period_s * 1e6), trees)


def _tuning_run(samples: list[Sample], knobs: Knobs, target: str) -> TuningRun:
    scored = _scored(samples, knobs.learn_hours)
    predictions = _predict(samples, knobs, target)
    stragglers = stragglers_by_median(samples, knobs.ratio)
    keep = [i for i, on in enumerate(scored) if on]
    return TuningRun([predictions[i] for i in keep], [samples[i].task_type for i in keep],
                     [stragglers[i] for i in keep], [samples[i].start_us for i in keep])


Choice = tuple[str, float | dict[str, float], list[Any], str, Knobs]  # label, thresholds, table, budget mode, knobs


def choose_on_tuning(tuning: list[list[Sample]], knobs: Knobs) -> Choice:
    """The label, thresholds and running budget (off, on, ranked, escalate), chosen on the tuning clusters
    alone: for each candidate label, the largest of the clusters' own budget thresholds (so the budget holds
    on every one), then per type when ``per_type`` (rule ``worst``: the worst cluster's avoided share under
    the budget on every cluster; rule ``passing``: then moved to meet the acceptance on the most clusters,
    ``choose_most_passing``); then, for each running budget ``refusal_budget`` names (auto: all), its chooser
    in ``CHOOSERS`` (its thresholds behind it, and its knobs), starting from the ``worst`` rule's thresholds.
    What avoids most stragglers on the worst tuning cluster wins (then the mean); the knobs returned carry
    the winner's."""
    best: tuple[Any, str, float | dict[str, float], str, Knobs] | None = None
    table: list[Any] = []
    modes = {"off": ("off",), "on": ("on",), "ranked": ("ranked",), "escalate": ("escalate",),
             "auto": ("off", "on", "ranked", "escalate")}  # fmt: skip
    wanted = modes[knobs.refusal_budget]
    for target in knobs.targets:
        runs = [_tuning_run(samples, knobs, target) for samples in tuning]
        single = max(choose_threshold(run.predictions, knobs.budget) for run in runs)
        limits: float | dict[str, float] = single
        if knobs.per_type:
            limits = choose_per_type(runs, knobs.budget, single)
        kinds = sorted({k for run in runs for k in run.task_types})
        start = limits if isinstance(limits, dict) else dict.fromkeys(kinds, single)
        found = objective(runs, start, knobs.budget)
        row: dict[str, Any] = {"target": target, "refusal_budget": "off", "thresholds": limits}
        if knobs.per_type and knobs.rule == "passing":
            limits, passing = choose_most_passing(runs, knobs.budget, start)
            found = (passing[1], passing[2])  # worst seed's standing (minus its refused share when over), mean
            row |= {"thresholds": limits, "passing": passing[0], "of": len(runs)}
        table.append(row | {"worst_avoided": found and found[0], "mean_avoided": found and found[1]})
        if "off" in wanted and found is not None and (best is None or found > best[0]):
            best = (found, target, limits, "off", knobs)
        for mode, chooser in CHOOSERS.items():
            if mode not in wanted:
                continue
            chosen = chooser(runs, knobs, start)
            if chosen is not None:
                limits_behind, score, tuned = chosen
                row = {"target": target, "refusal_budget": mode, "thresholds": limits_behind, **ROW_KNOBS[mode](tuned)}
                table.append(row | {"worst_avoided": score[0], "mean_avoided": score[1]})
                if best is None or score > best[0]:
                    best = (score, target, limits_behind, mode, tuned)
    if best is None:
        raise UserError(f"no threshold keeps the refusal budget {knobs.budget} on every tuning seed")
    return best[1], best[2], table, best[3], best[4]


def _choose_budget(runs: list[TuningRun], knobs: Knobs, start: dict[str, float],
                   ) -> tuple[dict[str, float], tuple[float, float], Knobs] | None:  # fmt: skip
    """The first-come budget's thresholds (``choose_with_budget``: lowered from ``start``, then per type)."""
    found = choose_with_budget(runs, knobs.make_budget, start)
    return None if found is None else (found[0], found[1], knobs)


def _choose_escalating(runs: list[TuningRun], knobs: Knobs, start: dict[str, float],
                       ) -> tuple[dict[str, float], tuple[float, float], Knobs] | None:  # fmt: skip
    """The escalating budget's slope and window and its floors (every type's ``start`` lowered by the same
    0-1 z; no per-type search, which over-fitted the first-come budget), on the tuning runs by the worst
    run's avoided share."""
    best: tuple[tuple[float, float], dict[str, float], Knobs] | None = None
    for slope in SLOPES:
        for window in RANK_WINDOWS:
            tuned = replace(knobs, slope=slope, rank_window=window)
            found = choose_with_budget(runs, tuned.make_escalating, start, shifts=RANK_SHIFTS, passes=0)
            if found is not None and (best is None or found[1] > best[0]):
                best = (found[1], found[0], tuned)
    return None if best is None else (best[1], best[0], best[2])


def _choose_ranked(runs: list[TuningRun], knobs: Knobs, start: dict[str, float],
                   ) -> tuple[dict[str, float], tuple[float, float], Knobs] | None:  # fmt: skip
    """The ranked budget's safety and window (a grid, with the floors lowered from ``start`` by 0-1 z),
    then its floors per type by coordinate ascent, all on the tuning runs by the worst run's avoided share."""
    best: tuple[tuple[float, float], dict[str, float], Knobs] | None = None
    for safety in RANK_SAFETIES:
        for window in RANK_WINDOWS:
            tuned = replace(knobs, rank_safety=safety, rank_window=window)
            found = choose_with_budget(runs, tuned.make_ranked, start, shifts=RANK_SHIFTS, passes=0)
            if found is not None and (best is None or found[1] > best[0]):
                best = (found[1], found[0], tuned)
    if best is None:
        return None
    floors = choose_with_budget(runs, best[2].make_ranked, best[1], shifts=(0.0,), passes=1)
    if floors is None or floors[1] <= best[0]:
        return best[1], best[0], best[2]
    return floors[0], floors[1], best[2]


Chooser = Callable[[list[TuningRun], Knobs, dict[str, float]],
                   tuple[dict[str, float], tuple[float, float], Knobs] | None]  # fmt: skip
# the running budgets tried on the tuning runs, in this order, and the knobs each adds to its tuning table row
CHOOSERS: dict[str, Chooser] = {"on": _choose_budget, "ranked": _choose_ranked, "escalate": _choose_escalating}
ROW_KNOBS: dict[str, Callable[[Knobs], dict[str, Any]]] = {
    "on": lambda knobs: {},
    "ranked": lambda knobs: {"rank_safety": knobs.rank_safety, "rank_window": knobs.rank_window},
    "escalate": lambda knobs: {"slope": knobs.slope, "window": knobs.rank_window},
}


def _score_row(name: str, score: AdviceScore, z_score: AdviceScore) -> dict[str, Any]:
    return {
        "run": name, "threshold": score.threshold, "placements": score.placements, "refused": score.refused,
        "refused_share": score.refused_share, "stragglers": score.stragglers, "avoided": score.avoided,
        "avoided_share": score.avoided_share, "null_avoided_share": score.null_avoided_share,
        "jobs_touched": score.jobs_touched, "jct_reduction": score.jct_reduction,
        "null_jct_reduction": score.null_reduction, "stragglers_z1": z_score.stragglers,
        "avoided_share_z1": z_score.avoided_share,
        "jct_saved_vs_null": None if score.jct_reduction is None else score.jct_reduction - (score.null_reduction or 0),
        "acceptance": _acceptance(score),
    }  # fmt: skip


def _acceptance(score: AdviceScore) -> dict[str, bool]:
    """Issue 17's acceptance on one run: at least half the stragglers avoided, at most a tenth of placements
    refused, and more job time saved than as many random refusals save."""
    return _acceptance_of(score.avoided_share, score.refused_share, score.jct_reduction, score.null_reduction)


def _acceptance_of(avoided: float, refused: float, saved: float | None, null_saved: float | None) -> dict[str, bool]:
    return {"avoided_at_least_half": avoided >= 0.5, "refused_at_most_tenth": refused <= 0.1,
            "jct_beats_null": (saved or 0.0) > (null_saved or 0.0)}  # fmt: skip


def _assess_both(samples: list[Sample], predictions: list[float | None], threshold: float | dict[str, float],
                 scored: list[bool], knobs: Knobs, seed: int,
                 mode: str = "off") -> tuple[AdviceScore, AdviceScore]:  # fmt: skip
    by_median = assess(samples, predictions, threshold, scored, stragglers_by_median(samples, knobs.ratio),
                       knobs.repeats, seed, knobs.make(mode))  # fmt: skip
    by_z = assess(samples, predictions, threshold, scored, stragglers_by_z(samples), repeats=1, seed=seed,
                  budget=knobs.make(mode))  # fmt: skip
    return by_median, by_z


def metrics_rows(found: dict[str, Metrics], model: str) -> list[dict[str, Any]]:
    return [{"model": model, "task_type": kind, **asdict(m)} for kind, m in found.items()]


def evaluate_synthetic(spec: str, seeds: list[int], tune_seeds: list[int], knobs: Knobs) -> dict[str, Any]:
    """Threshold chosen on ``tune_seeds``, then each of ``seeds`` scored with it.

    The refusal budget must hold on every tuning seed, not on their pool: an operator's limit is per cluster
    and per day, and a pooled threshold let one of five clusters refuse more than the limit."""
    if knobs.refusal_budget == "calibrated":  # nothing is chosen on this cluster: the calibration is online
        target, threshold, table, mode = "p", knobs.floor, [], "calibrated"
        click.echo(f"online calibration: refuse a chance in the top {knobs.top:.0%} (bucket full) to {knobs.least:.0%} "
                   f"(empty) of the last {knobs.calibration_window} requests, {knobs.rate} tokens a request, "
                   f"{knobs.burst:g} at most; no tuning seeds used", err=True)  # fmt: skip
        tune_seeds = []
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            target, threshold, table, mode, knobs = choose_on_tuning(
                [load_samples(seeded(spec, seed))[0] for seed in tune_seeds], knobs)
        running = {"off": "", "on": f", running budget {knobs.make_budget().limit_words()}",
                   "ranked": f", ranked budget (safety {knobs.rank_safety}, window {knobs.rank_window})",
                   "escalate": f", escalating budget (slope {knobs.slope}, window {knobs.rank_window})"}[mode]
        click.echo(f"chosen on seeds {tune_seeds}: label {target}, thresholds {threshold}{running}", err=True)
    rows, errors = [], []
    for seed in seeds:
        samples, _ = load_samples(seeded(spec, seed))
        scored = _scored(samples, knobs.learn_hours)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            predictions = _predict(samples, knobs)
            advised = predictions if target == "z" else _predict(samples, knobs, target)
            hoeffding = prequential_hoeffding(samples, HoeffdingTrees())
        by_median, by_z = _assess_both(samples, advised, threshold, scored, knobs, seed, mode)
        perfect, trees = hindsight_ceilings(advised, scored, stragglers_by_median(samples, knobs.ratio))
        rows.append(_score_row(f"seed={seed}", by_median, by_z) | {"oracle_avoided_share_at_10": perfect,
                                                                   "trees_hindsight_avoided_share_at_10": trees})
        index = [i for i, on in enumerate(scored) if on]
        for model, found in (("cart", predictions), ("hoeffding", hoeffding)):
            for row in metrics_rows(metrics_by_type(samples, index, [found[i] for i in index]), model):
                errors.append({"run": f"seed={seed}", **row})
    return {"trace": spec, "seeds": seeds, "tune_seeds": tune_seeds, "target": target, "threshold": threshold,
            "refusal_budget": _budget_doc(knobs, mode), "knobs": asdict(knobs), "tuning": table,
            "runs": rows, "summary": summary(rows), "tree_errors": errors}  # fmt: skip


def evaluate_trace(spec: str, knobs: Knobs) -> dict[str, Any]:
    """Learn on the first ``learn_hours``, score the later hours: tree errors per type, and the adviser."""
    samples, _ = load_samples(spec)
    scored = _scored(samples, knobs.learn_hours)
    if not any(scored) or all(scored):
        raise UserError(f"--learn-hours {knobs.learn_hours} leaves nothing to learn from or nothing to score")
    origin = min(s.start_us for s in samples)
    cart = CartTrees(knobs.depth, knobs.min_leaf)
    click.echo(f"{len(samples)} labelled tasks; trees learn on the first {knobs.learn_hours} h ...", err=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        test, cart_pred, hoeff_pred = split_predictions(
            samples, origin + round(knobs.learn_hours * US_PER_H), cart, HoeffdingTrees()
        )
        click.echo("prequential CART for the adviser ...", err=True)
        predictions = _predict(samples, knobs)
    threshold = choose_threshold([p for p, on in zip(predictions, scored, strict=True) if not on], knobs.budget)
    mode = knobs.refusal_budget if knobs.refusal_budget != "auto" else "off"  # nothing to choose it on here
    by_median, by_z = _assess_both(samples, predictions, threshold, scored, knobs, 0, mode)
    biggest = max(cart.types(), key=lambda kind: sum(1 for s in samples if s.task_type == kind), default="")
    errors = metrics_rows(metrics_by_type(samples, test, cart_pred), "cart")
    errors += metrics_rows(metrics_by_type(samples, test, hoeff_pred), "hoeffding")
    budget = _budget_doc(knobs, mode)
    if budget is not None and mode == "calibrated":  # on a trace the learning hours' threshold is the floor
        budget["floor"] = threshold
    return {"trace": spec, "threshold": threshold, "refusal_budget": budget, "knobs": asdict(knobs),
            "runs": [_score_row("trace", by_median, by_z)], "tree_errors": errors,
            "tree": {"task_type": biggest, "text": cart.text(biggest)}}  # fmt: skip


def _budget_doc(knobs: Knobs, mode: str) -> dict[str, Any] | None:
    if mode == "off":
        return None
    budget = knobs.make_budget()
    document = {"mode": mode, "share": budget.share, "window": budget.window, "window_us": budget.window_us}
    if mode == "ranked":
        document |= {"rank_safety": knobs.rank_safety, "rank_window": knobs.rank_window}
    if mode == "escalate":
        document |= {"slope": knobs.slope, "rank_window": knobs.rank_window}
    if mode == "calibrated":
        document = {"mode": mode, "rate": knobs.rate, "top": knobs.top, "least": knobs.least,
                    "window": knobs.calibration_window, "window_us": None, "burst": knobs.burst,
                    "floor": knobs.floor}  # fmt: skip
    return document


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def mean(key: str) -> float:
        values = [r[key] for r in rows if r[key] is not None and not math.isnan(r[key])]
        return statistics.fmean(values) if values else math.nan

    keys = ("refused_share", "avoided_share", "null_avoided_share", "jct_reduction", "null_jct_reduction")
    result: dict[str, Any] = {key: mean(key) for key in keys}
    checks = ("avoided_at_least_half", "refused_at_most_tenth", "jct_beats_null")
    result["acceptance_every_run"] = {check: all(r["acceptance"][check] for r in rows) for check in checks}
    result["acceptance_of_means"] = _acceptance_of(result["avoided_share"], result["refused_share"],
                                                   result["jct_reduction"], result["null_jct_reduction"])
    result["runs_meeting_all"] = sum(all(r["acceptance"].values()) for r in rows)
    return result


def train_all(samples: list[Sample], depth: int, min_leaf: int, target: str = "z") -> CartTrees:
    """CART per type on every labelled placement of the trace (for advice, trees and serving), learning
    ``target`` (z, ratio, or p: straggler or not; ``relabel``)."""
    cart = CartTrees(depth, min_leaf)
    samples = relabel(samples, target)
    for kind in sorted({s.task_type for s in samples}):
        chosen = [s for s in samples if s.task_type == kind]
        if len(chosen) >= 2 * min_leaf:
            cart.fit(kind, [s.x for s in chosen], [s.z for s in chosen])
    return cart
