"""What the local broker's log says when it stopped during start-up, in one line for ``laggard kafka start``."""

from __future__ import annotations

import re
from pathlib import Path


def bind_failure(log_file: Path) -> str | None:
    """The port named in a 'failed to bind' line of the broker's log, if it stopped for that."""
    try:
        text = log_file.read_text(errors="replace")
    except OSError:
        return None
    found = re.findall(r"failed to bind to [^\s:]+:(\d+)", text)
    return found[-1] if found else None


_EXCEPTION = re.compile(r"^(?:Caused by: )?[\w.$]+(?:Exception|Error): (.+)$")


def fatal_cause(log_file: Path) -> str | None:
    """The broker's own words for what ended its start-up: the exception under its last fatal ERROR line and the
    first cause under that ("Failed to load SSL keystore ... (keystore password was incorrect)"); None if none."""
    try:
        lines = log_file.read_text(errors="replace").splitlines()
    except OSError:
        return None
    fatal = [i for i, line in enumerate(lines) if " ERROR " in line and "fatal" in line.lower()]
    if not fatal:
        return None
    found: list[str] = []
    for line in lines[fatal[-1] + 1:]:
        if line.startswith("["):  # the next log record: the stack trace is over
            break
        if (match := _EXCEPTION.match(line.strip())) and (not found or line.startswith("Caused by: ")):
            found.append(match.group(1))
            if len(found) == 2:
                break
    if not found:
        return None
    words = found[0] + (f" ({found[1]})" if len(found) > 1 else "")
    return words if len(words) <= 300 else words[:297] + "..."
