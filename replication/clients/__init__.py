"""kraft's clients: `Producer`, `Consumer` and `AdminClient`, Kafka's surface over gRPC.

Usage::

    from replication.clients import AdminClient, Consumer, Producer, TopicPartition

    admin = AdminClient("127.0.0.1:9092,127.0.0.1:9093")
    admin.create_topic("events", partitions=6, replication_factor=3,
                       config={"min.insync.replicas": "2"})

    producer = Producer("127.0.0.1:9092", acks="all", enable_idempotence=True, linger_ms=5)
    future = producer.send("events", value=b"v", key=b"k")
    metadata = future.result(timeout=10)        # RecordMetadata(topic, partition, offset, ...)
    parts = producer.send_batch("events", [b"a", b"b"]).result(timeout=10)  # [SentPart, ...]
    producer.flush()
    producer.close()

    consumer = Consumer("127.0.0.1:9092", auto_offset_reset="earliest")
    tp = TopicPartition("events", metadata.partition)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    for record in consumer.poll(timeout=1.0):   # ConsumerRecord(topic, partition, offset, ...)
        ...
    consumer.close()

    txn = Producer("127.0.0.1:9092", transactional_id="etl-0")   # KIP-98: docs/transactions.md
    txn.init_transactions()
    txn.begin_transaction()
    txn.send("events-clean", value=b"v")
    txn.send_offsets_to_transaction({tp: 42}, group_consumer.group_metadata())
    txn.commit_transaction()                     # or abort_transaction()

Layout: pure cores without I/O or clock (`partitioner`, `batch`, `accumulator`, `sequencing`,
`metadata`, `config`, `routing`, `in_flight`) and thin shells (`network`, `producer` with
`bulk` for `send_batch` and `transactions` for its transactions, `consumer`, `admin`). Config keys
keep Kafka's names (``linger.ms``, ``batch.size``, ``delivery.timeout.ms``, ...) and may be
given that way or snake_case (`ProducerConfig`, `ConsumerConfig`).

Cost model (a 2-vCPU VM: ~2,000 unary gRPC calls/s per process, 4 µs per record): a record
costs one append under a lock (encoded in place, no per-record batch objects); the producer
sends ONE Produce per broker per round carrying every ready partition's batch, and the
consumer ONE Fetch per leader broker carrying every assigned partition it leads.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kraft.types import TopicPartition
    from replication.clients.admin import AdminClient
    from replication.clients.batch import RecordFuture, RecordMetadata
    from replication.clients.bulk import BatchFuture, SentPart
    from replication.clients.config import ConsumerConfig, ProducerConfig
    from replication.clients.consumer import Consumer, ConsumerRecord
    from replication.clients.group_membership import ConsumerGroupMetadata
    from replication.clients.partitioner import murmur2, partition_for_key
    from replication.clients.producer import Producer

# NB: imported on first use, as `kraft`'s names are: a module of the package (the CLI checks
# its bootstrap addresses with `replication.clients.config` before anything connects) costs
# only itself, not the producer, consumer and admin client with grpc.
_EXPORTS = {
    "TopicPartition": "kraft.types",
    "AdminClient": "replication.clients.admin",
    "RecordFuture": "replication.clients.batch",
    "RecordMetadata": "replication.clients.batch",
    "BatchFuture": "replication.clients.bulk",
    "SentPart": "replication.clients.bulk",
    "ConsumerConfig": "replication.clients.config",
    "ProducerConfig": "replication.clients.config",
    "Consumer": "replication.clients.consumer",
    "ConsumerRecord": "replication.clients.consumer",
    "ConsumerGroupMetadata": "replication.clients.group_membership",
    "murmur2": "replication.clients.partitioner",
    "partition_for_key": "replication.clients.partitioner",
    "Producer": "replication.clients.producer",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'replication.clients' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "AdminClient",
    "BatchFuture",
    "Consumer",
    "ConsumerConfig",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "Producer",
    "ProducerConfig",
    "RecordFuture",
    "RecordMetadata",
    "SentPart",
    "TopicPartition",
    "murmur2",
    "partition_for_key",
]
