"""The running policy's listing rule replayed offline over tallies from scripts/running_tallies.py, with the
cluster's spread of node effects estimated several ways (issue 21, sessions 8-10).

Usage: PYTHONPATH=. python scripts/running_spread.py TALLY_DIR [--release] [--estimator=NAME ...] [--markdown]
[--rules=TEXT ...] (tuning seeds 101+ only; ``--estimator`` keeps only the named spread estimators, ``--markdown``
prints one table row per rule, ``--rules`` keeps only rules whose name holds one of the texts). Prints, per rule
and spread estimator and per scenario, chance listings (healthy nodes ever listed) / faulty nodes never listed
while slow (the median minutes from onset to listing) and the mean spread (tau, the square root of the estimate,
over every 5-minute look). Rules: ``plain`` (session 7's levels, no spread); ``shipped``, the detector's rule
exactly (``registry.running_detector`` at a 60-s period; session 10's): the 10-20 minute scans at z 4.75 every
minute, each listing at once at 4.5 against the spread as well, otherwise after 3 consecutive passing minutes; the
60-minute window every 5 minutes at a plain z 4.6, at once at 4.3 against the spread as well, otherwise after 3
consecutive passing looks; three windows every 5 minutes at 4.9 and at 4.0 with an effect of at least 1.5, against
the spread; ``session 9``: the rule before, the window and the scans plain and at once; ``window~L``: the window
against the spread at L instead of its plain 4.6; ``window 4.6 & ~L``: at L against the spread as well as its plain
4.6 (session 9 tried 4.3 in the detector: zero chance listings on the tuning days, but on reported seeds 1-5 it
left a third of hetero-wide-2x's 2x nodes and most of hetero-1.5x's unlisted; not shipped); session 9's later
candidates (``window_candidate``): ``window 4.6 & ~L`` for more L, ``... if eff < E`` (the spread level asked only
of nodes whose window effect is below E job std), ``window 4.6 xR`` / ``... xR`` (R consecutive 5-minute looks must
pass) and ``window 4.6 & change C`` (the window's effect also C standard errors above the node's own 180-minute
effect of an hour earlier, ``change_z``), ``window 4.6 & (~L or xR)`` (at once at L against the spread, otherwise
only after R consecutive passing looks); session 10's ``s10 window W scans S`` (``session10``), each ``(L, R)`` so,
the scans too. All but ``shipped`` and ``s10 ...`` keep session 9's plain scans.

The spread is taken over the three-window tallies of nodes with >= 5 tasks, by each estimator:

* ``mad``: session 8's ``(1.4826 MAD)^2 - median(1 / information)``;
* ``std``: ``censored.node_spread`` untrimmed (each node standardised by its own noise + tau^2);
* ``trim C``: ``censored.node_spread`` leaving out nodes C or more random-effects z from the centre;
* ``drop z3``: ``mad`` over the nodes whose plain three-window z is below 3;
* ``moment C``: ``trimmed_moment`` (below), trimming as ``trim C``.

With ``--release``, the release of every slow node listed by ``shipped`` with the default estimator, replayed at
3.0 standard errors with and without an information floor of 3.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
from scipy import optimize, special

from streams.core.detection.censored import SPREAD_TRIM_Z, node_spread

sys.path.insert(0, str(Path(__file__).parent))
from running_levels import _scenario

MIN = 60_000_000
# (scale minutes, level, look every N minutes, min effect, judged against the spread: True, or a level the z
# against the spread must reach as well as the plain z its level)
SCANS = [(m, 4.75, 1, 0.3, False) for m in (10, 12, 15, 20)]
PLAIN = [*SCANS, (60, 4.6, 5, 0.3, False), (180, 4.9, 5, 0.3, False)]
THREE = [(180, 4.9, 5, 0.3, True), (180, 4.0, 5, 1.5, True)]  # three windows against the spread
SESSION9 = [*SCANS, (60, 4.6, 5, 0.3, False), *THREE]  # the rule shipped until session 10
Estimator = Callable[[np.ndarray, np.ndarray, np.ndarray], float]  # effects, information, plain z -> tau^2


def mad_spread(effects: np.ndarray, info: np.ndarray, z: np.ndarray) -> float:
    """Session 8's estimator (``node_spread`` before session 9)."""
    if len(effects) < 10:
        return 0.0
    median = float(np.median(effects))
    mad = 1.4826 * float(np.median(np.abs(effects - median)))
    return max(0.0, mad * mad - float(np.median(1.0 / info)))


def trimmed_moment(effects: np.ndarray, info: np.ndarray, trim_z: float) -> float:
    """Candidate: ``node_spread``'s trimming, but ``tau^2`` from the kept nodes' mean squared standardised
    distance from their information-weighted mean (Paule-Mandel), set to a normal's cut at ``+-trim_z``: more
    efficient than a median distance, so less chance spread on equal nodes."""
    if len(effects) < 10:
        return 0.0
    noise, keep = 1.0 / info, np.ones(len(effects), dtype=bool)
    tau2 = node_spread(effects, info, trim_z=trim_z)
    target = 1.0 - 2 * trim_z * math.exp(-trim_z * trim_z / 2) / math.sqrt(2 * math.pi) / (
        2 * float(special.ndtr(trim_z)) - 1)
    for _ in range(10):
        w = 1.0 / (noise + tau2)
        center = float(np.sum(w[keep] * effects[keep]) / np.sum(w[keep]))
        keep = np.abs(effects - center) < trim_z * np.sqrt(noise + tau2)
        e, v, n = effects[keep], noise[keep], int(keep.sum())

        def excess(t2: float, e: np.ndarray = e, v: np.ndarray = v, n: int = n) -> float:
            w = 1.0 / (v + t2)
            c = np.sum(w * e) / np.sum(w)
            return float(np.sum((e - c) ** 2 * w)) / (n - 1) - target

        top = float(np.ptp(e)) ** 2 + 1.0
        new = 0.0 if excess(0.0) <= 0 else float(optimize.brentq(excess, 0.0, top, xtol=1e-7))
        if abs(new - tau2) < 1e-6:
            return new
        tau2 = new
    return tau2


ESTIMATORS: dict[str, Estimator] = {
    "mad": mad_spread,
    "std": lambda e, i, z: node_spread(e, i, trim_z=math.inf),
    **{f"trim {c:g}": partial(lambda e, i, z, c: node_spread(e, i, trim_z=c), c=c) for c in (2.0, 2.5, 3.0)},
    "drop z3": lambda e, i, z: mad_spread(e[z < 3.0], i[z < 3.0], z),
    **{f"moment {c:g}": partial(lambda e, i, z, c: trimmed_moment(e, i, c), c=c) for c in (2.5, 3.0)},
}
ONLY: list[str] = []  # --rules=TEXT (repeatable): only rules whose name holds one of them
DEFAULT = f"trim {SPREAD_TRIM_Z:g}"  # what censored.node_spread does with its default


def spread_z(data: dict[str, np.ndarray], estimator: Estimator) -> tuple[np.ndarray, list[float]]:
    """z judged against the spread of node effects over the 180-min tallies, every scale, at every look (the
    shipped spread scales judge at 5-minute looks only; session 10's scan candidates every minute), and tau at
    the 5-minute looks."""
    z, effect, tasks = data["z"].astype(float), data["effect"].astype(float), data["tasks"]
    with np.errstate(divide="ignore", invalid="ignore"):
        info = np.nan_to_num(np.where(effect != 0, (z / effect) ** 2, 0.0))
    j = list(data["scales"]).index(180)
    out, taus = z.copy(), []
    for k in range(z.shape[0]):
        ok = (tasks[k, :, j] >= 5) & (info[k, :, j] > 0)
        tau2 = estimator(effect[k, ok, j], info[k, ok, j], z[k, ok, j])
        if (data["ends"][k] // MIN) % 5 == 0:
            taus.append(math.sqrt(tau2))
        out[k] = z[k] / np.sqrt(1.0 + tau2 * info[k])
    return out, taus


def first_listing(data: dict[str, np.ndarray], zs: np.ndarray, rule: list) -> np.ndarray:
    """Per node, the first look it is listed at (-1: never); no listing in the first hour (the warm-up).

    A rule entry may carry two more fields (session 9's later candidates, none shipped): ``below``, the spread level
    (``spread`` a number) asked only of nodes whose effect on that scale is below it (at or above it the plain
    level alone lists); ``repeat``, how many consecutive looks of that scale must all pass."""
    scales, minutes = list(data["scales"]), data["ends"] // MIN
    hit = np.zeros(data["z"].shape[:2], dtype=bool)
    for m, level, every, min_effect, spread, *extra in rule:
        below, repeat = (extra[0] if extra else math.inf), (extra[1] if len(extra) > 1 else 1)
        j = scales.index(m)
        z = (zs if spread is True else data["z"])[:, :, j]
        if isinstance(spread, str):  # "change L": z of the effect against the node's own earlier effect
            also = change_z(data, j) >= float(spread.split()[1])
        else:
            also = zs[:, :, j] >= spread if not isinstance(spread, bool) else True  # against the spread too
        if not isinstance(spread, (bool, str)) and below != math.inf:
            also = also | (data["effect"][:, :, j] >= below)
        at = (minutes % every == 0)[:, None]
        passed = (data["tasks"][:, :, j] >= 5) & (data["effect"][:, :, j] >= min_effect) & (z >= level) & also & at
        if repeat > 1:
            looks = np.flatnonzero(at[:, 0])  # this scale's looks; a listing needs `repeat` passes in a row
            run = passed[looks].astype(int)
            for r in range(1, int(repeat)):
                run[r:] += passed[looks][:-r]
            run[: int(repeat) - 1] = 0
            passed = np.zeros_like(passed)
            passed[looks] = run >= repeat
        hit |= passed
    hit &= (data["ends"] >= 60 * MIN)[:, None]
    return np.where(hit.any(axis=0), hit.argmax(axis=0), -1)


def change_z(data: dict[str, np.ndarray], j: int, lag: int = 60) -> np.ndarray:
    """Session 9's later candidate: scale ``j``'s effect at each look judged against the node's own effect over the
    180 minutes that ended ``lag`` minutes earlier (its baseline; a static hardware offset cancels), in standard
    errors of the difference; +inf where the baseline holds < 5 tasks (no baseline: the plain rule alone)."""
    z, effect, tasks = data["z"].astype(float), data["effect"].astype(float), data["tasks"]
    with np.errstate(divide="ignore", invalid="ignore"):
        info = np.nan_to_num(np.where(effect != 0, (z / effect) ** 2, 0.0))
    b = list(data["scales"]).index(180)
    out = np.full(z.shape[:2], math.inf)
    base_e, base_i, base_n = effect[:-lag, :, b], info[:-lag, :, b], tasks[:-lag, :, b]
    now_e, now_i = effect[lag:, :, j], info[lag:, :, j]
    with np.errstate(divide="ignore", invalid="ignore"):
        diff = (now_e - base_e) / np.sqrt(1.0 / now_i + 1.0 / base_i)
    out[lag:] = np.where((base_n >= 5) & (base_i > 0) & (now_i > 0), diff, math.inf)
    return out


def found_effect(data: dict[str, np.ndarray], zs: np.ndarray, rule: list, i: int, k: int) -> float:
    """The effect node ``i`` was listed with at look ``k`` (the shortest scale that listed it)."""
    scales = list(data["scales"])
    for m, level, every, min_effect, spread, *_ in rule:  # a repeat entry: its one look (the effect it saw)
        j = scales.index(m)
        also = isinstance(spread, bool) or zs[k, i, j] >= spread
        if (data["tasks"][k, i, j] >= 5 and data["effect"][k, i, j] >= min_effect and also
                and (zs if spread is True else data["z"])[k, i, j] >= level and (data["ends"][k] // MIN) % every == 0):
            return float(data["effect"][k, i, j])
    raise ValueError(f"node {i} was not listed at look {k}")


def release(data: dict[str, np.ndarray], i: int, k: int, found: float, floor: float) -> int | None:
    """The first look after ``k`` where a scale holding only tasks since the listing shows node ``i``'s effect
    3.0 standard errors below half the one it was found with, over >= 5 tasks and ``floor`` information."""
    scales, ends = list(data["scales"]), data["ends"]
    for q in range(k + 1, len(ends)):
        for m in (10, 12, 15, 20, 60, 180):
            j = scales.index(m)
            z, eff, n = (float(data[c][q, i, j]) for c in ("z", "effect", "tasks"))
            info = (z / eff) ** 2 if z and eff else 0.0
            if (m * MIN <= ends[q] - ends[k] and n >= 5 and info >= floor
                    and eff + 3.0 / math.sqrt(max(info, 1e-12)) < 0.5 * found):
                return q
    return None


def _score(data: dict[str, np.ndarray], first: np.ndarray, row: dict[str, list[float]]) -> None:
    spans, nodes = json.loads(str(data["spans"])), list(data["nodes"])
    row["chance"] += [1.0 for i, n in enumerate(nodes) if first[i] >= 0 and n not in spans]
    for node, node_spans in spans.items():
        i = nodes.index(node)
        at = data["ends"][first[i]] if first[i] >= 0 else None
        end = node_spans[-1][1]
        if at is None or at < node_spans[0][0] or (end is not None and at >= end):
            row["never"].append(1.0)
        else:
            row["delay"].append((at - node_spans[0][0]) / MIN)


def _releases(data: dict[str, np.ndarray], zs: np.ndarray, first: np.ndarray, out: dict) -> None:
    spans, nodes, scenario = json.loads(str(data["spans"])), list(data["nodes"]), str(data["scenario"])
    for node, node_spans in spans.items():
        i, end = nodes.index(node), node_spans[-1][1]
        k = first[i]
        if k < 0 or data["ends"][k] < node_spans[0][0] or (end is not None and data["ends"][k] >= end):
            continue
        found = found_effect(data, zs, SHIPPED, i, k)
        for floor in (0.0, 3.0):
            q = release(data, i, k, found, floor)
            if q is None:
                out.setdefault((scenario, floor), []).append("never")
                continue
            active = any(a <= data["ends"][q] < (b or 1 << 62) for a, b in node_spans)
            late = (data["ends"][q] - end) / MIN if end is not None and not active else None
            out.setdefault((scenario, floor), []).append("flap" if active else f"{late}")


def window_rule(level: float, plain: bool = False) -> list:
    """The shipped rule with the 60-minute window judged against the spread at ``level`` instead of its plain
    z at 4.6 (``plain``: as well as)."""
    return [*SCANS, (60, 4.6, 5, 0.3, level) if plain else (60, level, 5, 0.3, True), *THREE]


def window_candidate(spread_level: float | None, below: float = math.inf, repeat: int = 1) -> list:
    """Session 9's later candidates: the shipped rule with its plain 60-minute window at 4.6 asking as well z
    ``spread_level`` against the spread (None: not) of nodes whose window effect is below ``below`` job std, over
    ``repeat`` consecutive 5-minute looks."""
    spread = False if spread_level is None else spread_level
    return [*SCANS, (60, 4.6, 5, 0.3, spread, below, repeat), *THREE]


RULES = {**{f"window~{level:g}": window_rule(level) for level in (4.0, 4.3, 4.6)},
         **{f"window 4.6 & ~{level:g}": window_rule(level, True) for level in (3.5, 4.0, 4.3)},
         **{f"window 4.6 & ~{level:g}": window_candidate(level) for level in (4.2, 4.4, 4.5)},
         **{f"window 4.6 & ~{level:g} if eff < {below:g}": window_candidate(level, below)
            for level in (4.0, 4.3, 4.5) for below in (0.8, 1.0, 1.2)},
         **{f"window 4.6 x{repeat}": window_candidate(None, repeat=repeat) for repeat in (2, 3)},
         **{f"window 4.6 & ~{level:g} x2": window_candidate(level, repeat=2) for level in (4.0, 4.3)},
         **{f"window 4.6 & change {level:g}": [*SCANS, (60, 4.6, 5, 0.3, f"change {level:g}"), *THREE]
            for level in (2.0, 2.5, 3.0, 3.5)},
         # at once at L against the spread, else only over R consecutive looks (two entries: either lists)
         **{f"window 4.6 & (~{level:g} or x{repeat})": [*SCANS, (60, 4.6, 5, 0.3, level),
                                                       (60, 4.6, 5, 0.3, False, math.inf, repeat), *THREE]
            for level in (3.5, 4.0, 4.3) for repeat in (2, 3)}}


def either(m: float, level: float, every: int, at_once: float | None, repeat: int) -> list:
    """One scale listing at once at ``at_once`` against the spread (None: never at once), otherwise only after
    ``repeat`` consecutive passing looks (1: at once on its plain level, the shipped scales)."""
    if repeat == 1:
        return [(m, level, every, 0.3, False)]
    once = [] if at_once is None else [(m, level, every, 0.3, at_once)]
    return [*once, (m, level, every, 0.3, False, math.inf, repeat)]


def session10(window: tuple[float | None, int], scans: tuple[float | None, int] = (None, 1)) -> list:
    """Session 10's candidates: the shipped rule with the window and the scans each ``(at_once, repeat)``
    (``either``; a scan's looks are every minute, so its repeat counts minutes); (None, 1) is the shipped scale."""
    return [*(entry for m, *_ in SCANS for entry in either(m, 4.75, 1, *scans)),
            *either(60, 4.6, 5, *window), *THREE]


SESSION10 = {f"s10 window {w} scans {s}": session10(w, s)
             for w in ((None, 1), (3.5, 3), (4.0, 3), (4.3, 3))
             for s in ((None, 1), (4.0, 3), (4.3, 3), (4.5, 3), (4.5, 5), (None, 3), (None, 5))}
RULES |= SESSION10
# Session 10's choice, the detector's rule (registry.running_detector): the window listed at once at z 4.3 against
# the spread as well as its plain 4.6, otherwise after 3 consecutive passing 5-minute looks; each scan at once at
# 4.5 against the spread as well as its plain 4.75, otherwise after 3 consecutive passing minutes.
SHIPPED = RULES["shipped"] = session10((4.3, 3), (4.5, 3))
RULES["session 9"] = SESSION9
RULES |= {f"s10 window {w} scans ~{level:g}": [*((m, 4.75, 1, 0.3, level) for m, *_ in SCANS),
                                               *either(60, 4.6, 5, *w), *THREE]
          for w in ((None, 1), (3.5, 3), (4.0, 3), (4.3, 3)) for level in (4.0, 4.3, 4.5)}


def main(folder: Path, releases_too: bool, estimators: list[str] | None = None, markdown: bool = False) -> None:
    table: dict[tuple[str, str], dict[str, list[float]]] = {}
    releases: dict[tuple[str, float], list[str]] = {}
    for path in sorted(folder.glob("*.npz")):
        data = dict(np.load(path))
        data["scenario"] = np.array(_scenario(path))
        _score(data, first_listing(data, data["z"], PLAIN),
               table.setdefault(("plain", _scenario(path)), {"chance": [], "never": [], "delay": [], "tau": []}))
        for name, estimator in ESTIMATORS.items():
            if estimators and name not in estimators:
                continue
            zs, taus = spread_z(data, estimator)
            for rule_name, rule in RULES.items():
                if ONLY and not any(o in rule_name for o in ONLY):
                    continue
                first = first_listing(data, zs, rule)
                row = table.setdefault((f"{rule_name}, {name}", _scenario(path)),
                                       {"chance": [], "never": [], "delay": [], "tau": []})
                row["tau"] += taus
                _score(data, first, row)
                if releases_too and name == DEFAULT and rule is SHIPPED:
                    _releases(data, zs, first, releases)
    scenarios = sorted({scenario for _, scenario in table})
    if markdown:
        _markdown(table, scenarios)
        return
    print("rule, estimator: per scenario chance listings / never listed while slow (median minutes to listing), "
          "mean tau")
    for rule_name in sorted({r for r, _ in table}, key=lambda r: (r != "plain", r)):
        cells = []
        for scenario in scenarios:
            row = table.get((rule_name, scenario))
            if row is None:
                continue
            delay = f" ({np.median(row['delay']):.0f})" if row["delay"] else ""
            tau = f" t{np.mean(row['tau']):.3f}" if row["tau"] else ""
            cells.append(f"{scenario} {len(row['chance'])}/{len(row['never'])}{delay}{tau}")
        print(f"{rule_name}: " + "; ".join(cells))
    for (scenario, floor), values in sorted(releases.items()):
        late = sorted(float(v) for v in values if v not in ("flap", "never", "None"))
        median = f"{np.median(late):.1f}" if late else "-"
        print(f"{scenario:18} release floor {floor:g}: flaps {values.count('flap')}, never released "
              f"{values.count('never')}, recovery to release med {median} min (n {len(late)})")


def _markdown(table: dict[tuple[str, str], dict[str, list[float]]], scenarios: list[str]) -> None:
    """One row per rule: chance listings on every scenario, then never listed while slow (of how many) and the
    median minutes from onset to listing on the faulty ones."""
    counts = {s: table[("plain", s)]["never"] + table[("plain", s)]["delay"] for s in scenarios}
    print("| rule | " + " | ".join(f"{s} ({len(counts[s])})" if counts[s] else s for s in scenarios) + " |")
    print("|---" * (len(scenarios) + 1) + "|")
    for rule_name in sorted({r for r, _ in table}, key=lambda r: (r != "plain", r != f"shipped, {DEFAULT}", r)):
        cells = [table_cell(table.get((rule_name, scenario), {"chance": [], "never": [], "delay": []}),
                            bool(counts[scenario])) for scenario in scenarios]
        print(f"| {rule_name} | " + " | ".join(cells) + " |")


def table_cell(row: dict, faulty: bool) -> str:
    """One cell of the markdown tables: chance listings, and on a faulty scenario the slow nodes never listed
    with the median minutes from onset to listing (also scripts/running_ratio.py's)."""
    cell = f"{len(row['chance'])}"
    if faulty:
        delay = f" ({np.median(row['delay']):.0f})" if row["delay"] else ""
        cell += f" / {len(row['never'])}{delay}"
    return cell


if __name__ == "__main__":
    flags = sys.argv[2:]
    ONLY[:] = [f.split("=", 1)[1] for f in flags if f.startswith("--rules=")]
    chosen = [f.split("=", 1)[1] for f in flags if f.startswith("--estimator=")]
    main(Path(sys.argv[1]), "--release" in flags, chosen or None, "--markdown" in flags)
