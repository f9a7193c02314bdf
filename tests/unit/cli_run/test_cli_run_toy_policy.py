"""A detector and policy registered in two calls run through `laggard run --policy NAME` (issue 14)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from click.testing import CliRunner

from laggard.cli import cli
from streams.core.decision.registry import POLICIES, Policy
from streams.core.decision.selection import highest
from streams.core.detection.base import Evidence, WindowView
from streams.core.detection.registry import DETECTORS
from streams.core.events import NormalizedTask


class MeanAboveOne:
    """The toy: any node whose window mean z is above 1 is a suspect; it remembers its last suspects."""

    name = "toy"
    last: frozenset[str] = frozenset()

    def learn(self, sample: NormalizedTask) -> None:
        return None

    def detect(self, window: WindowView) -> Mapping[str, Evidence]:
        evidence = {node: Evidence(node, s.mean > 1.0, s.mean, f"toy: mean {s.mean:+.2f}")
                    for node, s in window.stats.items()}
        MeanAboveOne.last = frozenset(node for node, e in evidence.items() if e.suspect)
        return evidence

    def snapshot(self) -> dict[str, Any]:
        return {}

    def restore(self, state: dict[str, Any]) -> None:
        return None


@pytest.fixture
def toy() -> Iterator[None]:
    DETECTORS.register("toy", lambda config: MeanAboveOne(), "mean z above 1")
    POLICIES.register("toy", Policy(DETECTORS.get("toy"), highest("mean")), "the toy detector")
    try:
        yield
    finally:
        POLICIES.unregister("toy")
        DETECTORS.unregister("toy")


def test_a_registered_toy_policy_runs_from_the_command_line_and_lists_its_suspects(toy) -> None:
    env = {"LAGGARD_MIN_DWELL_PERIODS": "0"}  # the blacklist then follows the toy's last opinion exactly
    args = ["run", "--trace", "synthetic:nodes=30,slow=3,jobs=120,seed=4", "--policy", "toy",
            "--max-fraction", "1", "--json"]
    result = CliRunner().invoke(cli, args, env=env)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert MeanAboveOne.last  # the toy did suspect someone
    assert document["blacklist"] == sorted(MeanAboveOne.last)
    assert {delta["policy"] for delta in document["deltas"]} == {"toy"}
    assert all(entry["reason"].startswith("toy: mean") for delta in document["deltas"] for entry in delta["added"])


def test_an_unregistered_policy_is_refused_in_one_line(toy) -> None:
    POLICIES.unregister("toy")
    result = CliRunner().invoke(cli, ["run", "--trace", "synthetic:nodes=10,jobs=5", "--policy", "toy"])
    assert result.exit_code != 0
    assert "'toy' is not one of 'pcores', 'pcores-top-k', 'noop'" in result.output
    assert "Traceback" not in result.output


def test_the_noop_policy_lists_only_the_deny_list() -> None:
    args = ["run", "--trace", "synthetic:nodes=40,slow=3,jobs=150,seed=1", "--policy", "noop", "--json"]
    result = CliRunner().invoke(cli, args, env={"LAGGARD_DENY_LIST": "node-00"})
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["ground_truth"]["slow_nodes"]  # there were slow nodes to find
    assert document["blacklist"] == ["node-00"]
    assert [entry["reason"] for delta in document["deltas"] for entry in delta["added"]] == ["on the deny-list"]
