"""`laggard adapter ...` as a new user meets it: help, and one clear line for each mistake."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from laggard.cli import cli


def invoke(*args: str):
    return CliRunner().invoke(cli, ["adapter", *args])


@pytest.mark.parametrize("kind", ["file", "yarn", "k8s", "webhook"])
def test_every_adapter_has_help_with_the_shared_options(kind: str) -> None:
    result = invoke(kind, "--help")
    assert result.exit_code == 0
    for option in ("--bootstrap", "--cluster-id", "--dry-run", "--max-fraction", "--state-file", "--once"):
        assert option in result.output


def one_line_error(result) -> str:
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error")]
    assert len(errors) == 1, result.output
    return errors[0]


def test_the_cap_takes_the_cluster_size_from_the_deltas() -> None:
    """Deltas carry how many nodes the ranking saw, so no --known-nodes is needed for the cap."""
    from adapters.follower import Follower, Refusal
    from streams.core.events import BlacklistDelta, BlacklistEntry

    def delta(version: int, nodes: list[str], seen: int) -> BlacklistDelta:
        added = tuple(BlacklistEntry(n, 0, 9, 1.5, 0.3, 1.2, 1.8, "slow") for n in nodes)
        return BlacklistDelta("c", version, version, "pcores", 0, version, added, (), seen)

    assert not isinstance(Follower("c", 0.1).on_delta(delta(1, ["a", "b", "c"], 40)), Refusal)
    refused = Follower("c", 0.1).on_delta(delta(1, ["a", "b", "c"], 20))
    assert isinstance(refused, Refusal) and "3 of 20 known nodes" in refused.reason


def test_known_nodes_must_be_a_count_or_a_file(tmp_path: Path) -> None:
    result = invoke("file", "--path", str(tmp_path / "b"), "--known-nodes", str(tmp_path / "missing"))
    assert "neither a node count nor a readable file" in one_line_error(result)


def test_an_unreachable_broker_is_one_line(tmp_path: Path) -> None:
    result = invoke(
        "file",
        "--path",
        str(tmp_path / "b"),
        "--known-nodes",
        "10",
        "--bootstrap",
        "127.0.0.1:1",
        "--once",
        "--state-file",
        str(tmp_path / "s.json"),
    )
    assert "no Kafka broker answers at 127.0.0.1:1" in one_line_error(result)
    assert not (tmp_path / "b").exists()


def test_once_json_with_no_broker_still_prints_one_json_document_of_what_happened(tmp_path: Path) -> None:
    """A scheduler owner's cron job pipes `--once --json` into jq: with the broker down stdout was empty, so jq
    printed nothing and the script could not tell a failed run from one that never ran."""
    from adapters import statefile
    from adapters.follower import FollowerState

    state = tmp_path / "s.json"
    statefile.save(state, "default", statefile.SavedState(FollowerState(3, frozenset({"n7"}), frozenset({"n7"}))))
    result = invoke("file", "--path", str(tmp_path / "b"), "--bootstrap", "127.0.0.1:1", "--once", "--json",
                    "--state-file", str(state))  # fmt: skip
    assert result.exit_code == 1 and "no Kafka broker answers at 127.0.0.1:1" in one_line_error(result)
    document = json.loads(result.stdout)
    assert document["in_sync"] is False and "no Kafka broker answers at 127.0.0.1:1" in document["problem"]
    assert (document["version"], document["blacklist"], document["applied"]) == (3, ["n7"], 0)  # where it stays
    assert (document["adapter"], document["cluster_id"]) == ("file", "default")


def test_yarn_needs_somewhere_to_write() -> None:
    assert "--exclude-file, --health-dir" in one_line_error(invoke("yarn", "--known-nodes", "10"))


def test_yarn_refuses_an_xml_format_hadoop_would_read_as_plain(tmp_path: Path) -> None:
    result = invoke(
        "yarn",
        "--exclude-file",
        str(tmp_path / "yarn.exclude"),
        "--exclude-format",
        "xml",
        "--known-nodes",
        "10",
    )
    assert "reads yarn.exclude as plain" in one_line_error(result)


def test_yarn_names_the_bad_line_of_a_host_map(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.map"
    hosts.write_text("node-07 nm7\nnode-08\n")
    result = invoke("yarn", "--exclude-file", str(tmp_path / "ex"), "--host-map", str(hosts), "--known-nodes", "10")
    assert "hosts.map line 2: expected 'NODE HOST'" in one_line_error(result)


def test_k8s_rejects_a_malformed_taint() -> None:
    assert "KEY=VALUE:EFFECT" in one_line_error(invoke("k8s", "--taint", "slow"))


def test_kubernetes_is_the_k8s_adapter_under_its_spelled_out_name() -> None:
    """Operators typed `laggard adapter kubernetes` (the SPEC's "Kubernetes adapter") and got "No such command"."""
    shown = invoke("kubernetes", "--help")
    assert shown.exit_code == 0 and "Taint blacklisted Kubernetes nodes" in shown.output and "--taint" in shown.output
    assert "KEY=VALUE:EFFECT" in one_line_error(invoke("kubernetes", "--taint", "slow"))  # the k8s command runs
    listed = [line.split()[0] for line in invoke("--help").output.split("Commands:")[1].splitlines() if line.strip()]
    assert listed == ["file", "k8s", "webhook", "yarn"]  # one entry for the one command


def test_k8s_without_any_configuration_says_how_to_give_one(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    monkeypatch.setenv("HOME", str(tmp_path))
    assert "--kubeconfig" in one_line_error(invoke("k8s"))


def test_webhook_needs_an_http_url() -> None:
    assert "not an http:// or https:// URL" in one_line_error(invoke("webhook", "--url", "ftp://x"))


def test_json_needs_once(tmp_path: Path) -> None:
    result = invoke("file", "--path", str(tmp_path / "b"), "--json", "--max-fraction", "1")
    assert "--json needs --once" in one_line_error(result)


@pytest.mark.parametrize(("kind", "option"), [("file", "--path"), ("yarn", "--exclude-file")])
def test_a_file_in_a_missing_directory_is_refused_not_created(tmp_path: Path, kind: str, option: str) -> None:
    """A typo in the path would otherwise become a file no scheduler reads."""
    target = tmp_path / "no-such-dir" / "blacklist.txt"
    error = one_line_error(invoke(kind, option, str(target), "--once", "--bootstrap", "127.0.0.1:1"))
    assert "does not exist" in error and "no-such-dir" in error
    assert not target.parent.exists()


@pytest.mark.parametrize("text", ["key: [unclosed\n", "-----BEGIN CERTIFICATE-----\nMIIB\n", "- a\n- b\n"],
                         ids=["not-yaml", "a-certificate", "a-list"])
def test_k8s_with_a_kubeconfig_that_is_not_one_says_so(tmp_path: Path, text: str) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(text)
    assert f"{config} is not a Kubernetes configuration" in one_line_error(invoke("k8s", "--kubeconfig", str(config)))


def test_k8s_applier_that_cannot_reach_the_api_server_raises_apply_error_not_a_crash(tmp_path: Path) -> None:
    """The real Kubernetes client against a port where nothing listens: the adapter's consumer retries an
    ApplyError (and --once exits 3); urllib3's MaxRetryError used to escape as a traceback and end the adapter."""
    from kubernetes import client

    from adapters.base import ApplyError
    from adapters.k8s import K8sApplier
    from laggard.kafka_local import free_ports

    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{free_ports(1)[0]}"
    configuration.retries = 0
    applier = K8sApplier(client.CoreV1Api(client.ApiClient(configuration)), "default")
    with pytest.raises(ApplyError, match=r"cannot reach the Kubernetes API at http://127\.0\.0\.1"):
        applier.known_nodes()


def test_a_state_file_in_a_directory_that_does_not_exist_is_refused_as_the_path_is(tmp_path: Path) -> None:
    """Its missing directories used to be created (a typo made a new tree, and the next run did not find it)."""
    state = tmp_path / "no-such-dir" / "state.json"
    error = one_line_error(invoke("file", "--path", str(tmp_path / "b.txt"), "--state-file", str(state), "--once"))
    assert "no-such-dir" in error and "does not exist" in error
    assert not state.parent.exists()
