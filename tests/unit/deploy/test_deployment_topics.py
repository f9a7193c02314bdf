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
