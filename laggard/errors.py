"""User mistakes become one clear line and a non-zero exit, never a traceback."""

from __future__ import annotations

import click


class UserError(click.ClickException):
    """A mistake the user can fix (missing file, bad option, unreachable broker).

    Click prints ``Error: <message>`` on stderr and exits with status 1.
    """

    exit_code = 1


class BrokerUnreachable(UserError):
    """No Kafka broker answered at the bootstrap address."""

    def __init__(self, bootstrap: str, detail: str = "") -> None:
        hint = " (start one with `laggard kafka start`, or pass --bootstrap HOST:PORT)"
        super().__init__(f"no Kafka broker answers at {bootstrap}{hint}" + (f": {detail}" if detail else ""))
