"""Opening a trace for a command: the one place a bad ``FORMAT:PATH`` becomes one line for the user."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from laggard.errors import UserError


def open_trace_or_fail(spec: str) -> Any:
    """The ``Trace`` of ``FORMAT:PATH``; a bad spec or a missing path is a ``UserError`` (one line, exit 1). A
    format of the public traces given without a path is read from the traces folder (LAGGARD_TRACES_DIR)."""
    from laggard.commands.options import settings_with
    from producers.registry import open_trace

    traces_dir = settings_with().traces_dir
    try:
        return open_trace(spec, traces_dir)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    except OSError as exc:
        if not exc.filename:  # e.g. gzip's "Not a gzipped file" names no file
            raise UserError(f"{spec}: {exc}") from None
        raise UserError(f"{exc.strerror or exc}: {exc.filename}{_relative_hint(spec, traces_dir)}") from None


def _relative_hint(spec: str, traces_dir: Path) -> str:
    """For a relative path the spec gave that is not there: where it was looked for, and for a format of the shared
    traces where those are read without a path (the README's examples name ``../shared/traces/...``, which holds
    only from the project's directory)."""
    from producers.registry import SHARED_PATHS

    name, _, given = spec.partition(":")
    path = Path(given.strip()).expanduser()
    if not given.strip() or path.is_absolute() or path.exists():
        return ""
    hint = f" (relative to {Path.cwd()}"
    if name in SHARED_PATHS:
        found = "" if traces_dir.expanduser().resolve().is_dir() else ", which is not there"
        hint += (f"; `--trace {name}` alone reads the shared traces from LAGGARD_TRACES_DIR, now "
                 f"{traces_dir.expanduser().resolve()}{found}")
    return hint + ")"


def echo_bad_rows(trace: Any) -> None:
    """After iterating ``trace``, on stderr as ``laggard rank`` reports them: how many rows its reader skipped as
    bad, and the first few with their file and line (for the commands that otherwise say nothing of their rows:
    classify, advise)."""
    from laggard.commands.rank import bad_row_lines, trace_report

    report = trace_report(trace)
    if not report.bad:
        return
    click.echo(f"  {report.bad:,} bad row{'' if report.bad == 1 else 's'} skipped", err=True)
    for line in bad_row_lines(report):
        click.echo(line, err=True)
