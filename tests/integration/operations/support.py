"""What the operational tier shares: a broker that can be restarted in place, processes with metrics ports, scrapes."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from prometheus_client.parser import text_string_to_metric_families

from laggard import kafka_local
from producers.registry import open_trace
from streams.core.events import BlacklistDelta, BlacklistSnapshot
from streams.core.stages import RankResult
from streams.local import LocalPipeline
from streams.settings import Settings
from tests.integration.support import LAGGARD

PARTITIONS = 4


@contextmanager
def own_broker(data_dir: Path) -> Iterator[kafka_local.Broker]:
    port, controller = kafka_local.free_ports(2)
    broker = kafka_local.Broker(port=port, controller_port=controller, data_dir=data_dir)
    kafka_local.start(broker)
    try:
        yield broker
    finally:
        kafka_local.stop(broker)


def final_snapshot(spec: str) -> BlacklistSnapshot:
    """The snapshot an uninterrupted run ends with (the in-process runner publishes what a live worker does)."""
    pipeline = LocalPipeline(Settings(), partitions=PARTITIONS)
    list(pipeline.run(open_trace(spec), finish=False))
    return pipeline.blacklist


def start(args: list[str], log: Path, **env: str) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen([*LAGGARD, *args], stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ, **env))


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:
        return 0, str(exc)


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample on /metrics: (name, sorted labels) -> value."""
    status, text = get(port, "/metrics")
    assert status == 200, text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def wait_until(condition, timeout_s: float, what: str, log: Path | None = None, every_s: float = 1.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}\n{tail}")
        time.sleep(every_s)


# Several workers, rebalances and kills (test_rebalance.py, test_kill_after_commit.py).

SOURCES = ("task-events", "job-events", "ranking-feed")


def start_worker(bootstrap: str, metrics_port: int, data_dir: Path, log: Path, **env: str
                 ) -> subprocess.Popen[bytes]:
    """`laggard worker` with /metrics on ``metrics_port``; every worker of a test joins the same group."""
    return start(["worker", "--bootstrap", bootstrap, "--partitions", str(PARTITIONS), "--web-port", "0",
                  "--metrics-port", str(metrics_port)], log, LAGGARD_DATA_DIR=str(data_dir), **env)


def counted(port: int, name: str) -> float:
    """The sum of a counter's samples on a worker's /metrics (0 when it does not answer)."""
    try:
        return sum(v for (sample, _), v in scrape(port).items() if sample == name)
    except AssertionError:
        return 0.0


class CommittedOffsets:
    """The consumer group's committed offsets of the source topics, read from the broker."""

    def __init__(self, bootstrap: str, group: str = "laggard") -> None:
        from streams import kafka_clients

        self.group = group
        self._admin = kafka_clients.admin(Settings(bootstrap_servers=bootstrap))

    def now(self) -> dict[str, int]:
        from kafka.errors import KafkaError

        try:
            found = self._admin.list_group_offsets({self.group: None}).get(self.group, {})
        except KafkaError:  # no coordinator yet, a rebalance under way: nothing known this time
            return {}
        return {f"{tp.topic}:{tp.partition}": meta.offset for tp, meta in found.items()
                if tp.topic in SOURCES and meta.offset >= 0}

    def close(self) -> None:
        self._admin.close()


def assert_same_snapshot(final: BlacklistSnapshot, expected: BlacklistSnapshot) -> None:
    """The version, the nodes listed and each entry's statistics are the uninterrupted run's."""
    assert (final.version, final.node_ids) == (expected.version, expected.node_ids)
    assert [(e.node_id, e.n, e.mean, e.ci_low) for e in final.nodes] == [
        (e.node_id, e.n, e.mean, e.ci_low) for e in expected.nodes]


Stats = tuple[int, float, float]  # a node's n, mean and std in one window
Delta = tuple[int, list[str], list[str]]  # version, nodes added, nodes removed


def delta_summary(delta: BlacklistDelta) -> Delta:
    return delta.version, sorted(e.node_id for e in delta.added), sorted(e.node_id for e in delta.removed)


class CleanRun(NamedTuple):
    """What an uninterrupted run publishes: the last snapshot, and each node's statistics in every window."""

    snapshot: BlacklistSnapshot
    windows: dict[tuple[str, int], Stats]  # (node, window end) -> statistics
    deltas: list[Delta]

    @property
    def last_window(self) -> int:
        return max(end for _, end in self.windows)


def clean_run(spec: str) -> CleanRun:
    windows: dict[tuple[str, int], Stats] = {}

    def keep(result: RankResult) -> None:
        windows.update(((s.node_id, s.window_end_us), (s.n, s.mean, s.std)) for s in result.ranking.node_scores())

    pipeline = LocalPipeline(Settings(), partitions=PARTITIONS, on_ranking=keep)
    deltas = [delta_summary(d) for d in pipeline.run(open_trace(spec), finish=False)]
    assert windows, "the trace ranks at least one period"
    return CleanRun(pipeline.blacklist, windows, deltas)


class Published(NamedTuple):
    """What the workers published: the last snapshot, and every node-scores record in the order of its node."""

    snapshot: BlacklistSnapshot
    scores: list[tuple[str, int, Stats]]  # (node, window end, statistics)
    deltas: list[Delta]

    def latest(self) -> dict[str, Stats]:
        return {node: stats for node, _, stats in self.scores}


def lags(port: int) -> dict[tuple[str, int], float]:
    """Records waiting on each source partition a worker holds, from its /metrics (empty: no answer)."""
    try:
        samples = scrape(port)
    except AssertionError:
        return {}
    return {(labels["topic"], int(labels["partition"])): value for (name, raw), value in samples.items()
            if name == "laggard_consumer_lag_records" for labels in (dict(raw),)}


def _published(bootstrap: str) -> Published | None:
    from tests.integration.support import decoded

    snapshots = decoded(bootstrap, "blacklist-snapshot")
    scores = [(s.node_id, s.window_end_us, (s.n, s.mean, s.std)) for s in decoded(bootstrap, "node-scores")]
    deltas = [delta_summary(d) for d in decoded(bootstrap, "blacklist-deltas")]
    return Published(snapshots[-1], scores, deltas) if snapshots else None


def wait_until_settled(bootstrap: str, port: int, clean: CleanRun, log: Path, timeout_s: float) -> Published:
    """What the workers published once the one on ``port`` holds every source partition, has read all of
    them, the last window of the clean run is out and nothing more comes between two looks."""
    every_source = 2 * PARTITIONS + 1  # task-events, job-events, the ranking feed
    previous: list[Published | None] = [None]

    def settled() -> Published | None:
        waiting = lags(port)
        if len(waiting) < every_source or any(waiting.values()):
            previous[0] = None
            return None
        now = _published(bootstrap)
        if now is None or now.snapshot.version < clean.snapshot.version or max(
                (end for _, end, _ in now.scores), default=-1) < clean.last_window:
            return None
        quiet, previous[0] = now == previous[0], now
        return now if quiet else None

    result: Published = wait_until(settled, timeout_s, "the worker to settle on the clean run's last window",
                                   log, every_s=3)
    return result


def assert_same_decisions(published: Published, clean: CleanRun) -> None:
    """The deltas (each version once, in order) and the final snapshot are the clean run's."""
    assert published.deltas == clean.deltas
    assert_same_snapshot(published.snapshot, clean.snapshot)


def score_differences(published: Published, clean: CleanRun) -> list[tuple[str, int, Stats, Stats | None]]:
    """Every node-scores record whose statistics are not the clean run's for its node and window (an event
    lost or counted twice anywhere shows in the windows after it), and each node's latest record that does not
    hold the statistics of the clean run's last window."""
    wrong = [(node, end, stats, clean.windows.get((node, end))) for node, end, stats in published.scores
             if clean.windows.get((node, end)) != stats]
    latest = published.latest()
    return wrong + [(node, clean.last_window, latest.get(node, (0, 0.0, 0.0)), stats)
                    for (node, end), stats in clean.windows.items()
                    if end == clean.last_window and latest.get(node) != stats]


def assert_same_end(published: Published, clean: CleanRun) -> None:
    """The clean run's decisions, and its statistics in every window."""
    assert_same_decisions(published, clean)
    wrong = score_differences(published, clean)
    assert not wrong, f"{len(wrong)} of {len(published.scores)} scores differ from the clean run's: {wrong[:5]}"
