"""The operational tests of exact recovery, again on the direct engine (``LAGGARD_ENGINE=direct``, streams.engine):
a worker SIGKILLed right after its offset commits, twice, then one left to finish; two workers with a join
and a leave mid-replay; and the broker restarted in place under a worker and an adapter (its outputs go through
aiokafka batches, ``streams.batch_producer``, whose own timeouts must let it ride the outage out). Each ends as
the clean run: the deltas, the final snapshot and every node's statistics in every window. The tests are the
Faust worker's own, imported; only the engine differs."""

from __future__ import annotations

import pytest

from tests.integration.operations.test_broker_restart import expected
from tests.integration.operations.test_broker_restart import (
    test_worker_and_adapter_recover_from_a_broker_restart_to_the_same_final_snapshot as test_direct_broker_restart,
)
from tests.integration.operations.test_kill_after_commit import (
    test_a_worker_killed_right_after_its_commits_ends_as_the_clean_run as test_direct_killed_right_after_its_commits,
)
from tests.integration.operations.test_rebalance import (
    test_a_worker_joining_and_one_leaving_mid_replay_end_as_the_clean_run as test_direct_join_and_leave_mid_replay,
)

__all__ = ["expected", "test_direct_broker_restart", "test_direct_join_and_leave_mid_replay",
           "test_direct_killed_right_after_its_commits"]


@pytest.fixture(autouse=True)
def direct_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every worker these tests start runs the direct engine (their processes inherit the environment)."""
    monkeypatch.setenv("LAGGARD_ENGINE", "direct")
