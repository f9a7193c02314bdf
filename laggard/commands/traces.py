"""Opening a trace for a command: the one place a bad ``FORMAT:PATH`` becomes one line for the user."""

from __future__ import annotations

from typing import Any

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
        raise UserError(f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc)) from None
