"""The closed loop: the scheduler honours the blacklist while the trace is generated; canaries are the way back."""

from __future__ import annotations

from laggard.bench.scenarios import run_seed
from producers.scenario_suite import SCENARIOS


def test_a_listed_node_gets_no_task_in_closed_loop_and_a_few_canaries_on_probation() -> None:
    scenario = SCENARIOS["healthy-24h"].scaled(nodes=20, hours=2.0)
    runs = {r.loop: r for r in run_seed(scenario, 1, ["open", "closed", "canary"], {"deny_list": ["node-03"]})}
    assert runs["closed"].starts_on_listed == 0
    assert 0 < runs["canary"].starts_on_listed < runs["open"].starts_on_listed
    # one node of twenty taken away costs the closed loop some job time; the job time is measured against open
    assert runs["closed"].jct_change is not None and runs["closed"].jct_change > 0
    assert runs["open"].jct_change is None


def test_avoiding_the_faulty_nodes_shortens_jobs() -> None:
    scenario = SCENARIOS["cpu-2x"].scaled(nodes=20, hours=2.0)
    (closed,) = run_seed(scenario, 1, ["closed"], {})
    assert closed.oracle_jct_change is not None and closed.oracle_jct_change < 0


def test_the_running_policy_lists_2x_nodes_from_the_in_process_runner_and_releases_them_after_recovery() -> None:
    # The runner hands every task event to the detector (streams.local -> observe_task): no event, no listing.
    scenario = SCENARIOS["cpu-2x"].scaled(nodes=40, hours=4.0)  # recovery at 3 h, an hour to be released
    (run,) = run_seed(scenario, 1, ["open"], {"policy": "running"})
    assert run.score.precision == 1.0 and run.score.recall == 1.0 and run.score.flaps == 0
    assert all(d is not None and d <= 60 * 60 for d in run.score.onset_to_listing_s)
    assert all(d is not None and d <= 30 * 60 for d in run.score.recovery_to_release_s)
