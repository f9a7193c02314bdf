"""Ctrl-C in any command: one line and the shell's 130, never click's "Aborted!" and 1 (issue of session 25's sweep)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TRACE = "synthetic:nodes=200,jobs=20000"  # about a minute of work: still running when the signal comes


@pytest.mark.parametrize(("command", "started"), [
    (["run", "--trace", TRACE], "policy running"),  # its header line, printed before the first event
    (["classify", "--trace", TRACE], "reading"),
])
def test_ctrl_c_ends_a_command_with_130_and_one_line(tmp_path: Path, command: list[str], started: str) -> None:
    """A script or supervisor that runs `laggard` tells an interrupted run (130) from a failed one (1)."""
    err_path = tmp_path / "stderr"
    with err_path.open("w") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "laggard", *command], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=err,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # a background job would ignore it
        deadline = time.monotonic() + 60
        while started not in err_path.read_text() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert process.poll() is None, err_path.read_text()  # still working: the interrupt lands mid-command
        os.kill(process.pid, signal.SIGINT)
        returncode = process.wait(timeout=60)
    text = err_path.read_text()
    assert returncode == 130, text
    assert text.rstrip().endswith("interrupted") and "Aborted!" not in text and "Traceback" not in text, text
