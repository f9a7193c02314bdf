"""``laggard advise serve`` (the Kubernetes scheduler-extender endpoint) and what it shares with ``advise query``:
the adviser learned from a trace, the threshold's default, a saved budget's kind."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from laggard.commands.advise_options import (
    budget_options,
    calibrated_option,
    make_budget,
    parse_threshold,
    target_option,
)
from laggard.commands.advise_runs import load_samples, train_all
from laggard.commands.options import bootstrap_option, formats_epilog, probe_bind, serve_health, settings_with
from laggard.errors import UserError
from streams.core.avoidance.adviser import Adviser
from streams.core.avoidance.budget import RefusalBudget
from streams.core.avoidance.calibration import CalibratedBudget
from streams.core.avoidance.evaluation import Sample
from streams.core.avoidance.status import NodeStatusTracker
from streams.core.avoidance.trees import CartTrees

POOLED = "all"  # the tree of every type together: what a pod that names no type is judged by


def adviser_from(spec: str, depth: int, min_leaf: int, threshold: str, target: str = "z",
                 pooled: bool = False) -> tuple[Adviser, NodeStatusTracker, int, list[str]]:  # fmt: skip
    """The adviser trained on ``spec`` (with ``pooled``, also a tree of every type together, ``all``), the node
    tracker at its end, that end, and the task types of its samples. A trace that grows no tree is refused: an
    adviser without one allows every node and says so only in each answer's words."""
    default, per_type = parse_threshold(threshold)
    outside = [value for value in (default, *per_type.values()) if not 0.0 <= value <= 1.0]
    if target == "p" and outside:  # a negative one avoided every node; one above 1 none
        within = f" (in {threshold})" if "," in threshold or "=" in threshold else ""
        raise click.UsageError(f"--target p compares a chance of straggling, between 0 and 1, with --threshold: not "
                               f"{outside[0]:g}{within}")
    tracker = NodeStatusTracker()
    samples, _ = load_samples(spec, tracker)
    end_us = max(s.label_us for s in samples)
    trees = learned_trees(spec, samples, depth, min_leaf, target)
    types = sorted({s.task_type for s in samples})
    unknown = sorted(set(per_type) - set(trees.trees) - ({POOLED} if pooled else set()))
    if unknown:  # a threshold no tree reads was silently ignored
        raise click.UsageError(f"--threshold names task type(s) with no tree in {spec}: {', '.join(unknown)} (trees: "
                               f"{', '.join(sorted(trees.trees))})")
    if pooled and POOLED not in trees.trees:  # a trace with enough untyped tasks has its own tree for them
        every = train_all([replace(s, task_type=POOLED) for s in samples], depth, min_leaf, target)
        trees.trees.update(every.trees)
    return Adviser(trees, default, thresholds=per_type, label=target), tracker, end_us, types


def learned_trees(spec: str, samples: list[Sample], depth: int, min_leaf: int, target: str = "z") -> CartTrees:
    """The trees of ``samples`` (``train_all``); refused in one line when they grow none."""
    trees = train_all(samples, depth, min_leaf, target)
    if not trees.trees:
        counts = Counter(s.task_type for s in samples)
        most, count = counts.most_common(1)[0]
        raise UserError(f"no tree learned from {spec}: a tree needs {2 * min_leaf} placements of one task type, "
                        f"and the most the trace has is {count} (type {most!r}); give a longer trace")
    return trees


def default_threshold(threshold: str | None, target: str, calibrated: bool) -> str:
    """``--threshold``, or its default: 1.0 on expected z, 0 (a floor) with --calibrated. A chance of straggling
    (--target p) has no default: 1.0 there avoided nothing, whatever the trees said."""
    if threshold is not None:
        return threshold
    if target == "p" and not calibrated:
        raise click.UsageError("--target p predicts a chance of straggling: give --threshold (e.g. 0.3, or `laggard "
                               "advise eval`'s per-type choice as TYPE=P,... with a bare number for the other types)")
    return "0" if calibrated else "1.0"


def same_kind(budget: object, calibrated: bool, where: str) -> None:
    """A saved budget of the other kind than the flags ask for is one clear line: the threshold's default
    follows --calibrated (a floor of 0 there, a z of 1.0 otherwise), so a first-come budget restored under
    --calibrated would refuse every node above z 0, and a calibration restored without it would floor at 1.0."""
    if isinstance(budget, CalibratedBudget) != calibrated:
        saved, flag = ("a calibrated budget", "add --calibrated") if not calibrated else \
            ("a first-come budget", "drop --calibrated")
        raise UserError(f"{where} holds {saved}; {flag} or remove the file")


@click.command("serve", epilog=formats_epilog())
@click.option("--trace", "spec", required=True,
              help="FORMAT:PATH the trees learn from (and node status without --kafka)")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(0, 65535), default=8088, show_default=True, help="0: a free port")
@click.option("--threshold", default=None,
              help="avoid above this expected z (or chance, --target p); per type as TYPE=Z,... (e.g. eval's choice: "
                   "--target p --threshold 0.35,compute=0.30,memory=0.41: a bare number for the other types and pods "
                   "of no type) [default: 1.0; 0 with --calibrated; --target p needs one]")
@target_option
@click.option("--blacklist", type=click.Path(dir_okay=False, path_type=Path),
              help="a file adapter's blacklist file, re-read when it changes; listed nodes are filtered")
@click.option("--kafka", "live", is_flag=True,
              help="keep node status live from Kafka's task-events and node-samples (settings as the adapters)")
@bootstrap_option
@click.option("--state", "state_file", type=click.Path(dir_okay=False, path_type=Path),
              help="with --kafka: node status and offsets saved here and restored at start (survives restarts)")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None,
              help="serve /metrics, /livez and /readyz on this port (0: none) [default: setting LAGGARD_METRICS_PORT]")
@budget_options
@calibrated_option
def serve(spec: str, host: str, port: int, threshold: str | None, target: str, blacklist: Path | None, live: bool,
          bootstrap: str | None, state_file: Path | None, metrics_port: int | None, budget_share: float,
          budget_window: str, **calibration: Any) -> None:  # fmt: skip
    """Serve filter and prioritize of the Kubernetes scheduler-extender protocol (POST /filter, /prioritize).

    A pod names its task type with the `laggard.io/task-type` annotation or label; a pod without one is judged by
    the tree of every type together (`all`). Once it serves, SIGINT or SIGTERM stops it (exit 0)."""
    from adapters.extender import BlacklistFile, Extender, LiveStatus, StatusOf
    from adapters.extender_feed import StatusFeed
    from laggard.commands.adapter import setup_adapter_logging

    if state_file is not None and not live:
        raise click.UsageError("--state needs --kafka: without it node status is rebuilt from the trace at every "
                               "start")
    if bootstrap is not None and not live:
        raise click.UsageError("--bootstrap needs --kafka: without it node status comes from the trace, not from a "
                               "broker")
    settings = settings_with(bootstrap, metrics_port=metrics_port)
    # before the trees are trained (a minute and more on a large trace): a port in use is said at once
    _check_free(host, port, "serve on")
    if settings.metrics_port:
        _check_free(settings.metrics_host, settings.metrics_port, "serve metrics on")
    if blacklist is not None and not blacklist.exists():
        click.echo(f"note: --blacklist {blacklist} does not exist (yet): no node is filtered as listed until a file "
                   "adapter writes it there (it does at its first version)", err=True)
    calibrated = bool(calibration["calibrated"])  # make_budget takes the flag out of ``calibration``
    threshold = default_threshold(threshold, target, calibrated)
    budget = make_budget(budget_share, budget_window, calibration)
    adviser, tracker, end_us, _ = adviser_from(spec, 4, 50, threshold, target, pooled=True)
    never = [kind for kind in sorted(adviser.trees.trees) if adviser.threshold_for(kind) >= 1.0]
    if target == "p" and not calibrated and never:  # a chance is never above 1: their pods would pass everywhere
        pooled_words = f" (`{POOLED}` judges pods of no task type)" if POOLED in never else ""
        raise click.UsageError(f"--threshold leaves the tree(s) {', '.join(never)} at a chance of 1, which avoids "
                               f"nothing{pooled_words}: add a bare number for them (e.g. --threshold "
                               "0.35,compute=0.30)")
    adviser.budget = budget
    setup_adapter_logging()  # a pass the spent budget allows, a pod type with no tree: logged, as adapters log
    logging.getLogger("aiohttp.server").addFilter(_one_line_client_faults)
    lock = None
    health = serve_health(settings)
    feed: StatusFeed | None = None
    status_of: StatusOf
    if live:
        status = (LiveStatus.load(state_file) if state_file else None) or LiveStatus(NodeStatusTracker())
        if status.budget is None or budget is None:  # a saved budget (and its window) wins over the flags
            status.budget = budget
        elif state_file is not None:
            same_kind(status.budget, calibrated, f"--state {state_file}")
        adviser.budget, lock = status.budget, status.lock
        feed = StatusFeed(settings, status, state_file, health=health)
        _start_feed(feed)
        click.echo(f"node status from Kafka at {settings.bootstrap_servers}, event time {status.now_us}", err=True)
        status_of = status.status
    else:
        status_of = _at(tracker, end_us)
        if health is not None:
            health.set(None, None)
    extender = Extender(adviser, status_of, BlacklistFile(blacklist), lock)
    click.echo(_trees_line(adviser), err=True)
    try:
        asyncio.run(_serve(extender, host, port, _budget_words(adviser)))
    finally:
        if feed is not None:
            feed.stop()


def _one_line_client_faults(record: logging.LogRecord) -> bool:
    """A client that hangs up mid-request, or sends a header aiohttp cannot parse, is the client's fault: one
    WARNING line, not aiohttp's 18-line ERROR traceback each time."""
    error = record.exc_info[1] if record.exc_info else None
    if isinstance(error, ConnectionError) or type(error).__module__ == "aiohttp.http_exceptions":
        record.exc_info, record.exc_text = None, None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        words = " ".join(str(error).split())  # aiohttp's parse errors span lines
        record.msg, record.args = "%s: %s: %s", (record.getMessage(), type(error).__name__, words)  # names the client
    return True


def _check_free(host: str, port: int, what: str) -> None:
    """``probe_bind`` before the trees are trained (0: any port, nothing to check): in use, unknown or not local is
    one line."""
    if not port:
        return
    try:
        probe_bind(host, port)
    except OSError as exc:
        raise UserError(f"cannot {what} {host}:{port}: {exc.strerror or exc}") from None


def _trees_line(adviser: Adviser) -> str:
    """Which tree judges which pods, at which threshold (a threshold of 1 on a chance never avoids)."""
    parts = []
    for kind in sorted(adviser.trees.trees, key=lambda k: (k == POOLED, k)):
        limit = adviser.threshold_for(kind)
        never = ", never avoids" if adviser.label == "p" and limit >= 1.0 else ""
        who = " (every type: pods without the laggard.io/task-type annotation or label)" if kind == POOLED else ""
        parts.append(f"{kind}{who} at {limit:g}{never}")
    return f"trees ({'chance of straggling' if adviser.label == 'p' else 'expected z'}): {'; '.join(parts)}"


def _budget_words(adviser: Adviser) -> str:
    if isinstance(adviser.budget, RefusalBudget):
        return f"; refusal budget: at most {adviser.budget.limit_words()}"
    if adviser.budget is not None:
        return f"; online calibration: {adviser.budget.words()}"
    return ""


async def _serve(extender: Any, host: str, port: int, budget: str) -> None:
    """Bind, say where (the bound port: --port 0 said 0), serve until SIGINT or SIGTERM, then stop cleanly."""
    from aiohttp import web

    runner = web.AppRunner(extender.app())
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise UserError(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from None
    bound = port or next(iter(runner.addresses))[1]
    where = f"[{host}]" if ":" in host else host  # an IPv6 address in a URL
    click.echo(f"scheduler extender on http://{where}:{bound} (filter, prioritize, healthz){budget}", err=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
    click.echo("scheduler extender stopped", err=True)


def _at(tracker: NodeStatusTracker, end_us: int) -> Any:
    """Node status as it was at the trace's end (the trace-fed server's status never moves)."""
    return lambda node, kind: tracker.status(node, end_us, kind)


def _start_feed(feed: Any) -> None:
    from streams.errors import BrokerUnavailable, TopicMissing

    try:
        feed.start()
    except (BrokerUnavailable, TopicMissing) as exc:
        raise UserError(str(exc)) from None
