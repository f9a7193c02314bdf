"""The direct worker engine: the topology of ``streams.app`` without Faust's stream layer.

One kafka-python consumer in the app's consumer group reads task-events, job-events and ranking-feed in batches
(``poll(max_records=...)``); the batches go through the same core stages as the Faust agents (per-partition
``NormalizeStage`` and ``PredictorFleet``, the cluster-wide ``PublishedRanking``), and one batch-building aiokafka
producer (``streams.batch_producer``: lingering for the bulk, closing at once the batches of what a ranking waits for;
``streams.engine.store.Outbox``) sends what they emit, record for record what the agents send. Recovery is the agents'
(streams.agents.checkpoint) made explicit: checkpoints (the same envelope) on a compacted topic of the engine's own,
written only once the broker acknowledged every output they cover; offsets committed only once the checkpoints are
acknowledged; on assignment each partition is sought to its checkpoint's offsets (``streams.engine.worker``).
"""
