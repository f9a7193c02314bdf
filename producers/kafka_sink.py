"""The replayer's Kafka sink: records appended to per-partition batches, whole batches handed to aiokafka.

kafka-python's ``KafkaProducer.send`` costs tens of microseconds of Python per record (partitioner, future,
accumulator, record builder); on Google parts 0-9 it was 70 % of ``laggard replay``'s CPU (docs/scale.md,
session 10). Here the replaying thread does per record only a cached (key, partition) look-up, the Avro
encode (``streams.serde.fast_encode``) and one append to aiokafka's C record-batch builder; the batching, the loop
thread, the back-pressure and the guarantees (idempotent, acks=all, the timeout on a silent broker, every record
counted, oversized records refused) are ``streams.batch_producer.BatchProducer``'s (the direct worker's outputs
use it too).

The records on the broker are those kafka-python's producer wrote: same keys and values, and the partition of
a key is kafka-python's ``DefaultPartitioner``'s (Java-compatible murmur2) over the topic's sorted
partitions (streams.partitioning). Order per partition is kept (see streams.batch_producer).
"""

from __future__ import annotations

from streams import batch_producer, kafka_clients
from streams.aiokafka_producer import BrokerStopped, aiokafka_options, producer_options
from streams.batch_producer import BatchProducer
from streams.core.events import Event, JobFinish, JobStart
from streams.partitioning import partition_of
from streams.serde import codec, fast_encode, topics
from streams.settings import Settings

# By measurement (docs/scale.md, session 10): on a local broker no compression costs the least CPU on both
# sides (the replayer compresses, the worker decompresses), and 512 KB batches with 50 ms linger keep the
# producer's per-batch work small next to the per-record work.
COMPRESSION: str | None = None
BATCH_BYTES = 512 * 1024
LINGER_MS = 50
MAX_PENDING = 32  # full batches not yet acknowledged: 16 MB at most
MAX_ROUTES = 100_000  # cached (key, partition) per topic; a trace of more jobs recomputes some, memory stays bounded


__all__ = ["BrokerStopped", "KafkaSink", "aiokafka_options", "partition_of", "producer_options"]


class KafkaSink:
    """Publishes events to laggard's topics. After ``close()``, ``sent`` counts acknowledged records and ``failed``
    every other record given to ``send`` (rejected, refused, or not acknowledged in time: none is left uncounted);
    ``stalled`` says the broker stopped answering."""

    def __init__(
        self,
        settings: Settings,
        task_topic: str | None = None,
        job_topic: str | None = None,
        *,
        compression: str | None = COMPRESSION,
        batch_bytes: int = BATCH_BYTES,
        linger_ms: int = LINGER_MS,
        timeout_s: float | None = None,
    ) -> None:
        kafka_clients.probe(settings.bootstrap_servers)  # one clear line at once when nothing listens
        kafka_clients.check_security(settings)
        self.task_topic = task_topic or topics.TASK_EVENTS.name
        self.job_topic = job_topic or topics.JOB_EVENTS.name
        self.bootstrap = settings.bootstrap_servers
        self._encode = fast_encode.encode  # codec.encode's bytes at less CPU
        self._routes: dict[str, dict[str, tuple[bytes, int]]] = {self.task_topic: {}, self.job_topic: {}}
        self._producer = BatchProducer(settings, batch_bytes=batch_bytes, linger_ms=linger_ms, compression=compression,
                                       topics=list(self._routes), max_pending=MAX_PENDING, name="replay-producer",
                                       timeout_s=batch_producer.TIMEOUT_S if timeout_s is None else timeout_s)

    @property
    def records(self) -> int:
        """Records given to ``send`` (counted batch by batch as each leaves; all of them after ``close()``)."""
        return self._producer.records

    @property
    def sent(self) -> int:
        """Records acknowledged (all of them after ``close()``)."""
        return self._producer.sent

    @property
    def failed(self) -> int:
        return self._producer.failed

    @property
    def stalled(self) -> bool:
        return self._producer.stalled

    @property
    def first_error(self) -> str | None:
        return self._producer.first_error

    def send(self, event: Event) -> None:
        topic = self.job_topic if isinstance(event, JobStart | JobFinish) else self.task_topic
        route = self._routes[topic].get(event.job_id) or self._route(topic, event.job_id)
        self._producer.send(topic, route[0], self._encode(event), route[1])

    def send_encoded(self, topic: str, key: bytes, partition: int, value: bytes) -> None:
        """Append one record to its partition's open batch; a full batch goes to the producer."""
        self._producer.send(topic, key, value, partition)

    def _route(self, topic: str, job_id: str) -> tuple[bytes, int]:
        """The record key and the partition kafka-python's producer would choose for it, cached per job."""
        routes = self._routes[topic]
        if len(routes) >= MAX_ROUTES:
            routes.clear()
        key = codec.encode_key(job_id)
        route = routes[job_id] = (key, partition_of(key, self._producer.partitions(topic)))
        return route

    def close(self) -> None:
        """Send what is open, wait until every record is acknowledged or failed (at most the timeout: then the
        broker stopped answering), stop the producer, and count every record not acknowledged as failed."""
        self._producer.close()
