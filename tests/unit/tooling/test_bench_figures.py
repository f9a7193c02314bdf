"""The bench's arithmetic on figures a loaded machine can produce (no broker: pure functions)."""

from __future__ import annotations

from laggard.bench.kafka import counted, ranked_figures, sustained
from laggard.bench.output import _over, _ranked, _target


def test_progress_marks_that_count_nothing_yet_do_not_start_the_measuring_window() -> None:
    # CI once ended a tiny run on a worker's start-up marks alone (watermarks before every pre-loaded event),
    # measured a rate of 0 and crashed dividing by it
    marks = [(1_000, 0), (9_000, 0), (12_000, 400), (15_000, 900)]
    assert counted(marks) == [(12_000, 400), (15_000, 900)]
    assert counted([(1_000, 0), (9_000, 0)]) == []


def test_a_rate_of_zero_leaves_its_ratio_empty_and_its_target_unmet_instead_of_crashing_the_bench() -> None:
    assert _over(3.0, 4.0) == 0.75
    assert _over(3.0, 0.0) is None
    assert _target("two workers / one worker", None, 1.5, "times")["met"] is False
    assert _target("two workers / one worker", 1.6, 1.5, "times")["met"] is True


def test_a_ranking_the_window_cut_off_gives_no_ranked_rate_to_compare() -> None:
    # session 20's bench: two Faust rankings still far behind at the window's end (69 and 351 ranked events/s)
    # made "two workers / one worker, ranked" 5.07x, printed as met
    cut = {"ranked_per_s": 69.2, "ranking_finished": False}
    finished = {"ranked_per_s": 10_274.0, "ranking_finished": True}
    assert _ranked(cut) is None and _ranked(finished) == 10_274.0
    assert _target("two workers / one worker, ranked", _over(_ranked(cut), _ranked(finished)), 1.5, "times")[
        "met"] is False


def test_marks_stamped_in_one_burst_give_a_rate_from_the_workers_start_not_zero() -> None:
    # CI's tiny run once got every counted mark of a fast worker at one broker millisecond (a batch shares its
    # LogAppendTime) and reported 0 events/s
    assert sustained([(20_000, 4_000), (20_000, 12_000)], started_ms=14_000) == (2_000.0, "from start")
    assert sustained([(20_000, 12_000)], started_ms=14_000) == (2_000.0, "from start")
    # a real span between marks is the sustained rate, start-up excluded
    assert sustained([(20_000, 4_000), (24_000, 12_000)], started_ms=14_000) == (2_000.0, "between marks")
    # a span under a second is a burst too: its rate would be the broker's batching, not the worker's
    per_s, basis = sustained([(20_000, 4_000), (20_010, 12_000)], started_ms=14_000)
    assert basis == "from start" and 0 < per_s < 2_100


def test_a_period_a_silent_job_stream_holds_open_shows_as_close_wait_not_as_the_pipelines_delay() -> None:
    # Session 10: the live bench's one delta period that missed period + 1 s closed 1.3 s after the replay's clock
    # passed it, because job-events[0] sent nothing for 132 s of event time; the worker's own part was 0.1 s.
    from laggard.bench.latency import latencies

    period_us = 300
    inputs = {("task-events", 0): [(250, 9_000), (310, 10_000)],  # passes the boundary 300 at 10.0 s
              ("job-events", 0): [(100, 7_000), (430, 11_300)]}  # silent until 11.3 s: the period closes then
    finishes = [(0, 7_000), (250, 9_000)]  # one before the period [0, 300), both inside it
    result = latencies(inputs, finishes, {300: 11_400}, period_us)
    assert result["close_wait"]["max_s"] == 1.3  # 10.0 s -> 11.3 s, the job stream's silence
    assert result["close_to_output"]["max_s"] == 0.1  # 11.3 s -> 11.4 s, the worker
    assert result["finish_to_output"]["max_s"] == 4.4  # from the period's first finish: all of it


def test_the_in_process_cpu_measure_counts_the_same_work_every_round() -> None:
    from laggard.bench.inprocess_cpu import measure

    first, second = measure("synthetic:nodes=40,slow=3,jobs=150,seed=1", None, rounds=2)
    # the same events through a new pipeline each round: the same samples, rankings and deltas (one, by default)
    assert {k: first[k] for k in ("events", "samples", "rankings", "deltas")} == {
        k: second[k] for k in ("events", "samples", "rankings", "deltas")}
    assert first["deltas"] == 1 and first["cpu_s"] > 0 and first["per_cpu_s"] == first["events"] / first["cpu_s"]


def test_the_ranking_digest_is_the_same_for_the_same_run_and_tells_a_changed_bit() -> None:
    from laggard.bench import ranking_digest

    spec = "synthetic:nodes=40,slow=3,jobs=150,seed=1"
    first = ranking_digest.digest(spec, 10_000)
    assert first == ranking_digest.digest(spec, 10_000)
    assert first != ranking_digest.digest("synthetic:nodes=40,slow=3,jobs=150,seed=2", 10_000)
    assert first.count(b'{"boundary"') > 10 and b"node-08" in first


def test_the_scale_tool_refuses_a_wrong_argument_in_one_line(capsys) -> None:  # type: ignore[no-untyped-def]
    from laggard.bench.scale import main

    assert main(["100", "2", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown policy 'nope'" in err and "running" in err
    assert main(["many"]) == 2
    assert capsys.readouterr().err.startswith("usage: python -m laggard.bench.scale NODES")


def test_a_stalled_worker_is_started_again_and_a_crashed_one_ends_the_scenario_with_stand_in_processes(  # type: ignore[no-untyped-def]
        tmp_path, monkeypatch) -> None:
    """Stand-in worker processes (a worker cannot be made to wedge its Kafka client on purpose here): the first exits
    with the stall code once, as ``laggard worker``'s health check does, and is started again as a supervisor would;
    a worker that exits with any other code ends the scenario with its log's tail."""
    import sys

    import pytest

    from laggard.bench import broker
    from streams.settings import Settings

    marker = tmp_path / "stalled-once"
    stall_once = (f"import pathlib, sys, time\nm = pathlib.Path({str(marker)!r})\n"
                  "if not m.exists():\n    m.write_text('x'); print('Worker ready'); print('wedged'); sys.exit(75)\n"
                  "time.sleep(30)\n")  # its second life never says it is ready
    monkeypatch.setattr(broker, "LAGGARD", [sys.executable, "-c", stall_once, "--"])
    workers = broker.Workers(tmp_path, Settings(), "bench-test", 1, restart_stalled=True)
    workers.start()
    try:
        workers.processes[0].wait(20)
        workers.check_alive()
        assert workers.restarts == 1 and workers.processes[0].poll() is None
        assert "wedged" in workers.logs[0].read_text()
        with pytest.raises(RuntimeError, match="not ready"):  # the first life's "Worker ready" does not count
            workers.wait_ready(timeout_s=1)
    finally:
        workers.stop()
    marker.unlink()  # a scenario that did not ask for restarts (latency, equality) ends at a stall exit too
    plain = broker.Workers(tmp_path, Settings(), "bench-plain", 1)
    plain.start()
    try:
        plain.processes[0].wait(20)
        with pytest.raises(RuntimeError, match="exited with 75"):
            plain.check_alive()
    finally:
        plain.stop()
    monkeypatch.setattr(broker, "LAGGARD", [sys.executable, "-c", "print('boom'); raise SystemExit(3)", "--"])
    crashed = broker.Workers(tmp_path, Settings(), "bench-crash", 1)
    crashed.start()
    try:
        crashed.processes[0].wait(20)
        with pytest.raises(RuntimeError, match=r"exited with 3; log tail:\n.*boom"):
            crashed.check_alive()
        assert crashed.restarts == 0
    finally:
        crashed.stop()


class _Watch:
    """The two things ``ranked_figures`` reads of a ``ProgressWatch``, without a broker."""

    def __init__(self, ranked_marks: list[tuple[int, int]], done: bool) -> None:
        self.ranked_marks, self.ranking_done = ranked_marks, done


def test_the_ranked_rate_runs_from_the_first_mark_to_the_last_ranking_so_a_burst_of_rankings_cannot_move_it() -> None:
    # Session 21: one direct worker's rankings came in two bursts; between the first and the last ranking the
    # rate was 1.5x the same worker's rate from its first mark to its last ranking, and two workers over one read
    # 0.8x-1.5x from run to run. Both runs below rank 9,000 events by 30 s, from a first mark at 10 s.
    early = _Watch([(12_000, 1_000), (30_000, 9_000)], True)  # a ranking soon after the first mark
    late = _Watch([(27_000, 7_000), (30_000, 9_000)], True)  # the first ranking only at 27 s
    first_mark = (10_000, 500)
    a, b = ranked_figures(early, first_mark, 20_000, 5.0), ranked_figures(late, first_mark, 20_000, 5.0)
    assert a["ranked_per_s"] == b["ranked_per_s"] == 425.0  # 8,500 events in 20 s
    # the burst-sensitive figure, kept beside it: 8,000 / 18 s against 2,000 / 3 s
    assert round(a["ranked_sustained_per_s"]) == 444 and round(b["ranked_sustained_per_s"]) == 667
    assert a["ranking_lag_s"] == 10.0


def test_quick_runs_show_the_running_policys_scale_at_the_size_they_measured() -> None:
    """`bench --quick` measures the running policy at 1,000 nodes; its six rows, labelled 10,000, showed '-'."""
    from laggard.bench.output import ROWS, _cell, _sized

    quick = {"scale": {"running_by_nodes": {"1000": {"seconds_per_period": 0.0123, "mb_per_1000_nodes": 4.5}}}}
    shown = {_sized(quick, label, path)[0]: _cell(quick, _sized(quick, label, path)[1], digits)
             for _, label, path, digits in ROWS if "running_by_nodes" in path}
    assert shown["running: ranking s/period, 1,000 nodes"] == "0.012" and shown["running: MB per 1,000 nodes"] == "4.5"
    full = {"scale": {"running_by_nodes": {"1000": {}, "10000": {"seconds_per_period": 0.5}}}}
    assert _sized(full, "running: ranking s/period, 10,000 nodes", "scale.running_by_nodes.10000.seconds_per_period") \
        == ("running: ranking s/period, 10,000 nodes", "scale.running_by_nodes.10000.seconds_per_period")
