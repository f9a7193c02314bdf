"""Under a policy whose detector watches the task events themselves (``running``, issue 21), the direct engine's
normalising host forwards every valid task event to ranking-feed before the progress marks it leads to, and the
ranking host hands them to the detector: the worker then publishes what the in-process runner does, and a
normaliser restarted from its checkpoint (forwarding a stretch again) changes nothing. Under the other policies
nothing is forwarded."""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterable
from typing import Any, cast

import pytest

from producers.registry import open_trace
from streams.agents.envelope import pack
from streams.config import partition_for, ranking_config
from streams.core.decision.registry import POLICIES
from streams.core.detection.base import WindowView
from streams.core.detection.registry import running_detector
from streams.core.events import (
    BlacklistDelta,
    BlacklistSnapshot,
    Event,
    JobFinish,
    JobStart,
    NodeMoments,
    NodeSummary,
    Progress,
    Status,
    TaskCheckpoint,
    TaskEventBatch,
    TaskFinish,
    TaskRows,
    TaskStart,
)
from streams.core.publication import PublishedRanking
from streams.core.ranker import watches_tasks
from streams.core.ranking_config import RankingConfig
from streams.core.stages import RankResult, RankStage, boundary_at_or_before
from streams.core.task_rows import Row, task_row
from streams.engine import hosts
from streams.engine.hosts import FEED_TYPES, TASK_TYPES, Decoded, NormaliseHost, RankHost, decode
from streams.local import LocalPipeline
from streams.serde import codec
from streams.settings import Settings
from tests.unit.engine.test_predict_host import Raw

# 1.5 h of a 20-node cluster, two nodes 3x slow: the running detector lists both after its one-window warm-up.
TRACE = "synthetic:nodes=20,slow=2,jobs=60,tasks=10-20,interarrival=90,checkpoints=2,seed=1,slowdown=3"
SETTINGS: dict[str, Any] = {"policy": "running", "ranking_period_s": 60}
PARTITIONS = 2
BATCH = 150  # events per poll, a partition's share at a time
TASK_RECORDS = (TaskStart, TaskCheckpoint, TaskFinish)


class Outbox:
    """Fake Outbox: every send in order, decoded, with its headers."""

    def __init__(self) -> None:
        self.records: list[tuple[str, Any, tuple[tuple[str, bytes], ...]]] = []
        self.values: list[tuple[str, bytes]] = []  # what send_raw sent, as bytes

    def send(self, topic: str, key: str, record: Any) -> None:
        self.records.append((topic, record, ()))

    def send_many(self, topic: str, records: Iterable[tuple[str, Any]]) -> None:
        for key, record in records:
            self.send(topic, key, record)

    def send_raw(self, topic: str, key: bytes | None, value: bytes,
                 headers: list[tuple[str, bytes]] | None = None) -> None:
        self.records.append((topic, codec.decode(value), tuple(headers or ())))
        self.values.append((topic, value))

    def on(self, topic: str) -> list[tuple[Any, tuple[tuple[str, bytes], ...]]]:
        return [(record, headers) for t, record, headers in self.records if t == topic]


def polls(events: list[Event], partitions: int, size: int = BATCH) -> list[tuple[int, list[Decoded]]]:
    """The trace as a consumer fetches it: each partition's records (task and job events, each topic with its
    own offsets), ``size`` events of the trace at a time."""
    offsets: dict[tuple[str, int], int] = {}
    out = []
    for start in range(0, len(events), size):
        shares: dict[int, list[Decoded]] = {}
        for event in events[start:start + size]:
            topic = "job-events" if isinstance(event, JobStart | JobFinish) else "task-events"
            p = partition_for(event.job_id, partitions)
            offset = offsets[(topic, p)] = offsets.get((topic, p), -1) + 1
            shares.setdefault(p, []).append(decode(Raw(topic, p, offset, value=codec.encode(event)), TASK_TYPES))
        out += sorted(shares.items())
    return out


def forwarded(feed: list[tuple[Any, tuple[tuple[str, bytes], ...]]]) -> list[tuple[int, tuple[str, int], Row]]:
    """The task events forwarded on ``feed`` as rows, each with the index of its feed record and its (source,
    offset)."""
    return [(i, (record.source, offset), record.row(k)) for i, (record, _) in enumerate(feed)
            if isinstance(record, TaskRows) for k, offset in enumerate(record.offsets)]


def as_batches(feed: list[tuple[Any, tuple[tuple[str, bytes], ...]]], events: list[Event]
               ) -> list[tuple[Any, tuple[tuple[str, bytes], ...]]]:
    """``feed`` as a worker before session 23 sent it: each ``TaskRows`` the ``TaskEventBatch`` of its events."""
    read = {(source, offset): event for source, offset, event in places(events, PARTITIONS)}
    return [(TaskEventBatch(r.source, r.offsets, tuple(read[(r.source, o)] for o in r.offsets)), h)
            if isinstance(r, TaskRows) else (r, h) for r, h in feed]


def places(events: list[Event], partitions: int) -> list[tuple[str, int, Event]]:
    """Each event's place as ``polls`` gives it: (topic:partition, offset)."""
    return [(f"{d.raw.topic}:{d.raw.partition}", d.raw.offset, d.record) for _, batch in polls(events, partitions)
            for d in batch]


def normalised(events: list[Event], **settings: Any) -> Outbox:
    sent = Outbox()
    host = NormaliseHost(Settings(**{**SETTINGS, **settings}), PARTITIONS, sent)  # type: ignore[arg-type]
    host.load(set(range(PARTITIONS)), {})
    for partition, batch in polls(events, PARTITIONS):
        host.take(partition, batch)
    return sent


def ranked(feed: list[tuple[Any, tuple[tuple[str, bytes], ...]]], monkeypatch: pytest.MonkeyPatch
           ) -> tuple[list[BlacklistDelta], list[BlacklistSnapshot]]:
    """What the ranking host publishes from ``feed`` (records with their headers), read in polls of 100."""
    monkeypatch.setattr(hosts.kafka_clients, "latest_snapshot", lambda settings, **_: None)  # nothing published yet
    sent = Outbox()
    host = RankHost(Settings(**SETTINGS), PARTITIONS, sent)  # type: ignore[arg-type]
    host.load({0}, {})
    records = [decode(Raw("ranking-feed", 0, i, value=codec.encode(record), headers=headers), FEED_TYPES)
               for i, (record, headers) in enumerate(feed)]
    for start in range(0, len(records), 100):
        host.take(records[start:start + 100], lambda: None)
    return ([r for r, _ in sent.on("blacklist-deltas")], [r for r, _ in sent.on("blacklist-snapshot")])


@pytest.fixture(scope="module")
def trace() -> tuple[list[Event], list[str]]:
    source = open_trace(TRACE)
    return list(source), source.ground_truth["slow_nodes"]


@pytest.fixture(scope="module")
def expected(trace: tuple[list[Event], list[str]]) -> tuple[list[BlacklistDelta], BlacklistSnapshot]:
    pipeline = LocalPipeline(Settings(**SETTINGS), partitions=PARTITIONS)
    return list(pipeline.run(trace[0], finish=False)), pipeline.blacklist


@pytest.mark.parametrize("policy", POLICIES.names())
def test_only_a_policy_whose_detector_observes_tasks_watches_them(policy: str) -> None:
    assert watches_tasks(RankingConfig(policy=policy)) is (policy == "running")


def test_the_ranking_host_fed_by_the_normalising_host_lists_what_the_in_process_runner_does(
    trace: tuple[list[Event], list[str]], expected: tuple[list[BlacklistDelta], BlacklistSnapshot],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events, slow = trace
    local_deltas, local_final = expected
    assert sorted(local_final.node_ids) == slow, "the trace is one the in-process runner gets right"
    deltas, snapshots = ranked(normalised(events).on("ranking-feed"), monkeypatch)
    assert sorted(e.node_id for d in deltas for e in d.added) == slow, "the worker lists the slow nodes"
    assert deltas == local_deltas  # versions, entries, their statistics and reasons
    assert snapshots[-1] == local_final


def test_a_rank_stage_fed_the_forwarded_records_ranks_every_boundary_as_the_in_process_runner(
    trace: tuple[list[Event], list[str]],
) -> None:
    """Every ranking, not only the deltas: each node's statistics, evidence, verdict and reason at every boundary."""
    events, _ = trace
    local: list[RankResult] = []
    pipeline = LocalPipeline(Settings(**SETTINGS), partitions=PARTITIONS, on_ranking=local.append)
    list(pipeline.run(events, finish=False))
    stage, results = RankStage(ranking_config(Settings(**SETTINGS)), PARTITIONS), []
    for record, _ in normalised(events).on("ranking-feed"):
        if isinstance(record, Progress):
            results += stage.progress(record)
        elif isinstance(record, TaskRows):
            stage.observe_rows(record)
        else:
            stage.add(record)
    assert len(results) > 60 and any(r.delta is not None for r in results)
    assert results == local


def test_every_valid_task_event_is_on_the_feed_before_its_partitions_mark_past_it(
    trace: tuple[list[Event], list[str]],
) -> None:
    events, _ = trace
    bad = TaskFinish("j-bad", "t", 0, "node-00", 10, -1, Status.SUCCEEDED)  # a negative duration: invalid
    feed = normalised([*events[:1000], bad, *events[1000:]]).on("ranking-feed")
    assert not [r for r, _ in feed if isinstance(r, TASK_RECORDS)], "forwarded in batches, not one by one"
    sent = forwarded(feed)
    assert len(feed) < len(sent) / 2, "a batch per poll and source, not a record per event"
    assert [r for _, _, r in sent if r[2] == "j-bad"] == [], "an invalid event is not forwarded"
    assert sorted(r for _, _, r in sent) == sorted(task_row(e) for e in events if isinstance(e, TASK_RECORDS))
    sources = [source for _, source, _ in sent]
    assert len(set(sources)) == len(sources), "each names its own place on task-events"
    marks = [(i, record) for i, (record, _) in enumerate(feed) if isinstance(record, Progress)]
    assert len(marks) > 40
    period, checked = 60_000_000, 0
    for at, mark in marks:
        boundary = boundary_at_or_before(mark.ts_us, period)
        mine = [(i, r) for i, (source, _), r in sent if int(source.rsplit(":", 1)[1]) == mark.partition]
        checked += sum(i < at and r[0] < boundary for i, r in mine)
        late = [r for i, r in mine if r[0] < boundary and i > at]
        assert late == [], f"partition {mark.partition}'s mark past {boundary} came before its events"
    assert checked > 1000, "the marks were compared with the events of their own partition"


def test_other_policies_forward_nothing(trace: tuple[list[Event], list[str]]) -> None:
    feed = normalised(trace[0][:3000], policy="pcores").on("ranking-feed")
    assert feed and not [r for r, _ in feed if isinstance(r, (*TASK_RECORDS, TaskEventBatch, TaskRows))]


def test_a_stretch_forwarded_again_by_a_restarted_normaliser_changes_nothing(
    trace: tuple[list[Event], list[str]], expected: tuple[list[BlacklistDelta], BlacklistSnapshot],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    feed = normalised(trace[0]).on("ranking-feed")
    # Killed after a third of the feed, restarted from a checkpoint a tenth before: that tenth comes twice.
    cut, back = len(feed) // 3, len(feed) // 10
    deltas, snapshots = ranked(feed[:cut] + feed[cut - back:], monkeypatch)
    assert (deltas, snapshots[-1]) == expected


def test_a_restarted_normaliser_polling_otherwise_forwards_other_batches_and_changes_nothing(
    trace: tuple[list[Event], list[str]], expected: tuple[list[BlacklistDelta], BlacklistSnapshot],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Killed a tenth past its checkpoint and restarted from it, a normaliser reads the same records in other polls:
    it forwards the stretch since the checkpoint again in batches that begin and end elsewhere. Where batches begin
    and end does not matter to the ranking, which is the uninterrupted one. (Why repeats are dropped by offset:
    ``test_a_start_forwarded_again_after_its_finish_was_ranked_does_not_reopen_the_task``.)"""
    events, _ = trace
    first, before = Outbox(), polls(events, PARTITIONS)
    host = NormaliseHost(Settings(**SETTINGS), PARTITIONS, first)  # type: ignore[arg-type]
    host.load(set(range(PARTITIONS)), {})
    cut = len(before) // 3
    for partition, batch in before[:cut]:
        host.take(partition, batch)
    saved = {slot.key: pack(slot.state.snapshot(), slot.offsets) for slot in host.slots.values()}
    for partition, batch in before[cut:cut + len(before) // 10]:
        host.take(partition, batch)
    second = Outbox()
    restarted = NormaliseHost(Settings(**SETTINGS), PARTITIONS, second)  # type: ignore[arg-type]
    restarted.load(set(range(PARTITIONS)), saved)
    for partition, batch in polls(events, PARTITIONS, size=97):  # the checkpoint's offsets drop what it covers
        restarted.take(partition, batch)
    again = {place for _, place, _ in forwarded(first.on("ranking-feed"))} & {
        place for _, place, _ in forwarded(second.on("ranking-feed"))}
    batches = [{tuple(r.offsets) for r, _ in sent.on("ranking-feed") if isinstance(r, TaskRows)}
               for sent in (first, second)]
    assert len(again) > 100 and not batches[0] & batches[1], "a stretch forwarded twice, in other batches"
    deltas, snapshots = ranked(first.on("ranking-feed") + second.on("ranking-feed"), monkeypatch)
    assert (deltas, snapshots[-1]) == expected


def test_a_start_forwarded_again_after_its_finish_was_ranked_does_not_reopen_the_task() -> None:
    """Why a forwarded event carries its place on task-events: the detector is not idempotent. A start seen again
    after its task's finish was applied would make the task run again (forever, as the detector sees it), and a
    repeated checkpoint would change its task's projection."""
    def tasks_after_repeat(source: tuple[str, int] | None) -> list[list[Any]]:
        stage = RankStage(RankingConfig(policy="running", period_us=60_000_000), partitions=1)
        start, finish = TaskStart("j", "t", 0, "n1", 1_000_000), TaskFinish("j", "t", 0, "n1", 9_000_000, 8_000_000,
                                                                             Status.SUCCEEDED)
        stage.observe(start, ("task-events:0", 0))
        stage.observe(finish, ("task-events:0", 1))
        stage.progress(Progress(0, 1, 30_000_000))  # the first mark: the ranking starts at the next boundary
        assert [r.boundary_us for r in stage.progress(Progress(0, 1, 60_000_000))] == [60_000_000]  # finish applied
        stage.observe(start, source)  # a restarted normaliser forwards it again
        stage.progress(Progress(0, 1, 120_000_000))
        return cast(list[list[Any]], stage.ranker.detector.snapshot()["tasks"])

    assert tasks_after_repeat(("task-events:0", 0)) == [["j", "t", "n1", 1_000_000, 8_000_000]]
    assert tasks_after_repeat(None) == [["j", "t", "n1", 1_000_000, -1]]  # running again: what the source prevents


def test_a_task_event_read_from_job_events_does_not_hide_task_events_of_that_partition() -> None:
    """The normaliser takes a task event from either input topic; its place names the topic, so a TaskStart
    published to job-events (offset 50 there) does not make task-events' offsets 0-9 of that partition look seen."""
    stage = RankStage(RankingConfig(policy="running", period_us=60_000_000), partitions=1)
    misrouted = stage.observe(TaskStart("j", "t-x", 0, "n1", 1_000), ("job-events:0", 50))
    taken = [stage.observe(TaskStart("j", f"t{i}", 0, "n1", 2_000 + i), ("task-events:0", i)) for i in range(10)]
    assert misrouted and all(taken)


def test_the_running_detector_orders_events_of_one_time_whatever_their_arrival() -> None:
    """A worker's ranking gets the partitions' events interleaved otherwise than the trace gives them; events of
    the same time (here a clock of whole seconds) must build the same table, or its float sums differ in the last
    bits and a boundary's scores with them (the review of the forwarding found 110 of 199 boundaries differing)."""
    rng, events, minute_us = random.Random(3), [], 60_000_000
    for minute in range(100):
        for k in range(40):
            node, job, task = f"n{rng.randrange(30)}", f"j{(minute * 40 + k) // 12}", f"t{minute * 40 + k}"
            start = (minute * 60 + rng.randrange(60)) * 1_000_000
            duration = int(rng.lognormvariate(0, 0.5) * 180 * (2.0 if node == "n0" and minute > 40 else 1.0)) * 10**6
            source = zlib.crc32(job.encode()) % 2  # the partition its job's events come through
            events += [(source, TaskStart(job, task, 0, node, start)),
                       (source, TaskFinish(job, task, 0, node, start + duration, duration, Status.SUCCEEDED))]

    def scores(first: int) -> list[Any]:  # each time's events of partition ``first`` before the other's
        detector = running_detector(RankingConfig(policy="running", period_us=minute_us))
        ordered, out, i = sorted(events, key=lambda pe: (pe[1].ts_us, pe[0] != first)), [], 0
        for boundary in range(1, 130):
            while i < len(ordered) and ordered[i][1].ts_us < boundary * minute_us:
                detector.observe(ordered[i][1])
                i += 1
            found = detector.detect(WindowView(0, boundary * minute_us, {}))
            out.append(sorted((n, e.score, e.suspect, e.reason) for n, e in found.items()))
        return out

    assert scores(0) == scores(1)


def test_a_task_watching_ranking_that_gets_no_task_events_says_so_once() -> None:
    """Normalising workers of another policy (a rolling change half done) forward nothing: the ranking then lists
    nothing from task events, and says why instead of staying silent, as before the forwarding. They still send
    their summaries, from which the ranking starts (a ranking fed marks alone has nothing to rank)."""
    def warnings(forwarded: bool) -> list[str]:
        ranking = PublishedRanking(RankStage(RankingConfig(policy="running", period_us=60_000_000), partitions=1))
        if forwarded:
            ranking.stage.observe(TaskStart("j", "t", 0, "n1", 1_000), ("task-events:0", 0))
        said = []
        for minute in range(1, 16):
            values = (NodeMoments("n1", (minute - 1) * 60_000_000, 1, 0.5, 0.0),)
            ranking.take(NodeSummary(0, 1, minute * 60_000_000, 60_000_000, values, ()))
            ranking.take(Progress(0, 1, minute * 60_000_000))
            said.append(ranking.late_warning())
        return [w for w in said if w is not None]

    (blind,) = warnings(forwarded=False)
    assert "policy running watches task events, but none reached the ranking" in blind
    assert warnings(forwarded=True) == []


def test_a_task_watching_ranking_fed_marks_alone_says_so_too() -> None:
    """Before, the warning counted rankings: a ranking that got neither task events nor summaries ranked nothing
    and so never said why it listed nothing."""
    ranking = PublishedRanking(RankStage(RankingConfig(policy="running", period_us=60_000_000), partitions=2))
    said = []
    for minute in range(1, 16):
        for partition in (0, 1):
            assert ranking.take(Progress(partition, 2, minute * 60_000_000 + partition)) == []
        said.append(ranking.late_warning())
    (blind,) = [w for w in said if w is not None]
    assert said.index(blind) == 10 and "none reached the ranking in 10 periods" in blind


def test_task_events_forwarded_one_by_one_by_an_older_worker_are_still_taken_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A feed written before the batches (one record per event, its place in the ``laggard-source`` header) is
    still read after an upgrade: each event observed once, a repeat of its place dropped, as in a batch."""
    from streams.serde.topics import source_header

    monkeypatch.setattr(hosts.kafka_clients, "latest_snapshot", lambda settings, **_: None)
    host = RankHost(Settings(**SETTINGS), 1, Outbox())  # type: ignore[arg-type]
    host.load({0}, {})
    start = TaskStart("j", "t", 0, "n1", 5_000_000)
    old = [decode(Raw("ranking-feed", 0, i, value=codec.encode(start), headers=source_header("task-events", 0, 7)),
                  FEED_TYPES) for i in range(2)]
    batch = decode(Raw("ranking-feed", 0, 2, value=codec.encode_forwarded("task-events:0", [7, 8], [
        codec.encode(start), codec.encode(TaskStart("j", "t2", 0, "n1", 6_000_000))])), FEED_TYPES)
    host.take([*old, batch], lambda: None)
    assert host.slots[0].state.stage.observed == 2  # offset 7 once (twice alone, once in the batch), then 8


def test_one_invalid_event_of_a_batch_is_dead_lettered_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ranking refuses what it would refuse alone (a rolling upgrade may tighten validation): that event goes to
    dead-letters under its place on task-events, the batch's valid events reach the detector."""
    monkeypatch.setattr(hosts.kafka_clients, "latest_snapshot", lambda settings, **_: None)
    sent = Outbox()
    host = RankHost(Settings(**SETTINGS), 1, sent)  # type: ignore[arg-type]
    host.load({0}, {})
    good = [TaskStart("j", f"t{k}", 0, "n1", 5_000_000 + k) for k in range(3)]
    bad = TaskFinish("j", "t0", 0, "n1", 6_000_000, -5, Status.SUCCEEDED)  # a negative duration
    value = codec.encode_forwarded("task-events:0", [3, 4, 5, 6], [codec.encode(e) for e in [*good[:2], bad, good[2]]])
    host.take([decode(Raw("ranking-feed", 0, 0, value=value), FEED_TYPES)], lambda: None)
    letters = [r for r, _ in sent.on("dead-letters")]
    assert [(d.source_topic, d.partition, d.offset, codec.decode(d.value)) for d in letters] == [
        ("task-events", 0, 5, bad)]
    assert "negative duration_us" in letters[0].reason
    assert host.slots[0].state.stage.observed == 3

