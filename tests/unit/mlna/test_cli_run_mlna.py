"""``laggard run --policy mlna``: ML-NA through the same decision layer as every policy (issue 15)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from laggard.cli import cli

TRACE = "drifting:nodes=40,days=6,load=60,persistent=0.1,episodic=0.1,intermittent=0,seed=3"
# A "day" of 6 h and a "month" of one day: periods close every day of the six. The window is one sub-period
# long, so the cap counts the nodes of a sub-period rather than the few a 1-hour window of this small cluster sees.
ENV = {"LAGGARD_MLNA_SUB_PERIOD_S": "21600", "LAGGARD_MLNA_PERIOD": "4", "LAGGARD_WINDOW_SIZE_S": "21600"}


def test_the_mlna_policy_lists_predicted_weak_nodes_with_its_reasons():
    args = ["run", "--trace", TRACE, "--policy", "mlna", "--max-fraction", "0.3", "--json"]
    result = CliRunner().invoke(cli, args, env=ENV)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    deltas = document["deltas"]
    assert deltas and {d["policy"] for d in deltas} == {"mlna"}
    # Nothing can be predicted before the first day closed.
    assert min(d["window_end_us"] for d in deltas) >= 86_400_000_000
    added = [e for d in deltas for e in d["added"]]
    assert all(e["reason"].startswith("weak cluster ") and "predicted weak next period with p = " in e["reason"]
               for e in added)  # fmt: skip
    kinds = document["ground_truth"]["kinds"]
    listed = {e["node_id"] for e in added}
    assert {n for n, kind in kinds.items() if kind == "persistent"} <= listed  # slow all along: predicted weak
    # The classifier is surer of the nodes that really were weak than of the healthy ones it listed.
    p = {e["node_id"]: float(e["reason"].split("p = ")[1][:4]) for e in added}
    weak, healthy = [p[n] for n in p if n in kinds], [p[n] for n in p if n not in kinds]
    assert sum(weak) / len(weak) > sum(healthy) / max(1, len(healthy))


def test_an_unknown_classifier_setting_is_one_line():
    result = CliRunner().invoke(cli, ["run", "--trace", TRACE, "--policy", "mlna"],
                                env={"LAGGARD_MLNA_CLASSIFIER": "svm"})
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "mlna_classifier" in result.output.lower()


def test_a_trace_shorter_than_one_period_says_why_nothing_is_listed():
    """At the defaults (30 x 1 day) a synthetic trace of a few hours listed nothing, every node "not a suspect: the
    detector has no evidence against it", even the injected slow ones."""
    result = CliRunner().invoke(cli, ["run", "--trace", "synthetic:nodes=40,slow=3,jobs=300,seed=3", "--policy",
                                      "mlna", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "ML-NA lists nodes once a period of 30 x 86400 s of trace time has closed" in result.stderr
    reasons = {row["reason"] for row in json.loads(result.stdout)["ranking"]["nodes"]}
    assert reasons == {"no ML-NA period closed yet (30 x 24 h, the first at 721 h)"}
