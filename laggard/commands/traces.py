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

    try:
        return open_trace(spec, settings_with().traces_dir)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    except OSError as exc:
        raise UserError(f"{exc.strerror or exc}: {exc.filename}{_relative_hint(exc.filename)}" if exc.filename
                        else f"{spec}: {exc}") from None  # e.g. gzip's "Not a gzipped file" names no file


def _relative_hint(filename: Any) -> str:
    """For a relative path that is not there: where it was looked for, and where the shared traces are (the
    README's examples name ``../shared/traces/...``, which holds only from the project's directory)."""
    path = Path(str(filename))
    if path.is_absolute() or path.exists():
        return ""
    return (f" (relative to {Path.cwd()}; the shared traces' formats also read them without a path, from "
            f"LAGGARD_TRACES_DIR, default ../shared/traces)")


def echo_bad_rows(trace: Any) -> None:
    """After iterating ``trace``, on stderr as ``laggard rank`` reports them: how many rows its reader skipped as
    bad, and the first few with their file and line (for the commands that otherwise say nothing of their rows:
    classify, advise)."""
    from laggard.commands.rank import trace_report

    report = trace_report(trace)
    if not report.bad:
        return
    click.echo(f"  {report.bad:,} bad row{'' if report.bad == 1 else 's'} skipped", err=True)
    for example in report.examples:
        click.echo(f"  bad row, {example}", err=True)
    if report.bad > len(report.examples):
        click.echo(f"  ... and {report.bad - len(report.examples):,} more bad rows", err=True)
