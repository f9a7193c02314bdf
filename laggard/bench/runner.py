"""Run every stage in a subprocess of its own, one after another, and gather one document.

Stages run one at a time so that they do not disturb each other's timings. Whatever happens (a failed
stage, Ctrl-C, SIGTERM) the running stage is asked to stop, and anything it left behind under the bench's
working directory (a broker, a worker) is stopped before the runner returns.
"""

from __future__ import annotations

import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from laggard.bench.broker import stop_leftovers
from laggard.bench.common import Sizes, say, sizes_document
from laggard.bench.output import ratios

STAGE_ORDER = ("floors", "inprocess", "nurd_cost", "kafka", "scale")


class StageFailed(RuntimeError):
    """A stage exited with an error; ``user_mistake`` when it printed the user's mistake itself."""

    def __init__(self, message: str, user_mistake: bool = False) -> None:
        super().__init__(message)
        self.user_mistake = user_mistake


def load_average() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


def run_stage(name: str, config: dict[str, Any]) -> dict[str, Any]:
    """The figures of stage ``name``, run as ``python -m laggard.bench.stage name``."""
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen([sys.executable, "-m", "laggard.bench.stage", name], stdin=subprocess.PIPE,
                                   stdout=out)  # fmt: skip
        try:
            assert process.stdin is not None
            process.stdin.write(orjson.dumps(config))
            process.stdin.close()
            code = process.wait()
        finally:
            _stop(process)
        if code != 0:
            raise StageFailed(f"bench stage {name!r} failed (exit {code}); see the messages above", code == 2)
        out.seek(0)
        figures: dict[str, Any] = orjson.loads(out.read())
        return figures


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop a stage that is still running (we were interrupted): it may already be cleaning up after Ctrl-C."""
    for action, grace in ((None, 5.0), (signal.SIGTERM, 120.0), (signal.SIGKILL, 10.0)):
        if process.poll() is not None:
            return
        if action is not None:
            process.send_signal(action)  # SIGTERM becomes KeyboardInterrupt in the stage: its finally blocks run
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            continue


def run_bench(sizes: Sizes, bootstrap: str | None) -> dict[str, Any]:
    """Every stage, then the ratios; the document ``laggard bench --json`` prints."""
    started = time.monotonic()
    document: dict[str, Any] = {
        "machine": {"cpu_count": os.cpu_count(), "load_average_start": load_average(),
                    "python": platform.python_version(), "platform": platform.platform()},
        "sizes": sizes_document(sizes),
        "stage_load_average": {},
    }  # fmt: skip
    workdir = Path(tempfile.mkdtemp(prefix="laggard-bench-"))
    config = {"sizes": sizes_document(sizes), "workdir": str(workdir), "bootstrap": bootstrap}
    try:
        for name in STAGE_ORDER:
            document["stage_load_average"][name] = load_average()
            say(f"stage [bold]{name}[/bold] (load average {document['stage_load_average'][name]})")
            stage_started = time.monotonic()
            document[name] = run_stage(name, config)
            document[name]["stage_seconds"] = time.monotonic() - stage_started
    finally:
        for what in stop_leftovers(workdir):
            say(f"stopped {what}, left behind by a failed stage")
        shutil.rmtree(workdir, ignore_errors=True)
    document["machine"]["load_average_end"] = load_average()
    document["seconds"] = time.monotonic() - started
    document["ratios"] = ratios(document)
    return document
