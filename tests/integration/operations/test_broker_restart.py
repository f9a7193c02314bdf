"""A broker restarted mid-stream, in place (same ports, same data directory, at once), with a worker and an adapter
running: both recover with no one's help, the final snapshot is the uninterrupted run's, and the outage is a few log
lines. Every process serves /metrics, /livez and /readyz, scraped here."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from laggard import kafka_local
from streams import kafka_clients
from streams.engine.rejoin import while_broker_away
from streams.engine.store import CheckpointStore
from streams.errors import BrokerUnavailable
from streams.serde import codec
from streams.settings import Settings
from tests.integration.operations.support import (
    PARTITIONS,
    final_snapshot,
    get,
    own_broker,
    scrape,
    start,
    stop,
    wait_until,
)
from tests.integration.support import decoded, replay

SPEC = "synthetic:nodes=40,slow=3,jobs=300,seed=3"


@pytest.fixture(scope="module")
def expected():  # type: ignore[no-untyped-def]
    return final_snapshot(SPEC)


def _restart_in_place(broker: kafka_local.Broker, how: signal.Signals) -> float:
    """Stop the broker with ``how`` and start it again at once on the same ports and data; seconds it was away."""
    pid = kafka_local.status(broker)
    assert pid is not None
    began = time.monotonic()
    if how == signal.SIGKILL:
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: kafka_local.status(broker) is None, 30, "the killed broker to be gone", every_s=0.2)
    else:
        kafka_local.stop(broker)
    kafka_local.start(broker)
    return time.monotonic() - began


@pytest.mark.timeout(600)
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_worker_and_adapter_recover_from_a_broker_restart_to_the_same_final_snapshot(
        tmp_path: Path, how: signal.Signals, expected) -> None:  # type: ignore[no-untyped-def]
    worker_port, adapter_port = kafka_local.free_ports(2)
    worker_log, adapter_log = tmp_path / "worker.log", tmp_path / "adapter.log"
    blacklist = tmp_path / "blacklist.txt"
    with own_broker(tmp_path / "broker") as broker:
        bootstrap = broker.bootstrap
        worker = start(["worker", "--bootstrap", bootstrap, "--partitions", str(PARTITIONS), "--web-port", "0",
                        "--metrics-port", str(worker_port), "--restart-on-stall"], worker_log,
                       LAGGARD_DATA_DIR=str(tmp_path / "faust"), LAGGARD_STALL_TIMEOUT_S="30")
        adapter = None
        try:
            wait_until(lambda: get(worker_port, "/livez")[0] == 200, 120, "the worker's /livez", worker_log)
            adapter = start(["adapter", "file", "--bootstrap", bootstrap, "--path", str(blacklist), "--state-file",
                             str(tmp_path / "adapter.json"), "--known-nodes", "40", "--metrics-port",
                             str(adapter_port)], adapter_log)
            replay(bootstrap, SPEC)
            wait_until(lambda: decoded(bootstrap, "blacklist-deltas"), 180, "a first delta", worker_log)
            lines_before = len(worker_log.read_text(errors="replace").splitlines())
            away_s = _restart_in_place(broker, how)
            assert away_s < 60, f"the broker took {away_s:.0f} s to come back on its own ports"
            snapshots = wait_until(
                lambda: [s for s in decoded(bootstrap, "blacklist-snapshot") if s.version >= expected.version],
                300, "the final snapshot after the restart", worker_log, every_s=3)
            wait_until(lambda: blacklist.exists() and set(blacklist.read_text().split()) == set(expected.node_ids),
                       120, "the adapter to apply the final blacklist", adapter_log)
            adapted = wait_until(lambda: scrape(adapter_port).get(
                ("laggard_delta_version_applied", (("adapter", "file"),))) == expected.version, 60,
                "the adapter's applied version on /metrics", adapter_log)
            assert adapted
            worker_metrics = scrape(worker_port)
            assert get(worker_port, "/livez")[0] == 200 and get(adapter_port, "/livez")[0] == 200
        finally:
            for process in (adapter, worker):
                if process is not None:
                    stop(process)

    final = snapshots[-1]
    assert (final.version, final.node_ids) == (expected.version, expected.node_ids)
    assert [(e.node_id, e.n, e.mean, e.ci_low) for e in final.nodes] == [
        (e.node_id, e.n, e.mean, e.ci_low) for e in expected.nodes]
    # The worker's /metrics counts what it reads. The count may be 0: a direct worker the outage ended (exit 75) is
    # started again by --restart-on-stall as a new process, which finds every record processed and committed when
    # the first one had caught up before the outage (CI, once forwarding was batched); the snapshot above is the proof
    # of the work, this of the metrics.
    served = [labels for (name, labels), _ in worker_metrics.items() if name == "laggard_events_in_total"]
    assert any(("topic", "task-events") in labels for labels in served), worker_metrics
    outage = worker_log.read_text(errors="replace").splitlines()[lines_before:]
    complaints = [line for line in outage if "[ERROR]" in line or "[WARNING]" in line]
    assert len(complaints) < 100, f"{len(complaints)} error/warning lines for one restart:\n" + "\n".join(
        complaints[:40])


@pytest.mark.timeout(300)
def test_a_checkpoint_read_begun_while_the_broker_is_away_waits_for_it_and_returns_the_checkpoints(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """What a direct worker reads when it (re)joins its group, its checkpoints (``CheckpointStore.load``), is read
    again while the broker is away (``rejoin.while_broker_away``), within the assignment's deadline: the read starts
    with the broker stopped, the broker comes back on its own ports, and the read returns the checkpoint written
    before. Read once, the same load fails on the stopped broker (it used to end the worker, exit 75, a supervisor
    needed)."""
    with own_broker(tmp_path / "broker") as broker:
        settings = Settings(bootstrap_servers=broker.bootstrap, app_id="rejoin", snapshot_read_timeout_s=10)
        store = CheckpointStore(settings, outbox=None)  # type: ignore[arg-type]  # load reads; it sends nothing
        store.ensure_topic()
        producer = kafka_clients.producer(settings)
        producer.send(store.topic, key=codec.encode_key("rank:0"), value=b"the ranking's state")
        producer.flush()
        producer.close()
        assert store.load({"rank:0"}) == {"rank:0": b"the ranking's state"}

        kafka_local.stop(broker)
        with pytest.raises(BrokerUnavailable):
            store.load({"rank:0"}, timeout_s=2)
        # back after the first attempt's connection probe (3 s) has given up
        back = threading.Timer(5.0, kafka_local.start, args=(broker,))
        began = time.monotonic()
        back.start()
        try:
            with caplog.at_level(logging.WARNING, logger="streams.engine.worker"):
                found = while_broker_away("the checkpoints", lambda left: store.load({"rank:0"}, left),
                                          deadline=began + 60)
        finally:
            back.join()
        assert found == {"rank:0": b"the ranking's state"}
        # read while the broker came back, not once it was back: a first attempt failed, said so, and was made again
        assert "reading the checkpoints: the broker does not answer" in caplog.text


@pytest.mark.timeout(300)
def test_a_faust_worker_stopped_while_its_broker_is_away_exits_at_once_without_a_traceback(tmp_path: Path) -> None:
    """The broker stopped first (the wrong order in a shell, or a node drained with both on it), then SIGTERM to
    `laggard worker` (Faust, the default engine): it used to wait mode's whole 60 s shutdown timeout, its consumer
    thread's close having died of a CancelledError, and print that traceback as ~80 WARNING lines, one per line and
    per caret (streams.agents.shutdown). It now exits in a few seconds, with one line about the consumer's close.
    The bound, 30 s, is half of the timeout it used to wait: a stop, not a speed."""
    worker_port = kafka_local.free_ports(1)[0]
    log = tmp_path / "worker.log"
    with own_broker(tmp_path / "broker") as broker:
        worker = start(["worker", "--bootstrap", broker.bootstrap, "--partitions", str(PARTITIONS), "--web-port",
                        "0", "--metrics-port", str(worker_port)], log, LAGGARD_DATA_DIR=str(tmp_path / "faust"))
        try:
            wait_until(lambda: get(worker_port, "/readyz")[0] == 200, 120, "the worker's /readyz", log)
            kafka_local.stop(broker)
            time.sleep(3)  # the worker notices: its fetcher sleeps between retries, as it would after any outage
            lines_before = len(log.read_text(errors="replace").splitlines())
            began = time.monotonic()
            worker.send_signal(signal.SIGTERM)
            code = worker.wait(120)
            took = time.monotonic() - began
        finally:
            stop(worker)
    after = log.read_text(errors="replace").splitlines()[lines_before:]
    assert took < 30, f"the worker took {took:.0f} s to stop:\n" + "\n".join(after[-30:])
    assert code == 0, "\n".join(after[-30:])
    assert not [line for line in after if "Traceback" in line], "\n".join(after)
    assert any("did not close cleanly" in line for line in after), "\n".join(after)
