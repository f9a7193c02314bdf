"""A checkpoint over the one Kafka record it is saved in stops the worker with one line that says why (the running
policy's task table in the ranking's checkpoint can outgrow it on a large cluster); before, the broker refused the
record at every restart with a generic error and the worker crash-looped."""

from __future__ import annotations

import os

import pytest

from laggard import cli
from streams.agents import envelope
from streams.errors import CheckpointTooLarge


def test_a_checkpoint_over_the_record_limit_is_refused_naming_its_state(monkeypatch: pytest.MonkeyPatch) -> None:
    state = {"detector": {"tasks": [os.urandom(64).hex() for _ in range(600)]}, "stage": {}}  # incompressible
    assert envelope.unpack(envelope.pack(state, {"ranking-feed:0": 7}))[0] == state  # fits the real limit
    monkeypatch.setattr(envelope, "CHECKPOINT_MAX_BYTES", 16 * 1024)
    with pytest.raises(CheckpointTooLarge, match=r"its state holds detector, stage\) is over the 0.015625 MiB "
                                                 r"one Kafka record may hold.*running policy"):
        envelope.pack(state, {"ranking-feed:0": 7})


def test_the_cli_reports_it_in_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def too_large(**_: object) -> None:
        raise CheckpointTooLarge("a checkpoint of 40.0 MiB ... cannot be saved")

    monkeypatch.setattr(cli.cli, "main", too_large)
    with pytest.raises(SystemExit) as ended:
        cli.main(["worker"])
    assert ended.value.code == 1
    assert capsys.readouterr().err.splitlines() == ["Error: a checkpoint of 40.0 MiB ... cannot be saved"]
