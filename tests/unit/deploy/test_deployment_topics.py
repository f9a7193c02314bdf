"""``laggard topics delete`` deletes a deployment's own topics by their exact names (``kafka_reset.INTERNAL``), never
by prefix; these are the names the workers really use (no broker: the Faust app is built, not started)."""

from __future__ import annotations

from faust.assignor.leader_assignor import LeaderAssignor

from streams.app import make_app
from streams.engine.store import CheckpointStore
from streams.engine.worker import role_settings
from streams.kafka_reset import INTERNAL, app_groups
from streams.settings import Settings


def test_the_internal_names_are_the_ones_faust_and_the_direct_engine_use() -> None:
    settings = Settings(app_id="lg")
    app = make_app(settings, 4)
    used = {table.changelog_topic.get_topic_name() for table in app.tables.values()}
    used.add(LeaderAssignor(app=app)._leader_topic_name)
    for role in ("statistics", "prediction"):
        store = CheckpointStore(role_settings(Settings(app_id="lg", worker_role=role)), outbox=None)  # type: ignore[arg-type]
        used.add(store.topic)
    assert used == {f"lg-{suffix}" for suffix in INTERNAL}
    groups = {role_settings(Settings(app_id="lg", worker_role=role)).app_id for role in ("statistics", "prediction")}
    assert groups | {app.conf.id} == set(app_groups(settings))


class _Groups:
    """``describe_groups`` as kafka-python answers it, for the group states no broker here can be held in (a
    stand-in: the integration tier deletes under a real worker's group)."""

    def __init__(self, answer: object) -> None:
        self.answer = answer

    def describe_groups(self, groups: list[str]) -> dict[str, object]:
        if isinstance(self.answer, Exception):
            raise self.answer
        return {groups[0]: self.answer}


def _member(metadata: object, assigned: tuple[str, ...] = ()) -> dict[str, object]:
    return {"member_metadata": metadata,
            "member_assignment": {"assigned_partitions": [{"topic": t, "partitions": [0]} for t in assigned]}}


def test_a_group_whose_reading_cannot_be_told_counts_as_reading_the_topics_to_delete() -> None:
    from streams.kafka_reset import _reading

    doomed = {"task-events", "ranking-feed"}
    stable = {"group_state": "Stable", "error": None}
    assert _reading(_Groups({**stable, "members": [_member({"topics": ["task-events"]})]}), "g", doomed) == \
        "task-events"
    assert _reading(_Groups({**stable, "members": [_member({"topics": ["other"]})]}), "g", doomed) is None
    assert _reading(_Groups({**stable, "members": []}), "g", doomed) is None  # nobody there
    # Faust's subscription (version 4) stays undecoded; its assignment names what it holds
    assert _reading(_Groups({**stable, "members": [_member("\x00\x04", ("ranking-feed",))]}), "g", doomed) == \
        "ranking-feed"
    unknown = [
        {"group_state": "CompletingRebalance", "error": None, "members": [_member("", ())]},  # joined, not synced
        {**stable, "members": [_member("\x00\x04", ())]},  # nothing decodes
        ValueError("Buffer underrun decoding string"),  # another protocol's metadata
    ]
    for answer in unknown:
        assert _reading(_Groups(answer), "g", doomed) is not None, answer


def test_other_deployments_are_named_by_their_app_ids() -> None:
    from streams.kafka_reset import _other_apps

    present = {"laggard-checkpoints", "laggard-predict-checkpoints", "prod-predict-checkpoints", "prod-checkpoints",
               "stg-normalise-checkpoints-changelog", "task-events", "backups-checkpoints-old"}
    assert _other_apps(present, "laggard") == ["prod", "stg"]
