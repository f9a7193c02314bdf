"""Pacing, the stdout and null sinks, and `laggard replay` as a user runs it (no broker)."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from laggard.cli import cli
from producers.sink import NullSink, Pacer, compression_type, replay
from streams.core.events import JobStart


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_speed_follows_the_trace_clock_scaled() -> None:
    clock = FakeClock()
    pacer = Pacer(speed=2.0, clock=clock, sleep=clock.sleep)
    for ts_us in (5_000_000, 5_000_000, 9_000_000, 15_000_000):
        pacer.wait(ts_us)
    assert clock.now - 100.0 == pytest.approx(5.0)  # 10 s of trace at twice the speed
    assert clock.slept == pytest.approx([2.0, 3.0])


def test_max_rate_spaces_events_evenly() -> None:
    clock = FakeClock()
    pacer = Pacer(max_rate=4, clock=clock, sleep=clock.sleep)
    for _ in range(9):
        pacer.wait(0)
    assert clock.now - 100.0 == pytest.approx(2.0)


def test_no_pacing_never_sleeps() -> None:
    clock = FakeClock()
    pacer = Pacer(clock=clock, sleep=clock.sleep)
    pacer.wait(0)
    pacer.wait(10**12)
    assert clock.slept == []


def test_replay_stops_at_the_limit_without_reading_further() -> None:
    pulled = []

    def events():
        for i in range(10):
            pulled.append(i)
            yield JobStart(f"j{i}", i)

    result = replay(events(), NullSink(), limit=3)
    assert result.events == 3 and pulled == [0, 1, 2]


def test_gzip_is_used_when_lz4_is_not_installed() -> None:
    from kafka import codec

    assert compression_type() == ("lz4" if codec.has_lz4() else "gzip")


def _run(*args: str):
    return CliRunner().invoke(cli, ["replay", *args])


def test_json_summary_is_the_only_thing_on_stdout() -> None:
    result = _run("--trace", "synthetic:nodes=10,slow=1,jobs=20,seed=2", "--sink", "null", "--json")
    assert result.exit_code == 0, result.output
    summary = orjson.loads(result.stdout)
    for key in ("events", "tasks", "jobs", "skipped", "bad_rows", "seconds", "events_per_second"):
        assert key in summary
    assert summary["jobs"] == 20 and summary["ground_truth"]["nodes"] == 10


def test_stdout_sink_writes_one_json_line_per_event_and_counts_them() -> None:
    spec = "synthetic:nodes=6,slow=1,jobs=4,tasks=3,seed=1"
    lines = _run("--trace", spec, "--sink", "stdout", "--limit", "20").stdout.splitlines()
    documents = [orjson.loads(line) for line in lines]
    assert len(documents) == 20
    assert documents[0]["type"] == "JobStart"
    summary = orjson.loads(_run("--trace", spec, "--sink", "null", "--limit", "20", "--json").stdout)
    assert summary["events"] == 20


def test_bad_rows_are_shown_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "tasks.csv"
    path.write_text("job_id,task_id,node_id,start_us,end_us,status\nj1,t1,n1,1,5,SUCCEEDED\nj1,t2,n1,9,5,KILLED\n")
    result = _run("--trace", f"csv:{path}", "--sink", "null")
    assert result.exit_code == 0
    assert f"{path}:3: ends before it starts" in result.stderr
    summary = orjson.loads(_run("--trace", f"csv:{path}", "--sink", "null", "--json").stdout)
    assert summary["bad_rows"] == 1 and summary["bad_examples"][0]["line"] == 3


def test_the_summary_counts_a_duplicated_csv_row_once_and_says_how_many_were_dropped(tmp_path: Path) -> None:
    """A task table whose rows were exported twice was replayed twice over: "12 events (6 task starts)" for 3 tasks."""
    rows = ["j1,t1,n1,0,1000000,SUCCEEDED", "j1,t2,n2,0,2000000,SUCCEEDED", "j1,t3,n3,0,1500000,SUCCEEDED"]
    path = tmp_path / "tasks.csv"
    path.write_text("\n".join(["job_id,task_id,node_id,start_us,end_us,status", *rows, rows[1], rows[2], rows[2]]))
    sent = [orjson.loads(line) for line in _run("--trace", f"csv:{path}", "--sink", "stdout").stdout.splitlines()]
    assert sorted((event["type"], event["task_id"]) for event in sent) == sorted(
        (kind, task) for kind in ("TaskStart", "TaskFinish") for task in ("t1", "t2", "t3"))  # fmt: skip
    said = _run("--trace", f"csv:{path}", "--sink", "null")
    assert said.exit_code == 0 and "6 events (3 task starts, 1 job)" in said.stderr
    assert "skipped: 3 (duplicate rows dropped, each the same as an earlier line: 3)" in said.stderr
    summary = orjson.loads(_run("--trace", f"csv:{path}", "--sink", "null", "--json").stdout)
    assert (summary["events"], summary["tasks"], summary["finished"]) == (6, 3, {"SUCCEEDED": 3})
    assert summary["skip_reasons"] == {"duplicate rows dropped, each the same as an earlier line": 3}


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--trace", "nope:/x", "--sink", "null"], 1, "unknown trace format 'nope'"),
        (["--trace", "csv:/no/such.csv", "--sink", "null"], 1, "No such file or directory: /no/such.csv"),
        (["--trace", "synthetic:nodes=-1", "--sink", "null"], 1, "nodes must be at least 1"),
        (["--trace", "synthetic:", "--sink", "null", "--bootstrap", "h:1"], 2, "--bootstrap is for the kafka"),
        (["--trace", "synthetic:", "--sink", "null", "--speed", "2", "--max-rate", "5"], 2, "not both"),
        (["--trace", "synthetic:", "--sink", "stdout", "--json"], 2, "both write to stdout"),
        (["--trace", "synthetic:", "--sink", "null", "--speed", "0"], 2, "--speed"),
        (["--trace", "synthetic:", "--bootstrap", "nohostport"], 2, "is not HOST:PORT"),
        (["--trace", "synthetic:", "--bootstrap", ""], 2, "'' is not HOST:PORT"),  # fell back to the setting
        (["--trace", "synthetic:", "--bootstrap", "h:99999"], 2, "with a port from 1 to 65535"),
        (["--trace", "synthetic:", "--sink", "null", "--speed", "nan"], 2, "'nan' is not a finite number"),
        (["--trace", "synthetic:", "--sink", "null", "--max-rate", "inf"], 2, "'inf' is not a finite number"),
        (["--sink", "null"], 2, "Missing option '--trace'"),
    ],
)
def test_user_mistakes_print_one_line_without_a_traceback(args: list[str], code: int, message: str) -> None:
    result = _run(*args)
    assert result.exit_code == code
    assert message in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_help_lists_every_format() -> None:
    result = _run("--help")
    assert result.exit_code == 0
    for name in ("google2011-events", "alibaba2017-tasks", "csv", "synthetic"):
        assert name in result.stdout


def test_a_file_replayed_in_the_wrong_format_fails_instead_of_publishing_nothing_with_exit_0(tmp_path: Path) -> None:
    path = tmp_path / "batch_task.csv"
    path.write_text("".join(f"{i},{i + 60},j{i},t{i},1,Terminated,1,0.5\n" for i in range(9)))
    result = _run("--trace", f"alibaba2017:{path}", "--sink", "null")
    assert result.exit_code == 1 and "no usable event" in result.stderr and "all 9 rows were bad" in result.stderr


def test_a_csv_row_without_a_node_is_a_bad_row_not_a_task_on_node_empty(tmp_path: Path) -> None:
    path = tmp_path / "tasks.csv"
    path.write_text("job_id,task_id,node_id,start_us,end_us,status\nj1,t5,,1000000,6000000,SUCCEEDED\n"
                    "j1,t6,n1,1000000,6000000,SUCCEEDED\n")
    result = _run("--trace", f"csv:{path}", "--sink", "stdout")
    assert result.exit_code == 0, result.output
    assert '"node_id":""' not in result.stdout and "empty job_id, task_id or node_id" in result.output


def test_a_csv_saved_with_a_byte_order_mark_reads_as_without_it(tmp_path: Path) -> None:
    """Excel's "CSV UTF-8" starts the file with a BOM: its header "lacked column(s) job_id"."""
    text = "job_id,task_id,node_id,start_us,end_us,status\nj1,t6,n1,1000000,6000000,SUCCEEDED\n"
    plain, marked = tmp_path / "plain.csv", tmp_path / "marked.csv"
    plain.write_text(text)
    marked.write_bytes(b"\xef\xbb\xbf" + text.encode())
    results = [_run("--trace", f"csv:{path}", "--sink", "stdout") for path in (plain, marked)]
    assert [r.exit_code for r in results] == [0, 0], results[1].output
    assert results[0].stdout == results[1].stdout and '"job_id":"j1"' in results[1].stdout


def test_sigterm_ends_a_replay_as_ctrl_c_does_with_its_summary_and_a_non_zero_exit() -> None:
    """A Kubernetes replay Job deleted mid-run gets SIGTERM: the replay died by the signal, with no summary and no
    flush. Now it stops as on Ctrl-C (the sink closed, the summary printed) and exits 128 + 15."""
    import signal
    import subprocess
    import sys
    import time

    command = [sys.executable, "-m", "laggard", "replay", "--trace", "synthetic:nodes=40,slow=3,jobs=3000,seed=3",
               "--sink", "stdout", "--max-rate", "2000"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    process.stdout.readline()  # the first event is out: the replay runs, its handler is set
    time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM, err
    sent = int(re.search(r"interrupted: ([\d,]+) events sent, the rest of the trace not", err)[1].replace(",", ""))
    assert 0 < sent < 200_000 and len(out.splitlines()) + 1 == sent  # what was written, exactly: no event in between
    starts = int(re.search(r"events \(([\d,]+) task starts", err)[1].replace(",", ""))
    assert starts == out.count('"type":"TaskStart"'), err  # the event read when the signal came is not counted


def test_the_summary_of_an_interrupted_replay_counts_what_was_sent_not_the_event_read_before_ctrl_c() -> None:
    """Ctrl-C during the pacer's wait for an event left that event counted among the summary's task starts,
    finishes and jobs (one more than written), though not among its events."""
    from laggard.commands.replay import _run
    from producers.registry import open_trace
    from producers.sink import Interrupts

    class Sent:
        def __init__(self) -> None:
            self.events: list = []

        def send(self, event) -> None:  # type: ignore[no-untyped-def]
            self.events.append(event)

        def close(self) -> None:
            pass

    spec = "synthetic:nodes=4,jobs=3,tasks=2,seed=1"
    for stop_at in range(1, len(list(open_trace(spec))) + 1):  # each event (every kind, a job's first) read last
        class CtrlC:
            def __init__(self, at: int) -> None:
                self.waits, self.at = 0, at

            def wait(self, ts_us: int) -> None:
                self.waits += 1
                if self.waits == self.at:
                    raise KeyboardInterrupt

        sink, trace = Sent(), open_trace(spec)
        summary = _run(trace, sink, CtrlC(stop_at), None, Interrupts())  # type: ignore[arg-type]
        sent = sink.events
        assert summary["interrupted"] and summary["events"] == len(sent) == stop_at - 1
        assert summary["tasks"] == sum(type(e).__name__ == "TaskStart" for e in sent)
        assert sum(summary["finished"].values()) == sum(type(e).__name__ == "TaskFinish" for e in sent)
        assert summary["jobs"] == len({e.job_id for e in sent})


def test_a_signal_during_a_send_waits_for_its_count_and_a_second_does_not() -> None:
    from producers.sink import Interrupts, replay
    from producers.synthetic import SyntheticCluster, parse_config

    interrupts = Interrupts()

    class SignalledSink:
        count = 0

        def send(self, event) -> None:  # type: ignore[no-untyped-def]
            self.count += 1
            if self.count == 3:
                interrupts(15, None)  # SIGTERM arrives while the third event is being sent

        def close(self) -> None:
            pass

    events = list(SyntheticCluster(parse_config("nodes=4,jobs=3,seed=1")))
    result = replay(events, SignalledSink(), interrupts=interrupts)
    assert result.interrupted and result.events == 3 and interrupts.signal == 15
    again = Interrupts()
    again.sending = True
    again(2, None)  # waits
    with pytest.raises(KeyboardInterrupt):
        again(2, None)  # the user insists


def test_a_bootstrap_setting_that_is_no_address_is_one_line_where_it_connects_and_nothing_elsewhere(
        monkeypatch) -> None:
    """LAGGARD_BOOTSTRAP_SERVERS=kafka:99999 read as "connection refused" (a bare host as well, without a connection
    tried), where --bootstrap with it was refused; a command that reads no broker must not fail on it."""
    for value in ("kafka:99999", "kafka"):
        monkeypatch.setenv("LAGGARD_BOOTSTRAP_SERVERS", value)
        result = _run("--trace", "synthetic:nodes=4,jobs=1")
        assert result.exit_code == 1 and "Traceback" not in result.stderr
        assert f"no Kafka broker answers at {value} " in result.stderr
        assert f"{value!r} is not HOST:PORT (or [IPV6]:PORT) with a port from 1 to 65535" in result.stderr
        assert _run("--trace", "synthetic:nodes=4,jobs=1", "--sink", "null").exit_code == 0  # no broker read


def test_probe_connects_to_the_host_and_port_an_address_names_ipv6_included(monkeypatch) -> None:
    from streams import kafka_clients

    tried = []

    def connect(address, timeout):  # type: ignore[no-untyped-def]
        tried.append(address)
        raise ConnectionRefusedError

    monkeypatch.setattr(kafka_clients.socket, "create_connection", connect)
    with pytest.raises(kafka_clients.BrokerUnavailable):
        kafka_clients.probe("kafka-1:9093,[::1]:9092", timeout_s=0)
    assert tried == [("kafka-1", 9093), ("::1", 9092)]
