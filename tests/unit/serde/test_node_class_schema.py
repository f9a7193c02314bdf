"""The node-classes record (ML-NA, SPEC 6): documented, compacted by node, readable by plain Avro, evolvable."""

from __future__ import annotations

import io
import json

import fastavro

from streams.core import events as ev
from streams.serde import codec
from streams.serde.compat import backward_problems
from streams.serde.topics import BY_NAME, topic_for

RECORD = ev.NodeClass("node-17", 0, 86_400_000_000, 4, 2, 2, True, 0.91, True, "forest", 96, 0.84, 1.3, 5, 7,
                      "weak cluster 2 of 4 in 5 of the last 7 days, predicted weak next period with p = 0.91")


def schema() -> dict:
    return json.loads(codec.schema_path("NodeClass").read_text())


def test_every_field_and_the_record_say_what_they_are():
    document = schema()
    assert len(document["doc"]) > 40
    assert all(len(field.get("doc", "")) > 15 for field in document["fields"])


def test_node_classes_is_compacted_and_keyed_by_node():
    topic = BY_NAME["node-classes"]
    assert topic_for(RECORD) is topic and topic.compacted
    assert topic.key_for(RECORD) == "node-17"


def test_plain_fastavro_reads_a_record_with_the_avsc_alone():
    data = codec.encode(RECORD)
    parsed = fastavro.schema.load_schema(str(codec.schema_path("NodeClass")))
    body = fastavro.schemaless_reader(io.BytesIO(data[10:]), parsed, None)
    assert body["node_id"] == "node-17" and body["weak_probability"] == 0.91 and body["predicted_weak"] is True
    assert body["reason"].startswith("weak cluster 2 of 4")


def test_a_later_version_that_adds_a_field_with_a_default_reads_todays_records():
    # What the next change of this schema must look like (SPEC 2): checked by Avro's own schema resolution.
    current = schema()
    later = dict(current, fields=[*current["fields"],
                                  {"name": "features", "type": {"type": "array", "items": "double"}, "default": [],
                                   "doc": "the period's feature vector"}])  # fmt: skip
    assert backward_problems(current, later) == []
    without_default = dict(later, fields=[*current["fields"], {"name": "x", "type": "long", "doc": "none"}])
    assert backward_problems(current, without_default)
    renamed = dict(current, fields=[dict(f, name="probability") if f["name"] == "weak_probability" else f
                                    for f in current["fields"]])  # fmt: skip
    assert backward_problems(current, renamed)
