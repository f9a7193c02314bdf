"""`laggard worker`: the stream worker on Kafka (statistics, ranking, blacklist deltas), on Faust or on the direct
engine (streams.engine: kafka-python, no Faust stream layer)."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
from pathlib import Path

import click

from laggard.commands.options import bootstrap_option, policies_epilog, policy_option, probe_bind, settings_with
from laggard.errors import UserError
from streams import kafka_clients
from streams.health import Health
from streams.serde.topics import TASK_EVENTS
from streams.settings import Settings


@click.command(epilog=policies_epilog())
@bootstrap_option
@click.option("--partitions", type=click.IntRange(1), default=None,
              help="Partitions of task-events when the worker creates it [default: setting "
                   "LAGGARD_TOPIC_PARTITIONS, 4]; an existing topic keeps its own count")
@click.option("--cluster-id", default=None, help="Key of the blacklist topics [default: setting, 'default']")
@click.option("--settings", "settings_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="A file of LAGGARD_NAME=value lines (environment variables win)")
@click.option("--loglevel", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True)
@click.option("--web-port", type=click.IntRange(0, 65535), default=None,
              help="Faust's web port on 127.0.0.1 (0 disables it) [default: setting, 6066]")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None,
              help="Serve /metrics, /livez and /readyz on this port (0: none) [default: setting "
                   "LAGGARD_METRICS_PORT, 0]")
@click.option("--engine", type=click.Choice(["faust", "direct"]), default=None,
              help="faust: Faust agents; direct: one kafka-python consumer and producer around the same stages, "
                   "same outputs; a broker that leaves its outputs unacknowledged for 120 s ends it with a "
                   "restartable exit (75) [default: setting LAGGARD_ENGINE, faust]")
@click.option("--role", type=click.Choice(["all", "statistics", "prediction"]), default=None,
              help="What this worker runs (direct engine): all; statistics (normalise, rank, publish; no "
                   "prediction); prediction (straggler predictions only, in its own consumer group "
                   "<app_id>-predict, so it scales and deploys apart) [default: setting LAGGARD_WORKER_ROLE, all]")
@policy_option
@click.option("--restart-on-stall", is_flag=True,
              help="Run the worker as a child and start it again whenever it ends itself for want of progress "
                   "(LAGGARD_STALL_TIMEOUT_S); without it, a supervisor (Kubernetes, compose, systemd) restarts it.")
def worker(bootstrap: str | None, partitions: int | None, cluster_id: str | None, settings_file: Path | None,
           loglevel: str, web_port: int | None, metrics_port: int | None, engine: str | None,
           role: str | None, policy: str | None, restart_on_stall: bool) -> None:
    """Run the stream worker: normalise finished tasks, rank nodes each period of event time, and publish
    node scores, blacklist deltas and snapshots. Stop it with SIGTERM or Ctrl-C.

    Scale out by starting more workers with the same settings: the normalising stage spreads over the
    partitions of task-events; the ranking runs on one of them. With --engine direct, prediction can run
    apart: statistics workers with --role statistics, prediction workers with --role prediction.

    A policy whose detector watches running tasks (running, the default) has every task event forwarded to the
    ranking, which costs more CPU than pcores (docs/scale.md, session 17).
    """
    settings = settings_with(bootstrap, _env_file=settings_file, topic_partitions=partitions,
                             cluster_id=cluster_id, web_port=web_port, metrics_port=metrics_port, engine=engine,
                             worker_role=role, policy=policy)
    if settings.worker_role != "all" and settings.engine != "direct":
        raise UserError(f"--role {settings.worker_role} needs --engine direct (the Faust worker runs every role)")
    if settings.worker_role == "prediction" and settings.prediction_method == "off":
        raise UserError("--role prediction needs a predictor: LAGGARD_PREDICTION_METHOD is off")
    if settings.engine != "direct":
        _check_web_port(settings.web_port)  # before waiting up to 30 s for a broker
    if restart_on_stall:
        raise SystemExit(supervise([arg for arg in sys.argv[1:] if arg != "--restart-on-stall"]))
    from streams.config import ranking_config

    try:
        ranking_config(settings)  # a combination the ranking refuses fails here, before any connection
    except ValueError as exc:
        raise UserError(f"invalid settings: {exc}") from None
    kafka_clients.wait_for_broker(settings, timeout_s=30)
    kafka_clients.create_topics(settings)
    actual = kafka_clients.topic_partitions(settings, TASK_EVENTS.name)
    if actual is None:
        raise UserError(f"topic {TASK_EVENTS.name} could not be created")
    problem = kafka_clients.copartitioning_problem(settings)
    if problem:
        raise UserError(problem)
    if partitions is not None and actual != partitions:
        click.echo(f"warning: {TASK_EVENTS.name} already has {actual} partitions; using {actual}", err=True)

    from streams import metrics
    from streams.health import Health, serve

    metrics.for_worker(ranks=settings.worker_role != "prediction")  # a prediction-only worker runs no ranking
    health = Health(settings.stall_timeout_s or float("inf"))
    if settings.metrics_port:
        try:
            serve(settings.metrics_port, health, settings.metrics_host)
        except OSError as exc:
            raise UserError(f"cannot serve metrics on {settings.metrics_host}:{settings.metrics_port}: "
                            f"{exc.strerror}") from None
    if settings.engine == "direct":
        run_direct(settings, actual, health, loglevel)
    else:
        run_faust(settings, actual, health, loglevel)


def _check_web_port(port: int) -> None:
    """Faust's web server binds 127.0.0.1:``port`` (0: off) deep in its start-up, where a port in use was an
    81-line traceback: a second worker on one host needs a --web-port of its own. Checked here, in one line (the
    port could still be taken between this check and Faust's bind)."""
    if not port:
        return
    try:
        probe_bind("127.0.0.1", port)
    except OSError as exc:
        raise UserError(f"cannot serve the worker's web port 127.0.0.1:{port}: {exc.strerror}; each worker on "
                        "one host needs its own --web-port (0: none)") from None


def run_faust(settings: Settings, partitions: int, health: Health, loglevel: str) -> None:
    import faust

    from streams.app import make_app
    from streams.health import quiet_client_bursts

    app = make_app(settings, partitions, health)

    class Worker(faust.Worker):  # type: ignore[misc]  # Faust's classes are untyped
        def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
            super().on_setup_root_logger(logger, level)
            # a broker that is away is a few lines, not thousands of client connection errors; kafka-python's
            # clients (the caught-up probe, the published blacklist's reader) say only what matters, as on direct
            logging.getLogger("kafka").setLevel(max(logging.WARNING, level))
            quiet_client_bursts(logger.handlers)

    Worker(app, loglevel=loglevel.upper()).execute_from_commandline()


def run_direct(settings: Settings, partitions: int, health: Health, loglevel: str) -> None:
    """The direct engine in this process until SIGTERM or Ctrl-C (then a last checkpoint)."""
    from kafka.errors import KafkaError

    from streams.agents.monitor import STALLED_EXIT
    from streams.engine.health import watch
    from streams.engine.worker import DirectWorker
    from streams.health import quiet_client_bursts

    logging.basicConfig(level=loglevel.upper(), format="[%(asctime)s] [%(process)d] [%(levelname)s] %(name)s: "
                                                       "%(message)s")
    logging.getLogger("kafka").setLevel(max(logging.WARNING, logging.getLogger().level))
    quiet_client_bursts(logging.getLogger().handlers)
    worker = DirectWorker(settings, partitions, health)
    worker.stop_on_signals()
    watch(worker, health)
    try:
        worker.run()
    except KafkaError as exc:  # a refused output, a lost broker mid-commit: one line, and a restartable exit
        click.echo(f"Error: the worker stopped on a Kafka error ({type(exc).__name__}: {exc}); restarted, it "
                   "resumes from its last checkpoint", err=True)
        raise SystemExit(STALLED_EXIT) from None


def supervise(args: list[str]) -> int:
    """Run ``laggard <args>`` as a child until it ends for another reason than a stall; forward SIGTERM and
    SIGINT to it. Returns its exit code."""
    from streams.agents.monitor import STALLED_EXIT

    child: list[subprocess.Popen[bytes]] = []

    def forward(signum: int, _frame: object) -> None:
        stopping.append(signum)
        if child and child[-1].poll() is None:
            child[-1].send_signal(signum)

    stopping: list[int] = []
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    while True:
        child.append(subprocess.Popen([sys.executable, "-m", "laggard", *args], preexec_fn=_die_with_parent))
        code = child[-1].wait()
        if code != STALLED_EXIT or stopping:
            return code
        click.echo(f"laggard worker: the worker ended itself for want of progress (exit {code}); starting it "
                   "again", err=True)
        time.sleep(1.0)


def _die_with_parent() -> None:
    """In the child: the kernel sends SIGKILL when the supervisor dies, so a killed supervisor leaves nothing."""
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
