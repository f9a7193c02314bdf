"""Each applier on hand-made changes: file, YARN exclude file and flags, webhook; and the state file."""

from __future__ import annotations

import http.server
import logging
import os
import stat
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import orjson
import pytest

from adapters import statefile
from adapters.base import ApplyError, write_atomically
from adapters.file import FileApplier
from adapters.follower import Change, Follower, FollowerState
from adapters.webhook import WebhookApplier
from adapters.yarn import YarnApplier, load_host_map
from streams.core.events import BlacklistDelta, BlacklistEntry, RemovedEntry


def change(after: set[str], added: tuple[str, ...] = (), removed: tuple[str, ...] = (), version: int = 1) -> Change:
    entries = tuple(BlacklistEntry(n, 0, 9, 1.1, 0.2, 0.9, 1.3, f"{n} is slow") for n in added)
    gone = tuple(RemovedEntry(n, f"{n} recovered") for n in removed)
    record = BlacklistDelta("c1", version, 7, "pcores", 0, 1, entries, gone)
    before = (frozenset(after) - set(added)) | set(removed)
    return Change("c1", version, "delta", entries, gone, before, frozenset(after), record)


# --- file -------------------------------------------------------------------------------------------------


def test_file_applier_writes_one_node_per_line_and_replaces_the_file(tmp_path: Path) -> None:
    path = tmp_path / "blacklist.txt"
    applier = FileApplier(path)
    applier.apply(change({"n2", "n10"}, added=("n2", "n10")))
    assert path.read_text() == "n10\nn2\n"
    applier.apply(change(set(), removed=("n2", "n10"), version=2))
    assert path.read_text() == ""
    assert [p.name for p in tmp_path.iterdir()] == ["blacklist.txt"]  # no temporary file left behind


def test_dry_run_touches_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "laggard.adapters")
    FileApplier(tmp_path / "b.txt", dry_run=True).apply(change({"n1"}, added=("n1",)))
    YarnApplier(tmp_path / "x.xml", refresh_command="false", health_dir=tmp_path / "h", dry_run=True).apply(
        change({"n1"}, added=("n1",))
    )
    assert list(tmp_path.iterdir()) == []
    assert "would replace" in caplog.text and "would run false" in caplog.text


def test_atomic_write_keeps_the_old_permissions(tmp_path: Path) -> None:
    path = tmp_path / "exclude"
    path.write_text("old\n")
    os.chmod(path, 0o640)
    write_atomically(path, "new\n")
    assert path.read_text() == "new\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    write_atomically(tmp_path / "fresh", "x")
    assert stat.S_IMODE((tmp_path / "fresh").stat().st_mode) == 0o644  # readable by a ResourceManager


# --- yarn -------------------------------------------------------------------------------------------------


def test_yarn_xml_exclude_file_is_what_hadoop_reads(tmp_path: Path) -> None:
    path = tmp_path / "yarn.exclude.xml"
    YarnApplier(path, refresh_command=None).apply(change({"n1", "a&b"}, added=("n1", "a&b")))
    root = ET.parse(path).getroot()
    assert root.tag == "hosts"
    assert sorted(host.findtext("name") for host in root.iter("host")) == ["a&b", "n1"]


def test_yarn_plain_exclude_file_and_refresh_command_runs_after_each_change(tmp_path: Path) -> None:
    path, calls = tmp_path / "yarn.exclude", tmp_path / "calls"
    applier = YarnApplier(path, refresh_command=f"sh -c 'cat {path} >> {calls}'")
    applier.apply(change({"n1"}, added=("n1",)))
    applier.apply(change({"n1", "n2"}, added=("n2",), version=2))
    assert path.read_text() == "n1\nn2\n"
    assert calls.read_text() == "n1\n" + "n1\nn2\n"  # the command saw each new file


def test_a_failing_refresh_command_is_an_apply_error_with_its_output(tmp_path: Path) -> None:
    applier = YarnApplier(tmp_path / "ex", refresh_command="sh -c 'echo RM unreachable >&2; exit 4'")
    with pytest.raises(ApplyError, match=r"status 4: RM unreachable"):
        applier.apply(change({"n1"}, added=("n1",)))
    with pytest.raises(ApplyError, match="could not run"):
        YarnApplier(tmp_path / "ex", refresh_command="/nonexistent/yarn rmadmin").apply(change({"n1"}))


def test_a_java_refresh_failure_is_reported_by_its_message_not_its_stack_frames(tmp_path: Path) -> None:
    trace = (
        "WARN NativeCodeLoader: Unable to load native-hadoop library\n"
        "refreshNodes: Call From vm/127.0.0.1 to localhost:1 failed on connection exception: "
        "java.net.ConnectException: Connection refused\n"
        "Exception in thread main java.io.IOException: boom\n\tat org.apache.X.y(X.java:12)\n"
        "Caused by: java.net.ConnectException: Connection refused\n\tat sun.nio.Z.q(Z.java:3)\n\t... 9 more\n"
    )
    (tmp_path / "trace").write_text(trace)
    applier = YarnApplier(tmp_path / "ex", refresh_command=f"sh -c 'cat {tmp_path}/trace >&2; exit 255'")
    with pytest.raises(ApplyError) as raised:
        applier.apply(change({"n1"}, added=("n1",)))
    message = str(raised.value)
    assert "status 255: refreshNodes: Call From" in message and "Caused by: java.net.ConnectException" in message
    assert "\n" not in message and "X.java" not in message and "more" not in message


def test_a_refresh_that_times_out_says_what_timed_out_after_how_long_and_what_comes_next(tmp_path: Path) -> None:
    """It said "refresh command 'yarn rmadmin -refreshNodes' could not run: Command '[...]' timed out after 120.0
    seconds": the command had run (and was killed), and nothing said the exclude file was already written."""
    exclude = tmp_path / "yarn.exclude"
    applier = YarnApplier(exclude, refresh_command="sleep 30", refresh_timeout_s=0.2)
    with pytest.raises(ApplyError) as raised:
        applier.apply(change({"n1"}, added=("n1",)))
    assert str(raised.value) == (
        f"refresh command 'sleep 30' timed out after 0.2 s and was stopped: the exclude file {exclude} is written, "
        "but the ResourceManager may not have re-read it; the change counts as not applied, and the next try writes "
        "the file and runs the refresh again")  # fmt: skip
    assert exclude.read_text().split() == ["n1"]


def test_host_map_names_the_hosts_yarn_knows_in_exclude_file_and_flags(tmp_path: Path, caplog) -> None:
    hosts = tmp_path / "hosts.map"
    hosts.write_text("# laggard node   YARN host\nnode-07 nm7.example.com\nnode-08 10.0.0.8  # rack 2\n"
                     "node-09 10.0.0.8\n")
    exclude, health = tmp_path / "yarn.exclude", tmp_path / "health"
    applier = YarnApplier(exclude, refresh_command=None, health_dir=health, host_map=load_host_map(hosts))
    applier.apply(change({"node-07", "node-08", "node-09", "n-x"}, added=("node-07", "node-08", "node-09", "n-x")))
    assert exclude.read_text() == "10.0.0.8\nn-x\nnm7.example.com\n"  # two nodes on one host: one entry
    assert sorted(p.name for p in health.iterdir()) == ["10.0.0.8", "n-x", "nm7.example.com"]
    assert (health / "nm7.example.com").read_text().startswith("laggard: node-07 is slow")
    assert "not in the host map, written under their own names: n-x" in caplog.text
    applier.apply(change({"node-09"}, removed=("node-07", "node-08", "n-x"), version=2))
    assert exclude.read_text() == "10.0.0.8\n"  # node-09 still keeps its host out
    assert sorted(p.name for p in health.iterdir()) == ["10.0.0.8"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [("node-1\n", "line 1: expected 'NODE HOST'"), ("a h1\nb h2 extra\n", "line 2"),
     ("a h1\na h2\n", "line 2: node 'a' already maps to 'h1'")],
)
def test_a_bad_host_map_is_one_clear_error(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "hosts.map"
    path.write_text(text)
    with pytest.raises(ValueError, match=problem):
        load_host_map(path)
    with pytest.raises(ValueError, match="cannot read the host map"):
        load_host_map(tmp_path / "missing.map")


def test_yarn_exclude_format_must_match_what_hadoop_will_read(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"reads yarn\.exclude as plain"):
        YarnApplier(tmp_path / "yarn.exclude", exclude_format="xml")
    with pytest.raises(ValueError, match="exclude file, a health directory"):
        YarnApplier()


def test_health_flags_follow_the_blacklist_and_spare_operator_files(tmp_path: Path) -> None:
    health = tmp_path / "health"
    health.mkdir()
    (health / "n9").write_text("disk replaced, keep out\n")  # the operator's own flag
    applier = YarnApplier(health_dir=health)
    applier.apply(change({"n1", "n2"}, added=("n1", "n2")))
    assert (health / "n1").read_text().startswith("laggard: n1 is slow")
    applier.apply(change({"n2"}, removed=("n1",), version=2))
    assert sorted(p.name for p in health.iterdir()) == ["n2", "n9"]


def test_a_file_an_applier_cannot_write_is_a_change_not_taken(tmp_path: Path) -> None:
    """A write that fails once running (a directory where the file was; a full disk) raises ``ApplyError`` naming
    the file, which the consumer retries, not an OSError that ended the adapter."""
    (tmp_path / "blacklist.txt").mkdir()
    with pytest.raises(ApplyError, match=f"cannot write {tmp_path / 'blacklist.txt'}: Is a directory"):
        FileApplier(tmp_path / "blacklist.txt").apply(change({"n1"}, added=("n1",)))
    health = tmp_path / "health"
    (health / "n1").mkdir(parents=True)
    with pytest.raises(ApplyError, match=f"cannot write {health / 'n1'}"):
        YarnApplier(health_dir=health).apply(change({"n1"}, added=("n1",)))
    (tmp_path / "a-file").write_text("not a directory\n")
    with pytest.raises(ApplyError, match=r"cannot keep health flags in .*a-file"):
        YarnApplier(health_dir=tmp_path / "a-file").apply(change({"n1"}, added=("n1",)))


def test_a_node_name_that_is_not_a_file_name_gets_no_flag(tmp_path: Path, caplog) -> None:
    health = tmp_path / "health"
    YarnApplier(health_dir=health).apply(change({"../evil", "n1"}, added=("../evil", "n1")))
    assert sorted(p.name for p in health.iterdir()) == ["n1"]
    assert not (tmp_path / "evil").exists()
    assert "not a safe file name" in caplog.text


# --- webhook ----------------------------------------------------------------------------------------------


class Endpoint(http.server.BaseHTTPRequestHandler):
    statuses: ClassVar[list[int]] = []
    received: ClassVar[list[tuple[dict, str]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        status = self.statuses.pop(0) if self.statuses else 200
        if status == 200:
            self.received.append((orjson.loads(body), self.headers["Idempotency-Key"]))
        self.send_response(status)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[str]:
    Endpoint.statuses, Endpoint.received = [], []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Endpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()
    server.server_close()


def test_webhook_posts_the_delta_as_json_after_retrying(endpoint: str) -> None:
    Endpoint.statuses = [503, 500]
    waits: list[float] = []
    WebhookApplier(endpoint, attempts=3, backoff_s=0.5, sleep=waits.append).apply(change({"n1"}, added=("n1",)))
    assert waits == [0.5, 1.0]
    [(body, key)] = Endpoint.received
    assert body["kind"] == "delta" and body["version"] == 1 and body["blacklist"] == ["n1"]
    assert body["added"][0]["node_id"] == "n1" and body["added"][0]["reason"] == "n1 is slow"
    assert key == "c1/delta/1"


def test_webhook_that_stays_down_raises_so_the_version_does_not_advance(endpoint: str) -> None:
    Endpoint.statuses = [503] * 5
    with pytest.raises(ApplyError, match="failed 2 time"):
        WebhookApplier(endpoint, attempts=2, sleep=lambda s: None).apply(change({"n1"}, added=("n1",)))
    unreachable = "http://127.0.0.1:9/hook"  # discard port: nothing listens
    with pytest.raises(ApplyError, match="failed 1 time"):
        WebhookApplier(unreachable, attempts=1, timeout_s=2).apply(change({"n1"}))
    assert Endpoint.received == []


# --- state file -------------------------------------------------------------------------------------------


def test_state_file_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "s" / "state.json"
    follower = Follower("c1", known_nodes=10)
    follower.commit(change({"n1", "n2"}, added=("n1", "n2"), version=4))
    statefile.save(path, "c1", statefile.SavedState(follower.state, {0: 17}))
    loaded = statefile.load(path, "c1")
    assert loaded.follower == FollowerState(4, frozenset({"n1", "n2"}), frozenset({"n1", "n2"}))
    assert loaded.offsets == {0: 17}


@pytest.mark.parametrize("content", [b"{not json", b'{"format": "laggard-adapter-state/0"}', b"[]"])
def test_an_unusable_state_file_means_a_cold_start_with_a_warning(tmp_path: Path, content: bytes, caplog) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(content)
    assert statefile.load(path, "c1") == statefile.SavedState()
    assert "starting cold" in caplog.text


def test_a_state_file_of_another_cluster_is_not_used(tmp_path: Path, caplog) -> None:
    path = tmp_path / "state.json"
    statefile.save(path, "c2", statefile.SavedState(FollowerState(3, frozenset({"x"}))))
    assert statefile.load(path, "c1").follower == FollowerState()
    assert "belongs to cluster 'c2'" in caplog.text


def test_a_file_that_cannot_be_written_is_named_not_its_hidden_temporary(tmp_path: Path) -> None:
    """`laggard adapter file --path /proc/bl.txt` said "No such file or directory: /proc/.bl.txt.asphs1eu.tmp"; a
    --path that is a directory named its temporary file too."""
    import pytest

    from adapters.base import write_atomically

    with pytest.raises(OSError) as raised:
        write_atomically(Path("/proc/bl.txt"), "node-1\n")  # /proc takes no new file, even for root
    assert raised.value.filename == "/proc/bl.txt" and "cannot write in /proc" in raised.value.strerror
    (tmp_path / "a-directory").mkdir()
    with pytest.raises(OSError) as raised:
        write_atomically(tmp_path / "a-directory", "node-1\n")
    assert raised.value.filename == str(tmp_path / "a-directory") and not list((tmp_path).glob(".*.tmp"))


def test_the_once_summary_says_what_was_applied_and_why_it_is_not_in_sync(capsys) -> None:
    """A webhook that could not deliver version 1 printed "no blacklist published yet ... (NOT in sync)": the version
    was published, just not applied, and the reason was only in the log."""
    from adapters.consumer import Outcome
    from laggard.commands.adapter_report import report

    report(Outcome(refused=1, problem="POST http://127.0.0.1:39998/hook: connection refused"), kind="webhook",
            cluster="default", dry_run=False, as_json=False)  # fmt: skip
    report(Outcome(applied=2, version=4, blacklist=["n1"]), kind="file", cluster="c", dry_run=False, as_json=False)
    first, second = capsys.readouterr().err.splitlines()
    assert first.startswith("cluster default: no blacklist applied yet, 0 node(s) blacklisted; 0 applied, 1 refused")
    assert first.endswith("(NOT in sync: POST http://127.0.0.1:39998/hook: connection refused)")
    assert second == "cluster c: version 4 applied, 1 node(s) blacklisted; 2 applied, 0 refused, 0 skipped"


def test_the_once_summary_names_an_unsaved_state_file_and_the_clusters_a_wrong_id_missed(capsys) -> None:
    """Both were a log line only: a state file a full disk would not take, and a --cluster-id that matched nothing
    while deltas of other clusters went by (a typo)."""
    from adapters.consumer import Outcome
    from laggard.commands.adapter_report import report

    unsaved = "state file /full/disk/state.json not saved (No space left on device)"
    report(Outcome(applied=1, version=1, blacklist=["n1"], state_problem=unsaved), kind="file", cluster="c",
            dry_run=False, as_json=False)  # fmt: skip
    others = [f"cluster-{i}" for i in range(7, 0, -1)]
    report(Outcome(other_clusters=others), kind="file", cluster="clustr-1", dry_run=False, as_json=False)
    report(Outcome(applied=1, version=2, other_clusters=others), kind="file", cluster="c", dry_run=False,
            as_json=False)  # fmt: skip
    saved, missed, ours = capsys.readouterr().err.splitlines()
    assert saved.endswith(f"; {unsaved}") and "NOT in sync" not in saved
    assert missed.endswith("; the topics hold blacklists of other clusters only: cluster-1, cluster-2, cluster-3, "
                           "cluster-4, cluster-5 ... (--cluster-id)")
    assert "other clusters" not in ours  # its own version applied: other clusters sharing the topics are normal


def test_a_failed_once_json_run_keeps_a_refusal_that_came_before_the_broker_went(capsys) -> None:
    """A change refused, then the broker gone: the JSON document says both, not the broker alone (a reviewer's
    case: the refusal was overwritten)."""
    import orjson

    from adapters.consumer import Outcome
    from laggard.commands.adapter_report import failed

    class State:  # the follower's state as failed() reads it: its version and what it applied
        version, applied = 3, {"n2", "n1"}

    outcome = Outcome(refused=1, problem="POST http://127.0.0.1:39998/hook: connection refused")
    failed(outcome, State(), "no broker at 127.0.0.1:1", kind="webhook", cluster="c", dry_run=False, as_json=True)
    document = orjson.loads(capsys.readouterr().out)
    assert document["problem"] == ("POST http://127.0.0.1:39998/hook: connection refused; then no broker at "
                                   "127.0.0.1:1")
    assert (document["in_sync"], document["version"], document["blacklist"]) == (False, 3, ["n1", "n2"])
