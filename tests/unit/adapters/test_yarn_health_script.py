"""The NodeManager health script laggard ships, run as YARN runs it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from adapters.follower import Change
from adapters.yarn import YarnApplier
from streams.core.events import BlacklistDelta, BlacklistEntry

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "yarn-health-check"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", str(SCRIPT), *args], capture_output=True, text=True, timeout=30, check=False)


def flag_node(health: Path, node: str, reason: str) -> None:
    entry = BlacklistEntry(node, 0, 14, 1.4, 0.3, 1.2, 1.6, reason)
    record = BlacklistDelta("c1", 5, 0, "pcores", 0, 1, (entry,), ())
    YarnApplier(health_dir=health).apply(Change("c1", 5, "delta", (entry,), (), frozenset(), frozenset({node}), record))


def test_a_blacklisted_node_gets_one_error_line_with_the_reason(tmp_path: Path) -> None:
    flag_node(tmp_path, "worker-7", "mean z 1.4, 95% CI [1.2, 1.6] over 14 tasks")
    done = run(str(tmp_path), "worker-7")
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ERROR")
    assert "worker-7" in lines[0] and "mean z 1.4, 95% CI [1.2, 1.6] over 14 tasks" in lines[0]


def test_a_healthy_node_prints_nothing(tmp_path: Path) -> None:
    flag_node(tmp_path, "worker-7", "slow")
    done = run(str(tmp_path), "worker-8")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_the_node_defaults_to_this_hosts_name(tmp_path: Path) -> None:
    host = subprocess.run(["hostname"], capture_output=True, text=True, check=True).stdout.strip()
    assert run(str(tmp_path)).stdout == ""
    flag_node(tmp_path, host, "slow")
    assert run(str(tmp_path)).stdout.startswith(f"ERROR node {host} is blacklisted")


def test_without_a_directory_it_prints_usage_and_no_error_line(tmp_path: Path) -> None:
    done = run()
    assert done.stdout == "" and "usage" in done.stderr
