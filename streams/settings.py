"""The one typed settings object, read once from the environment (prefix ``LAGGARD_``) or a file.

Configuration names are public API: they appear in docker-compose.yml, the Kubernetes manifests and
operators' scripts. Nothing else in laggard reads ``os.environ``; the CLI builds a ``Settings`` and
passes it (or the pure-core config objects derived from it) down.

>>> Settings(bootstrap_servers="127.0.0.1:9999").bootstrap_servers
'127.0.0.1:9999'
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from streams.core.decision.registry import POLICIES

SOURCE_IDLE_TIMEOUT_S = 600.0  # the job idle timeout for sources without job events, when the window allows


def derived_job_idle_timeout_s(window_size_s: float, wait_for_job_events: bool) -> float:
    """The job idle timeout nobody chose: the window where job events end jobs (a lost JobFinish only),
    else a sixth of the window at most 600 s, like ``laggard run`` on traces without job ends, so that
    a job's samples are ranked for most of the window after it went quiet.

    >>> derived_job_idle_timeout_s(3600.0, True), derived_job_idle_timeout_s(3600.0, False)
    (3600.0, 600.0)
    >>> derived_job_idle_timeout_s(1200.0, False)
    200.0
    """
    return window_size_s if wait_for_job_events else min(SOURCE_IDLE_TIMEOUT_S, window_size_s / 6)


class Settings(BaseSettings):
    """Every setting of laggard; environment variables are ``LAGGARD_<NAME>``."""

    model_config = SettingsConfigDict(
        env_prefix="LAGGARD_", env_file=None, extra="ignore", validate_default=True
    )

    # --- Kafka connection -------------------------------------------------------------------
    bootstrap_servers: str = Field("127.0.0.1:9092", description="Kafka bootstrap HOST:PORT[,HOST:PORT]")
    cluster_id: str = Field("default", description="key of blacklist topics: one compute cluster")
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: str | None = Field(None, description="PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
    sasl_username: str | None = None
    sasl_password: str | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    topic_partitions: int = Field(4, ge=1, description="partitions of keyed topics at creation")
    replication_factor: int = Field(1, ge=1)

    # --- Worker -----------------------------------------------------------------------------
    app_id: str = Field("laggard", description="Faust application id: consumer group and table prefix")
    data_dir: Path = Field(Path(".laggard/worker"), description="Faust's local state directory")
    store: str = Field("memory://", description="Faust table store; tables are rebuilt from changelogs")
    web_port: int = Field(6066, ge=0, le=65535)
    engine: Literal["faust", "direct"] = Field(
        "faust", description="worker engine: faust (Faust agents) or direct (one kafka-python consumer and "
                             "producer around the same core stages, streams.engine)")
    worker_role: Literal["all", "statistics", "prediction"] = Field(
        "all", description="what a direct-engine worker runs: all (statistics, ranking and prediction), statistics "
                           "(no prediction) or prediction (only, in its own consumer group <app_id>-predict)")
    ranking_share: float | None = Field(
        None, ge=0.0, le=0.95, description="the share of a direct worker's work its ranking is counted as when a "
                                           "statistics group assigns partitions: the ranking's owner gets that much "
                                           "less of the inputs (0: an even spread; unset: the policy's measured share, "
                                           "streams.engine.assignment)")
    forward_format: Literal["rows", "batches"] = Field(
        "rows", description="how a normaliser forwards task events to a ranking that watches them (policy running): "
                            "rows (TaskRows, since session 23) or batches (TaskEventBatch, which rankings before it "
                            "read: set it while upgrading such workers one at a time, then unset it)")

    # --- Operations (README "Operating laggard") --------------------------------------------
    metrics_port: int = Field(0, ge=0, le=65535, description="port of /metrics, /livez and /readyz (worker and "
                                                             "adapters); 0 serves none")
    metrics_host: str = Field("127.0.0.1", description="address the metrics port binds (0.0.0.0 in a pod)")
    stall_timeout_s: float = Field(120.0, ge=0, description="seconds with records waiting and none read before "
                                                           "the liveness check fails and the worker restarts "
                                                           "itself; 0 never")

    # --- Statistics and ranking (SPEC 3) ----------------------------------------------------
    window_size_s: float = Field(3600.0, gt=0, description="hopping window size, event time")
    ranking_period_s: float = Field(300.0, gt=0, description="ranking period = window step, event time")
    wait_for_job_events: bool = Field(
        True, description="workers rank a period only once job-events passed it too; false for sources "
                          "that publish no job events (CSV, Alibaba instance tables)"
    )
    # Never above the window (refused): a job final only after its tasks left the window is never ranked.
    # 0 (the default) means derived from the window; the object always holds the derived value.
    job_idle_timeout_s: float = Field(
        0.0, ge=0, description="a job with no event for this long is final; at most the window [default 0: the "
                               "window, or min(600, window / 6) with LAGGARD_WAIT_FOR_JOB_EVENTS=false]"
    )
    idle_stream_timeout_s: float = Field(
        60.0, ge=0, description="wall-clock seconds a silent stream (a partition's job events, or a partition "
                                "no job hashes to) may hold the ranking back before it is declared idle and "
                                "ranked without until its next record; records that arrive after that still "
                                "count, late. Straggler flags wait behind a silent job stream as long. 0: wait "
                                "forever (results strictly independent of arrival order; a partition whose job "
                                "events stop gets no flag until the next one, the worker warns at start-up)"
    )
    caught_up_grace_s: float = Field(
        0.5, ge=0, description="wall-clock seconds a stream known to be caught up (its partitions assigned to this "
                               "worker and read to the end the broker last reported) may hold a ranking boundary "
                               "before it is declared idle, as after LAGGARD_IDLE_STREAM_TIMEOUT_S (Kafka Streams' "
                               "max.task.idle.ms); long enough for a record sent with the ones that passed the "
                               "boundary to reach the broker and a fetch. A stream behind, or whose state this "
                               "worker cannot see, keeps the timeout. Both engines: the direct engine requires the "
                               "job and the task partitions read to their ends, the Faust worker asks only the "
                               "job partition; a job partition with nothing taken since its latest seek keeps the "
                               "timeout. 0: off; no effect when the timeout is 0"
    )
    # running, not pcores: on the fault scenarios it lists no healthy node by chance where pcores lists hundreds
    # (docs/scenarios.md, session 17). `laggard rank` (one window of finished tasks) keeps P-Cores.
    policy: str = Field("running", description="blacklist policy, a name of streams.core.decision.registry.POLICIES")
    min_tasks: int = Field(5, ge=1)
    significance_floor: float | None = Field(0.25, description="ci_low must exceed it; None disables")
    max_fraction: float = Field(0.1, gt=0, le=1)
    min_dwell_periods: int = Field(1, ge=0)
    # NoDecode: operators write LAGGARD_ALLOW_LIST=n1,n2, not JSON; the validator below splits it.
    allow_list: Annotated[list[str], NoDecode] = Field(default_factory=list, description="nodes never blacklisted")
    deny_list: Annotated[list[str], NoDecode] = Field(default_factory=list, description="nodes always blacklisted")
    seed: int = 0
    # ML-NA (policy mlna, SPEC 6): sub-period ("day") and sub-periods per period ("month"), the classifier of
    # next period's weak nodes and its threshold (forest at 0.4: chosen on held-out drifting clusters).
    mlna_sub_period_s: float = Field(86_400.0, gt=0, description="ML-NA's sub-period ('day'), event time")
    mlna_period: int = Field(30, ge=1, description="ML-NA's sub-periods per period ('month')")
    mlna_classifier: Literal["forest", "hgb", "arf"] = Field("forest", description="ML-NA's classifier")
    mlna_threshold: float = Field(0.4, ge=0, le=1, description="ML-NA: P(weak next period) that lists a node")
    # The running policy's floor in duration terms (issue 21, docs/scenarios.md "Session 13"): None takes the
    # detector's tuned default (streams.core.detection.registry.RUNNING_MIN_RATIO); 1.0 turns the guard off.
    running_min_ratio: float | None = Field(None, ge=1.0, description="policy running: a listed node's tasks run at "
                                            "least this many times their job siblings' durations (None: the default)")

    # --- Prediction (SPEC 4) ----------------------------------------------------------------
    # "select" by held-out measurement (scripts/prediction_default.py; in-time F1 = flags early enough that a
    # relaunched copy would win): Spark's q0.75/m1.5 rule until another member (Spark q0.9, spark-node, hazard)
    # pays off better on ended jobs. Held out, JCT shorter on every set; in-time F1 above Spark q0.75's on 5 of 7
    # sets (synthetic 0.63 vs 0.33, blind 0.40 vs 0.33), equal on the four Google jobs (0.31) and below on one
    # blind cluster never tuned on (0.52 vs 0.55); README "What the measurements say".
    prediction_method: str = Field("select", description="the worker's straggler predictor, a name of "
                                                             "streams.core.prediction.registry.PREDICTORS (laggard "
                                                             "eval --help lists them), or off")
    prediction_node_view: bool | None = Field(
        None, description="a worker's predictor reads the ranking's node-scores and blacklist-snapshot for its live "
                          "node view (node-aware methods: hazard, supervised-node); false: no view, as in eval "
                          "[default: off; opt-in while no gain is measured (docs/scale.md)]")
    nurd_alpha: float = 0.0
    nurd_epsilon: float = Field(0.05, gt=0, le=1)
    nurd_initial_fraction: float = Field(0.04, gt=0, lt=1)  # 1: every task finished first, none left to predict

    # --- Data -------------------------------------------------------------------------------
    traces_dir: Path = Field(Path("../shared/traces"), description="where the public traces live")

    # --- Adapters and the ranking's cold start ----------------------------------------------
    snapshot_read_timeout_s: float = Field(
        60.0, gt=0, description="seconds allowed to read blacklist-snapshot to its end (adapters, ranking)"
    )

    @field_validator("job_idle_timeout_s")
    @classmethod
    def _idle_within_window(cls, value: float, info: ValidationInfo) -> float:
        window = info.data.get("window_size_s")
        if value and window is not None and value > window:
            raise ValueError(f"{value:g} s exceeds the window LAGGARD_WINDOW_SIZE_S={window:g} s: jobs final "
                             "only after their tasks left the window would never be ranked")
        return value

    @model_validator(mode="after")
    def _derive_job_idle_timeout(self) -> Settings:
        # Written past validation, so model_fields_set still tells whether someone chose it.
        if not self.job_idle_timeout_s:
            self.__dict__["job_idle_timeout_s"] = derived_job_idle_timeout_s(
                self.window_size_s, self.wait_for_job_events)
        return self

    @field_validator("allow_list", "deny_list", mode="before")
    @classmethod
    def _split_csv(cls, value: Any) -> Any:
        # Operators write LAGGARD_ALLOW_LIST=n1,n2; a JSON list is accepted too.
        if isinstance(value, str):
            if value.lstrip().startswith("["):
                return json.loads(value)
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

    @field_validator("prediction_method")
    @classmethod
    def _known_predictor(cls, value: str) -> str:
        # at load, not on the worker's first event: a typo is one line before anything starts
        from streams.core.prediction.registry import PREDICTORS

        if value != "off" and value not in PREDICTORS:
            raise ValueError(f"unknown predictor {value!r}; one of: off, {', '.join(PREDICTORS.names())}")
        return value

    @field_validator("policy")
    @classmethod
    def _known_policy(cls, value: str) -> str:
        if value not in POLICIES:
            raise ValueError(f"unknown policy {value!r}; one of: {', '.join(POLICIES.names())}")
        return value

    @field_validator("significance_floor", mode="before")
    @classmethod
    def _none_floor(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() in {"none", "off", ""}:
            return None
        return value

    def kafka_security(self) -> dict[str, Any]:
        """Security settings in kafka-python's keyword names, only those that are set."""
        options: dict[str, Any] = {"security_protocol": self.security_protocol}
        for name in ("sasl_mechanism", "ssl_cafile", "ssl_certfile", "ssl_keyfile"):
            if getattr(self, name) is not None:
                options[name] = getattr(self, name)
        if self.sasl_username is not None:
            options["sasl_plain_username"] = self.sasl_username
            options["sasl_plain_password"] = self.sasl_password
        return options


def host_port(address: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``[IPV6]:PORT`` -> (host, port); ValueError, in words, for anything else.

    >>> host_port("kafka-1:9093"), host_port("[::1]:9092")
    (('kafka-1', 9093), ('::1', 9092))
    """
    address = address.strip()
    host, sep, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif "[" in host or "]" in host or ":" in host:
        host = ""  # a bare IPv6 address, or brackets that do not close: the port cannot be told apart
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"{address!r} is not HOST:PORT (or [IPV6]:PORT) with a port from 1 to 65535")
    return host, int(port)


def address_problem(bootstrap: str) -> str | None:
    """Why ``bootstrap`` is not a comma-separated list of ``host_port`` addresses, or None. Checked where laggard
    connects (``kafka_clients.probe``) and on ``--bootstrap``, not when settings load: a command that reads no
    broker must not fail on it.

    >>> address_problem("127.0.0.1:9092,kafka-1:9093") is None
    True
    >>> address_problem("kafka")
    "'kafka' is not HOST:PORT (or [IPV6]:PORT) with a port from 1 to 65535"
    """
    for address in bootstrap.split(","):
        try:
            host_port(address)
        except ValueError as exc:
            return str(exc)
    return None
