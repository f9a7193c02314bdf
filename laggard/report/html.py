"""The demo's ``index.html``: what happened, in words first, then the plots, deltas, ranking and counts."""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from laggard.report.progress import RunOutcome, trace_time
from laggard.report.terminal import fraction, sooner
from streams.core.evaluation.detection import DetectionScore

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1000px; margin: 2em auto; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.9em; } td, th { padding: 2px 10px; border-bottom: 1px solid #eee; }
th { text-align: left; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.slow { color: #c62828; font-weight: bold; } .fp { color: #e65100; font-weight: bold; }
figure { margin: 1em 0; } figcaption { color: #555; font-size: 0.9em; } img { max-width: 100%; }
.summary { font-size: 1.08em; line-height: 1.5; background: #f7f7f7; padding: 0.6em 1em; border-radius: 6px; }
"""


@dataclass
class DemoReport:
    """Everything the page shows; ``plots`` maps a PNG file name to its caption."""

    outcome: RunOutcome
    settings: dict[str, Any]
    command: str
    plots: dict[str, str] = field(default_factory=dict)


def story(report: DemoReport) -> list[str]:
    """The paragraphs that say what happened, in plain words."""
    outcome = report.outcome
    truth = outcome.trace.ground_truth or {}
    score = outcome.detection
    counts = outcome.pipeline.counts
    slow = truth.get("slow_nodes", [])
    onset = int(truth.get("onset_us", 0))
    lines = [
        f"A synthetic cluster of {truth.get('nodes', '?')} equal nodes ran {outcome.trace.jobs:,} jobs "
        f"({outcome.trace.tasks:,} tasks, {counts.events:,} events) over {trace_time(counts.last_ts_us)} of "
        f"event time. From {trace_time(onset)} on, {len(slow)} node(s), {_names(slow, 'slow')}, ran their "
        f"work {truth.get('slowdown', '?')}× slower ({truth.get('contention', '?')} contention); every other "
        f"node stayed healthy.",
        f"laggard ranked the nodes every {report.settings['ranking_period_s']:g} s of event time over a "
        f"{report.settings['window_size_s']:g} s window and issued {len(outcome.deltas)} blacklist change(s).",
    ]
    if slow and counts.last_ts_us <= onset:  # recall 0 % and "never" below would read as a miss
        lines.append(f"The trace ended at {trace_time(counts.last_ts_us)}, before the fault onset at "
                     f"{trace_time(onset)}: no node was ever slow (more jobs or an earlier onset would show one).")
    if score is not None:
        lines.extend(_detection_words(score, onset))
    found, truth_avoid = outcome.avoidance()
    if found.moved and found.mean_reduction is not None:
        ideal = (
            f", {sooner(truth_avoid.mean_reduction)} had exactly the slow nodes been listed from the onset"
            if truth_avoid is not None and truth_avoid.mean_reduction is not None
            else ""
        )
        lines.append(
            f"Had the scheduler honoured the blacklist, {found.moved:,} task(s) of {found.affected_jobs:,} job(s) "
            f"would have run elsewhere in about {found.moved_mean_s_after:,.0f} s instead of "
            f"{found.moved_mean_s_before:,.0f} s. Averaged over the {found.over_jobs:,} jobs either list touched, "
            f"jobs would have ended {sooner(found.mean_reduction)}{ideal}, and "
            f"{sooner(found.mean_baseline or 0.0)} with as many random tasks moved instead."
        )
    return lines


def _detection_words(score: DetectionScore, onset_us: int) -> list[str]:
    words = []
    for node, delay in score.onset_to_blacklist_s.items():
        first = score.first_blacklisted_us(node)
        if first is None or delay is None:
            words.append(f"<span class='slow'>{escape(node)}</span> was never blacklisted (missed).")
        elif delay < 0:
            words.append(
                f"<span class='slow'>{escape(node)}</span> was blacklisted at {trace_time(first)}, "
                f"{-delay:,.0f} s <em>before</em> its fault began (a lucky guess, not evidence)."
            )
        else:
            words.append(
                f"<span class='slow'>{escape(node)}</span> was blacklisted at {trace_time(first)}, "
                f"{delay / 60:,.0f} min after the fault onset."
            )
    caught = len(score.true_positives)
    listed = len(score.blacklisted)
    words.append(
        f"Precision {fraction(score.precision)} ({caught} of {listed} blacklisted node(s) really slow), "
        f"recall {fraction(score.recall)} ({caught} of {len(score.slow_nodes)} slow node(s) caught)."
    )
    if score.false_positives:
        words.append(f"False positives: {_names(score.false_positives, 'fp')} (healthy, blacklisted by chance).")
    else:
        words.append("No healthy node was blacklisted.")
    return words


def _names(names: list[str], css: str) -> str:
    return ", ".join(f"<span class='{css}'>{escape(name)}</span>" for name in names) or "none"


def write_report(report: DemoReport, out_dir: Path) -> Path:
    """Write ``index.html`` into ``out_dir`` (the PNGs named in ``report.plots`` are already there)."""
    parts = [
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>laggard demo</title>"
        f"<style>{STYLE}</style></head><body>",
        "<h1>laggard demo: finding slow nodes in a synthetic cluster</h1>",
    ]
    parts.append("<div class='summary'>" + "".join(f"<p>{line}</p>" for line in story(report)) + "</div>")
    for name, caption in report.plots.items():
        parts.append(
            f"<figure><img src='{escape(name)}' alt='{escape(caption)}'>"
            f"<figcaption>{escape(caption)}</figcaption></figure>"
        )
    parts += _deltas_html(report.outcome), _ranking_html(report.outcome), _settings_html(report)
    parts.append("</body></html>")
    path = out_dir / "index.html"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def _deltas_html(outcome: RunOutcome) -> str:
    slow = set((outcome.trace.ground_truth or {}).get("slow_nodes", []))
    items = []
    for delta in outcome.deltas:
        changes = [
            f"<li>+ <span class='{'slow' if e.node_id in slow else 'fp'}'>{escape(e.node_id)}</span>: "
            f"{escape(e.reason)}</li>"
            for e in delta.added
        ]
        changes += [f"<li>− {escape(r.node_id)}: {escape(r.reason)}</li>" for r in delta.removed]
        items.append(f"<li>version {delta.version} at {trace_time(delta.issued_at_us)}<ul>{''.join(changes)}</ul></li>")
    body = f"<ol>{''.join(items)}</ol>" if items else "<p>The blacklist never changed.</p>"
    return f"<h2>Blacklist deltas</h2>{body}"


def _ranking_html(outcome: RunOutcome) -> str:
    last = outcome.pipeline.last_ranking
    if last is None:
        return "<h2>Final ranking</h2><p>No ranking was made.</p>"
    slow = set((outcome.trace.ground_truth or {}).get("slow_nodes", []))
    rows = []
    for row in last.ranking.ranked:
        s = row.stats
        assert s is not None
        interval = "–" if s.ci_low is None or s.ci_high is None else f"[{s.ci_low:+.3f}, {s.ci_high:+.3f}]"
        css = " class='slow'" if row.node_id in slow else ""
        verdict = "BLACKLISTED" if row.blacklisted else ("" if row.level else row.reason)
        rows.append(
            f"<tr><td class='num'>{row.level}</td><td{css}>{escape(row.node_id)}</td>"
            f"<td class='num'>{s.n}</td><td class='num'>{s.mean:+.3f}</td><td class='num'>{s.std:.3f}</td>"
            f"<td class='num'>{interval}</td><td>{escape(verdict)}</td></tr>"
        )
    ranking = last.ranking
    return (
        f"<h2>Final ranking</h2><p>Window {trace_time(max(0, ranking.window_start_us))} to "
        f"{trace_time(ranking.window_end_us)}; injected slow nodes in red.</p><table><tr><th>level</th>"
        f"<th>node</th><th>n</th><th>mean z</th><th>std</th><th>95 % interval</th><th>verdict</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _settings_html(report: DemoReport) -> str:
    rows = "".join(f"<tr><td>{escape(str(k))}</td><td>{escape(str(v))}</td></tr>" for k, v in report.settings.items())
    counts = report.outcome.pipeline.counts
    return (
        f"<h2>Settings and run</h2><table>{rows}</table><p>{counts.events:,} events, {counts.samples:,} "
        f"z-values, {counts.rankings} rankings in {report.outcome.seconds:.1f} s of wall time. "
        f"Reproduce with <code>{escape(report.command)}</code>.</p>"
    )
