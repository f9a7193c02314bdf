"""`laggard adapter file|yarn|k8s (kubernetes)|webhook`: apply blacklist changes from Kafka to a scheduler (SPEC 5)."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from laggard.commands.adapter_report import failed, report, version_words
from laggard.commands.options import bootstrap_option, existing_directory, serve_health, settings_with
from laggard.errors import INTERRUPTED, UserError

F = TypeVar("F", bound=Callable[..., Any])
NOT_IN_SYNC = 3


ALIASES = {"kubernetes": "k8s"}  # the SPEC's "Kubernetes adapter": operators type the word, not the numeronym


class AliasedGroup(click.Group):
    """A group that also answers to the ``ALIASES`` of its commands; help lists each command once, by its name."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, ALIASES.get(cmd_name, cmd_name))


@click.group(cls=AliasedGroup)
def adapter() -> None:
    """Apply blacklist changes to a scheduler.

    Each adapter reads the latest snapshot of its cluster from `blacklist-snapshot`, applies it, then
    follows `blacklist-deltas`. Its state file (last applied version and set) makes restarts apply nothing
    twice. A change that would blacklist more than --max-fraction of the known nodes is refused as a whole.

    Known nodes: the largest of the nodes the ranking saw (each delta and snapshot carries that count),
    --known-nodes (a count or a file of node names), every node seen in snapshots and deltas, and for k8s
    the nodes the API lists.

    Following, Ctrl-C or SIGTERM stops it (exit 0). With --once the adapter exits 0 when in sync with the
    latest version, 3 when a change was refused or failed, or a version gap could not be closed (the state
    stays at the last applied version), or the state file could not be saved (a full disk: the scheduler has
    the change); 130 when Ctrl-C interrupted it; 1, with one line, when no broker answers (with --json, stdout
    still holds the outcome: "in_sync": false and the problem).
    """


def common_options(func: F) -> F:
    options = [
        bootstrap_option,
        click.option(
            "--cluster-id",
            default=None,
            help="Cluster whose blacklist to follow [default: setting LAGGARD_CLUSTER_ID, 'default']",
        ),
        click.option("--dry-run", is_flag=True, help="Log the actions without taking them (no state written)."),
        click.option(
            "--max-fraction",
            type=click.FloatRange(0, 1, min_open=True),
            default=None,
            help="Refuse a change that blacklists more than this fraction of the known nodes "
            "[default: setting LAGGARD_MAX_FRACTION, 0.1]",
        ),
        click.option(
            "--known-nodes",
            metavar="N|FILE",
            default=None,
            help="Cluster size, or a file of node names (one per line), for the cap.",
        ),
        click.option(
            "--state-file",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            callback=existing_directory,  # a typo'd directory was created; the default's is made as needed
            help="Where the applied version and set are kept [default: .laggard/adapters/KIND-CLUSTER.json]",
        ),
        click.option("--once", is_flag=True, help="Apply what is on the topics now, then exit."),
        click.option(
            "--retry-wait",
            type=click.FloatRange(0),
            default=5.0,
            show_default=True,
            help="Seconds before a failed change is tried again (doubling, up to 10x).",
        ),
        click.option("--json", "as_json", is_flag=True, help="With --once: print the outcome as JSON."),
        click.option("--metrics-port", type=click.IntRange(0, 65535), default=None,
                     help="Serve /metrics, /livez and /readyz on this port (0: none) [default: setting "
                          "LAGGARD_METRICS_PORT, 0]"),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@adapter.command()
@common_options
@click.option(
    "--path",
    "path",
    type=click.Path(dir_okay=False, path_type=Path),
    callback=existing_directory,
    required=True,
    help="The blacklist file: one node per line, replaced atomically.",
)
def file(path: Path, **common: Any) -> None:
    """Keep a plain file of blacklisted node names."""
    from adapters.file import FileApplier

    _run("file", lambda cluster_id, dry_run: FileApplier(path, dry_run=dry_run), **common)


@adapter.command()
@common_options
@click.option(
    "--exclude-file",
    type=click.Path(dir_okay=False, path_type=Path),
    callback=existing_directory,
    default=None,
    help="The ResourceManager's yarn.resourcemanager.nodes.exclude-path file. laggard owns it and rewrites it "
    "whole: do not keep operators' own decommissions in it (use --health-dir to leave it alone).",
)
@click.option(
    "--exclude-format",
    type=click.Choice(["plain", "xml"]),
    default=None,
    help="Hadoop reads a *.xml file as XML, any other as plain [default: from the file name]",
)
@click.option(
    "--refresh-command",
    default="yarn rmadmin -refreshNodes",
    show_default=True,
    help="Run after each change of the exclude file; empty to run nothing.",
)
@click.option(
    "--health-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep one flag file per blacklisted node here for scripts/yarn-health-check.",
)
@click.option(
    "--host-map",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="File of 'NODE HOST' lines: the host name or IP YARN knows each laggard node by (YARN excludes hosts, "
    "never ports) [default: node ids are host names]",
)
def yarn(
    exclude_file: Path | None,
    exclude_format: str | None,
    refresh_command: str,
    health_dir: Path | None,
    host_map: Path | None,
    **common: Any,
) -> None:
    """Exclude nodes in YARN (exclude file + refresh) and/or flag them for the NodeManager health script."""
    from adapters.yarn import YarnApplier, load_host_map

    if exclude_file is None and health_dir is None:
        raise click.UsageError("give --exclude-file, --health-dir, or both")
    try:
        hosts = load_host_map(host_map) if host_map is not None else None
    except ValueError as exc:
        raise UserError(str(exc)) from exc

    def make(cluster_id: str, dry_run: bool) -> Any:
        try:
            return YarnApplier(
                exclude_file,
                exclude_format,  # type: ignore[arg-type]  # click.Choice holds it to plain|xml
                refresh_command or None,
                health_dir,
                dry_run=dry_run,
                host_map=hosts,
            )
        except ValueError as exc:
            raise UserError(str(exc)) from exc

    _run("yarn", make, **common)


@adapter.command()
@common_options
@click.option(
    "--taint",
    default="laggard.io/slow=true:NoSchedule",
    show_default=True,
    metavar="KEY=VALUE:EFFECT",
    help="The taint laggard adds to blacklisted nodes.",
)
@click.option(
    "--kubeconfig",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Kubeconfig file [default: in-cluster service account, else ~/.kube/config]",
)
@click.option("--context", default=None, help="Kubeconfig context [default: its current context]")
def k8s(taint: str, kubeconfig: Path | None, context: str | None, **common: Any) -> None:
    """Taint blacklisted Kubernetes nodes; remove only the taints laggard added.

    `k8s` and `kubernetes` name this one command (and its one state file, .laggard/adapters/k8s-CLUSTER.json)."""
    from adapters.k8s import K8sApplier, Taint

    try:
        parsed = Taint.parse(taint)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--taint") from exc
    api = _kubernetes_api(kubeconfig, context)
    _run("k8s", lambda cluster_id, dry_run: K8sApplier(api, cluster_id, parsed, dry_run=dry_run), **common)


@adapter.command()
@common_options
@click.option("--url", required=True, help="Endpoint that receives each change as a JSON POST.")
@click.option(
    "--attempts",
    type=click.IntRange(1),
    default=5,
    show_default=True,
    help="POSTs per change before the consumer waits --retry-wait and starts over.",
)
@click.option(
    "--backoff",
    type=click.FloatRange(0),
    default=0.5,
    show_default=True,
    help="Seconds before the second POST; doubles each time, at most 30.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(0, min_open=True),
    default=10.0,
    show_default=True,
    help="Seconds to wait for the endpoint's answer.",
)
def webhook(url: str, attempts: int, backoff: float, timeout: float, **common: Any) -> None:
    """POST each blacklist change as JSON, never losing one while the endpoint is down."""
    from adapters.webhook import WebhookApplier

    if not url.startswith(("http://", "https://")):
        raise click.BadParameter(f"{url!r} is not an http:// or https:// URL", param_hint="--url")
    _run(
        "webhook",
        lambda cluster_id, dry_run: WebhookApplier(
            url, attempts=attempts, backoff_s=backoff, timeout_s=timeout, dry_run=dry_run
        ),
        **common,
    )


def _run(
    kind: str,
    make_applier: Callable[[str, bool], Any],
    *,
    bootstrap: str | None,
    cluster_id: str | None,
    dry_run: bool,
    max_fraction: float | None,
    known_nodes: str | None,
    state_file: Path | None,
    once: bool,
    retry_wait: float,
    as_json: bool,
    metrics_port: int | None,
) -> None:
    from adapters import statefile
    from adapters.consumer import BlacklistConsumer, TopicMissing
    from adapters.follower import Follower
    from streams.errors import BrokerUnavailable

    setup_adapter_logging()
    if as_json and not once:
        raise click.UsageError("--json needs --once")
    settings = settings_with(bootstrap, cluster_id=cluster_id, max_fraction=max_fraction, metrics_port=metrics_port)
    cluster = settings.cluster_id
    applier = make_applier(cluster, dry_run)
    known = _known_nodes(known_nodes)
    path = state_file or Path(".laggard/adapters") / f"{kind}-{cluster}.json"
    saved = statefile.load(path, cluster)
    follower = Follower(cluster, settings.max_fraction, known, saved.follower)
    stopping: list[bool] = []
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    consumer = BlacklistConsumer(
        settings,
        follower,
        applier,
        path,
        saved.offsets,
        dry_run=dry_run,
        retry_wait_s=retry_wait,
        stop=lambda: bool(stopping),
        health=serve_health(settings),
    )
    try:
        outcome = consumer.run(once=once)
    except (BrokerUnavailable, TopicMissing) as exc:
        failed(consumer.outcome, follower.state, str(exc), kind=kind, cluster=cluster, dry_run=dry_run,
               as_json=as_json)  # fmt: skip
        raise UserError(str(exc)) from exc
    except KeyboardInterrupt:
        logging.getLogger("laggard.adapters").info(
            "interrupted: state kept at %s", version_words(follower.state.version)
        )
        if once:  # not "in sync" (0): a cron job must tell an interrupted run from a finished one
            sys.exit(INTERRUPTED)
        return
    report(outcome, kind=kind, cluster=cluster, dry_run=dry_run, as_json=as_json)
    if once and (not outcome.in_sync or outcome.state_problem):
        sys.exit(NOT_IN_SYNC)


def _known_nodes(value: str | None) -> int | frozenset[str] | None:
    if value is None:
        return None
    if value.isdigit():
        return int(value)
    path = Path(value)
    if not path.is_file():
        raise click.BadParameter(f"{value!r} is neither a node count nor a readable file", param_hint="--known-nodes")
    names = (line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return frozenset(name for name in names if name)


def _kubernetes_api(kubeconfig: Path | None, context: str | None) -> Any:
    import yaml
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    try:
        if kubeconfig is not None:
            config.load_kube_config(config_file=str(kubeconfig), context=context)
        else:
            try:
                config.load_incluster_config()
            except ConfigException:
                config.load_kube_config(context=context)
    except (ConfigException, OSError) as exc:
        raise UserError(f"no Kubernetes configuration ({exc}): pass --kubeconfig FILE or run in a pod") from exc
    except (yaml.YAMLError, TypeError, AttributeError, KeyError, ValueError) as exc:  # not YAML, or not a kubeconfig
        raise UserError(f"{kubeconfig or os.environ.get('KUBECONFIG') or '~/.kube/config'} is not a Kubernetes "
                        f"configuration: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}") from exc
    return client.CoreV1Api()


def setup_adapter_logging() -> None:
    """The adapters' log (``laggard.adapters``) on stderr, and kafka-python's warnings in bursts of a few lines."""
    logger = logging.getLogger("laggard.adapters")
    for old in list(logger.handlers):  # a second run in one process (tests) logs to the current stderr
        logger.removeHandler(old)
    handler: logging.Handler
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.logging import RichHandler

        handler = RichHandler(console=Console(stderr=True), show_path=False)
        handler.setFormatter(logging.Formatter("%(message)s"))
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    # kafka-python's own warnings (a broker that went away) reach stderr in bursts of a few lines
    from streams.health import BurstFilter, not_a_short_slow_step

    root = logging.getLogger()
    if not any(getattr(h, "name", None) == "laggard-clients" for h in root.handlers):
        clients = logging.StreamHandler(sys.stderr)
        clients.set_name("laggard-clients")
        clients.setLevel(logging.WARNING)
        clients.addFilter(not_a_short_slow_step)  # a step slowed by this process's own work, not a client fault
        clients.addFilter(BurstFilter())
        clients.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(clients)
