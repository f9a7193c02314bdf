"""What `laggard worker` settles before it touches Kafka: its data directory, and settings it must refuse."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from laggard.cli import cli
from streams.app import make_app
from streams.settings import Settings


def test_the_worker_makes_its_data_directory_wherever_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # empty: no ./.laggard
    app = make_app(Settings(web_port=0), partitions=2)
    assert (tmp_path / ".laggard" / "worker").is_dir()
    assert {agent.name for agent in app.agents.values()} >= {"normalise_tasks", "rank_nodes"}


def test_an_idle_timeout_longer_than_the_window_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAGGARD_WINDOW_SIZE_S", "1800")
    monkeypatch.setenv("LAGGARD_JOB_IDLE_TIMEOUT_S", "3600")
    result = CliRunner().invoke(cli, ["worker", "--bootstrap", "127.0.0.1:1"])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        "Error: invalid setting LAGGARD_JOB_IDLE_TIMEOUT_S='3600': 3600 s exceeds the window "
        "LAGGARD_WINDOW_SIZE_S=1800 s: jobs final only after their tasks left the window would never be ranked"
    ]


@pytest.mark.parametrize(("window", "wait", "expected"), [(3600, True, 3600), (3600, False, 600), (1200, False, 200)])
def test_an_unset_idle_timeout_follows_the_window(window: float, wait: bool, expected: float) -> None:
    settings = Settings(window_size_s=window, wait_for_job_events=wait)
    assert settings.job_idle_timeout_s == expected
    assert "job_idle_timeout_s" not in settings.model_fields_set  # `laggard run` can still tell it was not chosen


def test_the_policy_option_wins_over_the_setting_and_reaches_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """`laggard worker --policy running` (docs/scenarios.md's command) runs the running policy, whatever
    LAGGARD_POLICY says; stopped at the broker check (a stand-in records the settings, no broker here)."""
    from laggard.commands import worker as command
    from laggard.errors import UserError

    seen: list[Settings] = []

    def stop_at_broker(settings: Settings, timeout_s: float) -> None:
        seen.append(settings)
        raise UserError("no broker in a unit test")

    monkeypatch.setenv("LAGGARD_POLICY", "pcores")
    monkeypatch.setattr(command.kafka_clients, "wait_for_broker", stop_at_broker)
    result = CliRunner().invoke(cli, ["worker", "--bootstrap", "127.0.0.1:1", "--policy", "running"])
    assert result.exit_code == 1 and [s.policy for s in seen] == ["running"]
    refused = CliRunner().invoke(cli, ["worker", "--policy", "no-such"])
    assert refused.exit_code == 2 and "'no-such' is not one of" in refused.stderr


def test_a_web_port_in_use_is_one_line_naming_the_option() -> None:
    """A second Faust worker on one host bound Faust's default web port 6066 deep in its start-up: an 81-line
    traceback. The check runs before Faust starts (no broker needed for it)."""
    import socket

    from laggard.commands.worker import _check_web_port
    from laggard.errors import UserError

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(UserError, match=rf"127.0.0.1:{port}: .*its own --web-port"):
            _check_web_port(port)
    _check_web_port(port)  # free again
    _check_web_port(0)  # no web server


def test_a_setting_misspelled_in_the_environment_warns_and_in_a_settings_file_is_refused(tmp_path: Path) -> None:
    """LAGGARD_WINDOW_SIZ=600, and window_size_s=abc (no prefix: never read) in --settings FILE, were ignored in
    silence: the worker ran on the defaults. A name of another tool in a shared file only warns; a setting named in
    another case is a setting (the settings read names in any case)."""
    import laggard.commands.options as options

    options._warn_unknown_variables.cache_clear()
    warned = CliRunner().invoke(cli, ["run", "--trace", "synthetic:nodes=10,slow=1,jobs=20,seed=1"],
                                env={"LAGGARD_WINDOW_SIZ": "600", "LAGGARD_min_tasks": "3",
                                     "LAGGARD_WORKER_SERVICE_HOST": "10.0.0.1"})  # fmt: skip
    assert warned.exit_code == 0, warned.output
    assert ("warning: LAGGARD_WINDOW_SIZ is not a setting of laggard and is ignored (did you mean "
            "LAGGARD_WINDOW_SIZE_S?)") in warned.stderr
    assert "LAGGARD_min_tasks" not in warned.stderr and "SERVICE_HOST" not in warned.stderr
    assert "min tasks 3" in warned.stderr
    path = tmp_path / "settings.env"
    for text, words in (("window_size_s=abc\n", "window_size_s is not a setting of laggard (did you mean "
                                                "LAGGARD_WINDOW_SIZE_S?)"),
                        ("\ufeff# ok\nPYTHONUNBUFFERED=1\nlaggard_min_tasks=3\nLAGGARD_WINDOW_SIZ=3\n",
                         "LAGGARD_WINDOW_SIZ is not a setting of laggard (did you mean LAGGARD_WINDOW_SIZE_S?)")):
        path.write_text(text, encoding="utf-8")
        refused = CliRunner().invoke(cli, ["worker", "--settings", str(path), "--bootstrap", "127.0.0.1:1"])
        assert refused.exit_code == 1
        assert refused.stderr.strip().splitlines()[-1] == f"Error: --settings {path}: {words}"
    assert f"warning: --settings {path}: PYTHONUNBUFFERED is not a LAGGARD_ setting and is ignored" in refused.stderr
