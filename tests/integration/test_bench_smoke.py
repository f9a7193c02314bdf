"""`laggard bench` end to end at its smallest size: one JSON document with every figure, nothing else on stdout.

Speed is printed by the bench, never asserted here: the test checks that each figure is there and is a
positive number. The smallest size still starts a Kafka broker of its own (on free loopback ports) and
`laggard worker` subprocesses, so it takes a minute or two.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from laggard.cli import cli

FIGURES = [
    "machine.cpu_count",
    *(f"floors.{records}.{figure}" for records in ("google_events", "usage_series") for figure in (
        "orjson_loads_per_s", "orjson_records_per_s", "codec_decode_per_s", "fastavro_raw_per_s",
        "avro_reference_per_s", "fastavro_vs_avro_reference")),
    "inprocess.statistics.read_per_s", "inprocess.statistics.pipeline_per_s", "inprocess.statistics.events",
    "inprocess.nurd.read_per_s", "inprocess.nurd.pipeline_per_s", "inprocess.nurd.checkpoints_per_s",
    "nurd_cost.nurd_us_per_checkpoint", "nurd_cost.nurd_batch_us_per_checkpoint", "nurd_cost.batch_over_nurd",
    "kafka.floors.produce_per_s", "kafka.floors.consume_per_s",
    "kafka.one_worker.sustained_per_s", "kafka.one_worker.processed", "kafka.one_worker.worker_peak_mb.0",
    "kafka.two_workers.sustained_per_s", "kafka.two_workers.processed", "kafka.two_workers.worker_peak_mb.1",
    "kafka.latency.period_wall_s", "kafka.latency.events", "kafka.latency.worker_peak_mb",
    *(f"kafka.latency.ranking.{kind}.{q}" for kind in ("close_to_output", "finish_to_output")
      for q in ("p50_s", "p99_s")),
    "floors.peak_mb", "inprocess.peak_mb", "nurd_cost.peak_mb", "kafka.peak_mb", "kafka.broker_peak_mb",
    "ratios.statistics_to_orjson_floor", "ratios.nurd_path_to_orjson_floor", "ratios.nurd_batch_over_nurd",
    "ratios.one_worker_to_consume_floor", "ratios.two_workers_to_consume_floor",
    # the same scenarios on the direct engine
    "kafka.direct.consume_per_s", "kafka.direct.one_worker.sustained_per_s",
    "kafka.direct.one_worker.processed_per_worker_cpu_s", "kafka.direct.two_workers.sustained_per_s",
    "kafka.direct.latency.ranking.finish_to_output.p99_s", "ratios.direct_one_worker_to_consume_floor",
    "ratios.direct_two_workers_over_one",
    # through the whole pipeline: events ranked, not only normalised (kafka.ProgressWatch; the Faust ranking may
    # still be behind when the tiny run's 10 s window ends, and then has no rate to compare: output._ranked)
    "kafka.direct.one_worker.ranked_per_s", "kafka.direct.two_workers.ranked_per_s",
    # the statistics role alone (prediction deployed apart), its consume floor measured beside it
    "kafka.direct.statistics_one_worker.sustained_per_s", "kafka.direct.statistics_one_worker.to_consume_floor",
]  # fmt: skip


def figure(document: dict[str, Any], path: str) -> Any:
    value: Any = document
    for part in path.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


@pytest.fixture(scope="module")
def tiny_run(traces_dir: Path) -> Any:
    return CliRunner().invoke(cli, ["bench", "--size", "tiny", "--json"], env={"LAGGARD_TRACES_DIR": str(traces_dir)})


def test_bench_prints_one_document_with_every_figure_positive(tiny_run: Any) -> None:
    assert tiny_run.exit_code == 0, tiny_run.stderr[-3000:]
    document = orjson.loads(tiny_run.stdout)  # fails if anything else shares stdout with the document
    missing = []
    for path in FIGURES:
        try:
            value = figure(document, path)
        except (KeyError, IndexError, TypeError):
            missing.append(path)
            continue
        assert isinstance(value, int | float) and not isinstance(value, bool), (path, value)
        assert math.isfinite(value) and value > 0, (path, value)
    assert not missing, f"figures missing from the document: {missing}"
    assert len(document["machine"]["load_average_start"]) == 3
    assert document["kafka"]["latency"]["definition"], "the latency says how it is measured"
    assert {target["name"] for target in document["ratios"]["targets"]} >= {
        "statistics + ranking / Avro codec decode", "nurd-batch / nurd cost per checkpoint",
        "one worker, ranked / raw consume", "two workers / one worker, ranked"}  # fmt: skip
    for scenario in ("one_worker", "two_workers"):  # the watch waited for the ranking, not the marks alone
        run = document["kafka"]["direct"][scenario]
        assert run["ranked"] > 0, run


def test_bench_measures_the_ranking_at_scale_under_both_policies(tiny_run: Any) -> None:
    """The scale stage ranks a synthetic cluster under P-Cores (summaries) and under the default running policy
    (summaries and every task's start and finish), and each finds the cluster's slow node."""
    assert tiny_run.exit_code == 0, tiny_run.stderr[-3000:]
    scale = orjson.loads(tiny_run.stdout)["scale"]
    for key, policy in (("by_nodes", "pcores"), ("running_by_nodes", "running")):
        (result,) = scale[key].values()
        assert result["policy"] == policy and result["seconds_per_period"] > 0, result
        assert result["listed"] == result["slow"] == 1, result
    (running,) = scale["running_by_nodes"].values()
    assert running["task_events_per_period"] == 2 * 4 * running["nodes"], running


def test_bench_leaves_no_broker_or_worker_running(tiny_run: Any) -> None:
    assert tiny_run.exit_code == 0
    running = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    leftovers = [line for line in running.splitlines() if "laggard-bench-" in line]
    assert not leftovers, leftovers


def test_bench_names_a_missing_trace_folder_in_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["bench", "--quick"], env={"LAGGARD_TRACES_DIR": str(tmp_path)})
    assert result.exit_code == 1
    assert result.output.strip().count("\n") == 0 and "LAGGARD_TRACES_DIR" in result.output, result.output


def test_bench_rejects_a_bootstrap_that_is_not_host_port() -> None:
    result = subprocess.run([sys.executable, "-m", "laggard", "bench", "--bootstrap", "nonsense"],
                            capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 2 and "HOST:PORT" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_sigterm_stops_the_bench_with_143_and_leaves_nothing_running(traces_dir: Path, tmp_path: Path) -> None:
    """A bench stopped by its supervisor (SIGTERM) while its Kafka stage ran printed the stage's KeyboardInterrupt
    traceback and exited 130, as if Ctrl-C had stopped it; its broker and workers must be gone either way."""
    import os
    import signal
    import time

    err_path = tmp_path / "stderr"
    with err_path.open("w") as err:
        process = subprocess.Popen([sys.executable, "-m", "laggard", "bench", "--size", "tiny", "--json"],
                                   stdout=subprocess.DEVNULL, stderr=err,
                                   env={**os.environ, "LAGGARD_TRACES_DIR": str(traces_dir)})
        deadline = time.monotonic() + 300
        while "pre-loading" not in err_path.read_text():  # the broker and its topics are up
            assert process.poll() is None and time.monotonic() < deadline, err_path.read_text()
            time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        returncode = process.wait(timeout=180)
    text = err_path.read_text()
    assert returncode == 128 + signal.SIGTERM and text.rstrip().endswith("terminated"), text
    assert "Traceback" not in text, text
    running = subprocess.run(["ps", "-eo", "stat,args"], capture_output=True, text=True, check=True).stdout
    leftovers = [line for line in running.splitlines() if "laggard-bench-" in line and not line.startswith("Z")]
    assert not leftovers, leftovers
