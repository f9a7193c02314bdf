"""User mistakes become one clear line and a non-zero exit, never a traceback."""

from __future__ import annotations

import click

INTERRUPTED = 130  # the exit status of a command ended by Ctrl-C: 128 + SIGINT, as shells report it


class UserError(click.ClickException):
    """A mistake the user can fix (missing file, bad option, unreachable broker).

    Click prints ``Error: <message>`` on stderr and exits with status 1. An unreachable broker is
    ``streams.errors.BrokerUnavailable`` (raised below the CLI); ``laggard.cli.main`` prints it the same way.
    """

    exit_code = 1

