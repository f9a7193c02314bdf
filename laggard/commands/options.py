"""Options shared by several subcommands."""

from __future__ import annotations

import difflib
import functools
import math
import os
import re
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, overload

import click
from pydantic import ValidationError
from pydantic_settings import SettingsError
from rich.console import Console

from laggard.errors import UserError
from streams.core.decision.registry import POLICIES
from streams.core.registry import Registry
from streams.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])


def bootstrap_option(func: F) -> F:
    """``--bootstrap HOST:PORT``, falling back to the setting LAGGARD_BOOTSTRAP_SERVERS."""
    return click.option(
        "--bootstrap",
        metavar="HOST:PORT",
        default=None,
        help="Kafka bootstrap servers [default: setting LAGGARD_BOOTSTRAP_SERVERS, else 127.0.0.1:9092]",
    )(func)


def settings_with(bootstrap: str | None = None, **overrides: Any) -> Settings:
    """The settings object with command-line values on top of the environment."""
    given = {key: value for key, value in overrides.items() if value is not None}
    env_file = given.pop("_env_file", None)
    if env_file is not None:
        _check_settings_file(Path(env_file))
        given["_env_file"] = env_file
    _warn_unknown_variables()
    if bootstrap is not None:  # --bootstrap "" fell back to the setting, silently
        _check_address(bootstrap)
        given["bootstrap_servers"] = bootstrap
    try:
        return Settings(**given)
    except SettingsError as exc:  # a variable that could not even be parsed
        raise click.UsageError(f"invalid setting: {exc}") from exc
    except ValidationError as exc:  # a value out of range, or a combination refused: one line, exit 1
        problems = "; ".join(
            f"LAGGARD_{'_'.join(str(part) for part in error['loc']).upper()}={error.get('input')!r}: "
            + error["msg"].removeprefix("Value error, ")
            for error in exc.errors()
        )
        raise UserError(f"invalid setting {problems}") from None


# LAGGARD_ variables that are no setting on purpose: the broker's keystore password (laggard kafka start), and
# switches of the bench and the test tiers.
NOT_SETTINGS = frozenset({"LAGGARD_KAFKA_KEYSTORE_PASSWORD", "LAGGARD_LOG_LEVEL", "LAGGARD_REGEN_GOLDEN",
                          "LAGGARD_REQUIRE_BROKER"})
# What Kubernetes injects for a Service named laggard-* (service links): not meant for laggard.
_SERVICE_LINK = re.compile(r"^LAGGARD_\w*?_(SERVICE_HOST|SERVICE_PORT(_\w+)?|PORT(_\d+_(TCP|UDP|SCTP)\w*)?)$")


def _setting_names() -> list[str]:
    return [f"LAGGARD_{name.upper()}" for name in Settings.model_fields]


def _did_you_mean(name: str) -> str:
    close = difflib.get_close_matches(name.upper(), _setting_names(), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


@functools.cache
def _warn_unknown_variables() -> None:
    """Once a process: a LAGGARD_ variable that is no setting (a typo such as LAGGARD_WINDOW_SIZ) was ignored in
    silence, and the command ran on the default. Names match in any case, as the settings read them."""
    known = set(_setting_names()) | NOT_SETTINGS
    for name in sorted(os.environ):
        upper = name.upper()
        if upper.startswith("LAGGARD_") and upper not in known and not _SERVICE_LINK.match(upper):
            click.echo(f"warning: {name} is not a setting of laggard and is ignored{_did_you_mean(name)}", err=True)


def _check_settings_file(path: Path) -> None:
    """A --settings file is read as the settings read it (python-dotenv); a LAGGARD_ name that is no setting, or a
    setting's name without its LAGGARD_ prefix, would be ignored in silence: refused, naming it. Other names (a
    file shared with other tools) get a warning."""
    from dotenv import dotenv_values

    try:
        values = dotenv_values(path, encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"--settings {path}: {getattr(exc, 'strerror', None) or exc}") from None
    known = set(_setting_names())
    for key in values:
        upper = key.upper()
        if upper in known:
            continue
        if upper.startswith("LAGGARD_") or f"LAGGARD_{upper}" in known:
            hint = _did_you_mean(key if upper.startswith("LAGGARD_") else f"LAGGARD_{key}")
            raise UserError(f"--settings {path}: {key} is not a setting of laggard{hint}")
        click.echo(f"warning: --settings {path}: {key} is not a LAGGARD_ setting and is ignored", err=True)


def _check_address(bootstrap: str) -> None:
    from streams.settings import address_problem

    problem = address_problem(bootstrap)
    if problem:
        raise click.BadParameter(problem, param_hint="--bootstrap")


def existing_directory(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """A click callback for a file to write: it may not exist yet, but its directory must (a mistyped path would
    become a file nobody reads, or fail only after the work)."""
    if value is None:
        return None
    parent = value.expanduser().resolve().parent
    if parent.exists() and not parent.is_dir():
        raise click.BadParameter(f"{str(value.parent)!r} is a file, not a directory (fix the path)")
    if not parent.is_dir():
        raise click.BadParameter(f"the directory {str(value.parent)!r} does not exist (create it, or fix the path)")
    return value.expanduser()  # no shell expands ~ in a pod's args


class PositiveFinite(click.FloatRange):
    """A number above 0 that is a number: ``nan`` passed ``FloatRange(min=0, min_open=True)`` (no comparison holds
    for it) and ``inf`` did too; both meant "as fast as possible" to a pacer."""

    def __init__(self) -> None:
        super().__init__(min=0, min_open=True)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class FloorType(click.ParamType):
    """``--significance-floor``: a number, or ``none`` to disable the floor."""

    name = "X|none"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value is None or isinstance(value, float):
            return value
        if str(value).strip().lower() in ("none", "off"):
            return "none"
        try:
            return float(value)
        except ValueError:
            self.fail(f"{value!r} is neither a number nor 'none'", param, ctx)


class RegistryChoice(click.Choice):  # type: ignore[type-arg]
    """A choice among a registry's names as they are when the command runs, so that a detector or policy
    registered after this module was imported (a plug-in, a test's toy) is accepted and listed."""

    def __init__(self, registry: Registry[Any]) -> None:
        self.registry = registry
        super().__init__((), case_sensitive=True)

    @property  # type: ignore[override]
    def choices(self) -> tuple[str, ...]:
        return self.registry.names()

    @choices.setter
    def choices(self, value: Any) -> None:
        pass  # click.Choice.__init__ assigns the (empty) tuple; the registry is the list


@overload
def policy_option(func: F) -> F: ...


@overload
def policy_option(*, default: str) -> Callable[[F], F]: ...


def policy_option(func: F | None = None, *, default: str | None = None) -> F | Callable[[F], F]:
    """``--policy NAME``, one of ``POLICIES`` (each described in the command's epilog, ``policies_epilog``);
    ``default`` names what the command takes when neither the option nor ``LAGGARD_POLICY`` is given (the
    settings' default unless the command says otherwise)."""
    shown = Settings.model_fields["policy"].default if default is None else default

    def decorate(f: F) -> F:
        return click.option(
            "--policy", type=RegistryChoice(POLICIES), default=None,
            help=f"blacklist policy, see the list below [default: setting LAGGARD_POLICY, else {shown}]",
        )(f)

    return decorate if func is None else decorate(func)


def policies_epilog() -> str:
    """Every registered policy with its line of help, for a command's ``--help``."""
    return "\b\nPolicies (--policy NAME):\n" + "\n".join(f"  {name:18} {doc}" for name, doc in POLICIES.describe())


def stdout_console() -> Console:
    """The console for tables on stdout: the terminal's width, or 160 columns when piped to a file or a log,
    where rich would otherwise assume 80 and cut numbers short."""
    return Console() if sys.stdout.isatty() else Console(width=160)


def formats_epilog() -> str:
    """The trace formats ``--trace FORMAT:PATH`` accepts, for a command's ``--help``."""
    from producers.registry import FORMATS, SHARED_PATHS

    shared = ", ".join(SHARED_PATHS)
    return ("\b\nTrace formats (--trace FORMAT:PATH):\n" + "\n".join(f"  {k:18} {v}" for k, v in FORMATS.items())
            + f"\n\b\n{shared} without :PATH read the public traces under LAGGARD_TRACES_DIR "
            "(default ../shared/traces).")


def refuse_unusable(spec: str, trace: Any) -> None:
    """A trace that gave no event: it had no rows, or every row was bad (most likely read in the wrong format), or
    skipped (e.g. a slice of Google 2011 from before the trace's start), or both. Say which, and fail."""
    stats = trace.stats
    if not (trace.events or stats.bad_rows or stats.skipped):  # a header and no row: replay said "0 events", exit 0
        raise UserError(f"no event in {spec}: it holds no rows")
    if trace.events:
        return
    first = stats.bad_examples[0].reason if stats.bad_examples else "no example kept"
    if not stats.skipped:  # rows that were skipped parsed: the format was right
        raise UserError(f"no usable event in {spec}: all {stats.bad_rows:,} rows were bad (first: {first}). Is "
                        f"{spec.partition(':')[0]!r} the right format for this file? `laggard run --help` lists the "
                        "formats.")
    reasons = "; ".join(f"{reason}: {count:,}" for reason, count in stats.skip_reasons.most_common(3))
    bad = f" and {stats.bad_rows:,} bad (first: {first})" if stats.bad_rows else ""
    raise UserError(f"no usable event in {spec}: {stats.skipped:,} rows were skipped ({reasons}){bad}.")


def serve_health(settings: Any) -> Any:
    """The process's Health, with /livez, /readyz and /metrics served on the metrics port when one is set (None
    otherwise): what every adapter and `advise serve` expose."""
    from streams.health import Health, serve

    if not settings.metrics_port:
        return None
    health = Health(settings.stall_timeout_s or float("inf"))
    try:
        serve(settings.metrics_port, health, settings.metrics_host)
    except OSError as exc:
        raise UserError(f"cannot serve metrics on {settings.metrics_host}:{settings.metrics_port}: "
                        f"{exc.strerror}") from None
    return health


def probe_bind(host: str, port: int) -> None:
    """Bind ``host:port`` for a moment, in the host's own address family (IPv6 too) and as aiohttp binds (a
    TIME_WAIT is no conflict); the OSError when it cannot be bound (in use, unknown host, not local)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                         flags=socket.AI_PASSIVE)[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(address)
