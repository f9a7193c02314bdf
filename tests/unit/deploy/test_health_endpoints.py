"""/metrics, /livez and /readyz as a prober sees them, and the judgement behind the probes (no broker here: the
integration tier scrapes a real worker and adapter)."""

from __future__ import annotations

import logging
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from streams import metrics
from streams.health import BurstFilter, Health, ReadProgress, serve


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_probes_answer_503_with_the_reason_until_healthy_and_metrics_parse() -> None:
    metrics.for_worker()  # as `laggard worker` does
    metrics.for_worker()  # once per process, however often asked
    clock = [0.0]
    health = Health(stall_after_s=30, clock=lambda: clock[0])
    server = serve(0, health)
    try:
        port = server.server_port
        assert _get(port, "/readyz") == (503, "starting\n")
        assert _get(port, "/livez") == (200, "ok\n")
        health.set(None, None)
        assert _get(port, "/readyz") == (200, "ok\n")
        clock[0] = 31.0  # the event loop stopped beating
        status, body = _get(port, "/livez")
        assert status == 503 and "event loop blocked" in body
        metrics.DEAD_LETTERS.labels("task-events", metrics.reason_kind("unknown status: 9")).inc()
        status, text = _get(port, "/metrics")
        families = {family.name: family for family in text_string_to_metric_families(text)}
        letters = [s for s in families["laggard_dead_letters"].samples if s.name == "laggard_dead_letters_total"]
        assert any(s.labels == {"topic": "task-events", "reason": "unknown-status"} and s.value >= 1 for s in letters)
        assert {"laggard_events_in", "laggard_consumer_lag_records", "laggard_ranking_duration_seconds",
                "laggard_delta_version_applied", "laggard_adapter_refusals"} <= set(families)
        assert _get(port, "/nothing")[0] == 404
    finally:
        server.shutdown()


def test_a_partition_with_records_waiting_and_nothing_read_stalls_after_the_timeout() -> None:
    progress = ReadProgress(stall_after_s=60, ready_within_s=300)
    tp = ("ranking-feed", 0)
    progress.read(tp, offset=99, written_at=1000.0, now=0.0)
    assert progress.judge([tp], {tp: 100}, {}, now=10.0, wall=1010.0).live is None
    assert progress.judge([tp], {tp: 150}, {}, now=20.0, wall=1020.0).live is None, "waiting counts from now"
    verdict = progress.judge([tp], {tp: 150}, {}, now=81.0, wall=1081.0)
    assert verdict.live is not None and "50 records waiting" in verdict.live
    assert verdict.lag == {tp: 50}


def test_an_outage_restarts_every_wait_so_a_returning_broker_does_not_fail_liveness_at_once() -> None:
    progress = ReadProgress(stall_after_s=60, ready_within_s=300)
    tp = ("task-events", 1)
    progress.read(tp, offset=9, written_at=0.0, now=0.0)
    progress.judge([tp], {tp: 20}, {}, now=5.0, wall=5.0)
    progress.unreachable(now=100.0)  # the broker was away from 5 s to 100 s
    assert progress.judge([tp], {tp: 20}, {}, now=110.0, wall=110.0).live is None
    assert progress.judge([tp], {tp: 20}, {}, now=161.0, wall=161.0).live is not None


def test_ready_means_caught_up_to_within_one_period() -> None:
    progress = ReadProgress(stall_after_s=600, ready_within_s=300)
    tp = ("task-events", 0)
    progress.read(tp, offset=0, written_at=0.0, now=0.0)
    behind = progress.judge([tp], {tp: 500}, {}, now=1.0, wall=400.0)
    assert behind.ready is not None and "written 400 s ago" in behind.ready
    assert progress.judge([tp], {tp: 500}, {}, now=1.0, wall=200.0).ready is None
    assert progress.judge([tp], {tp: 1}, {}, now=1.0, wall=4000.0).ready is None, "nothing waiting"


def test_a_member_without_partitions_is_live_while_the_group_commits_and_stalled_when_it_stands_still() -> None:
    progress = ReadProgress(stall_after_s=60, ready_within_s=300)
    tp = ("task-events", 0)
    for now, committed in ((0.0, 10), (50.0, 20), (100.0, 30), (150.0, 40)):
        assert progress.judge([], {tp: 100}, {tp: committed}, now=now, wall=now).live is None
    assert progress.judge([], {tp: 100}, {tp: 40}, now=200.0, wall=200.0).live is None
    wedged = progress.judge([], {tp: 100}, {tp: 40}, now=215.0, wall=215.0).live
    assert wedged is not None and "no partition assigned" in wedged


def test_connection_errors_of_a_broker_that_is_away_are_a_few_lines() -> None:
    times = iter(float(t) for t in range(0, 1000))
    burst = BurstFilter(every_s=30.0, clock=lambda: next(times))
    passed = [burst.filter(logging.LogRecord("aiokafka.conn", logging.ERROR, "", 0,
                                             "Unable connect to node with id 1: [Errno 111] port %d", (p,), None))
              for p in range(120)]
    assert sum(passed) == 4  # at 0, 30, 60 and 90 s of two minutes of one error a second
    ours = logging.LogRecord("laggard", logging.ERROR, "", 0, "same", None, None)
    assert all(burst.filter(ours) for _ in range(5)), "laggard's own lines are never held back"


def test_an_adapter_serves_no_ranking_series_and_its_gauges_say_what_its_probes_say_from_the_start() -> None:
    """A fresh process as an adapter starts one (its code imported, a Health made, /metrics served): no
    "laggard_delta_version_published 0" or period lag of a ranking it does not run, and laggard_live 1 while /livez
    says ok (it was 0 until the first health check). A subprocess: the registry is the process's."""
    import subprocess
    import sys

    script = ("import adapters.consumer, laggard.commands.adapter\n"
              "from prometheus_client import generate_latest\n"
              "from streams.health import Health\n"
              "Health(30)\n"
              "print(generate_latest().decode())\n")
    text = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    values = {s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples}
    assert values["laggard_live"] == 1 and values["laggard_ready"] == 0
    ranking = {"laggard_delta_version_published", "laggard_period_lag_seconds", "laggard_nodes_seen",
               "laggard_ranking_duration_seconds_count", "laggard_offset_seeks_back_total"}
    assert not ranking & set(values), sorted(ranking & set(values))

