"""The consumer's preferred read replicas (KIP-392): followed until ``metadata.max.age.ms``, an
error, or the replica leaving the metadata, as Kafka's consumer does."""

from __future__ import annotations

from kraft.types import TopicPartition
from replication.clients.read_replicas import PreferredReadReplicas

TP = TopicPartition("t", 0)
OTHER = TopicPartition("t", 1)
KNOWN = {101, 102, 103}


def test_the_named_replica_serves_until_the_metadata_max_age() -> None:
    replicas = PreferredReadReplicas(max_age_ms=1000)
    assert replicas.node_for(TP, 101, now_ms=0, known=KNOWN) == 101
    replicas.update(TP, 102, now_ms=0)
    assert replicas.node_for(TP, 101, now_ms=999, known=KNOWN) == 102
    assert replicas.node_for(TP, 101, now_ms=1000, known=KNOWN) == 101  # ask the leader again
    assert replicas.get(TP) is None


def test_an_error_or_a_replica_gone_from_the_metadata_sends_the_partition_to_its_leader() -> None:
    replicas = PreferredReadReplicas(max_age_ms=1000)
    replicas.update(TP, 102, now_ms=0)
    replicas.update(OTHER, 103, now_ms=0)
    assert replicas.clear(TP) and not replicas.clear(TP)
    assert replicas.node_for(OTHER, 101, now_ms=1, known={101, 102}) == 101
    replicas.update(TP, 102, now_ms=0)
    replicas.update(OTHER, 102, now_ms=0)
    replicas.clear_broker(102)  # a failed fetch from it
    assert (replicas.get(TP), replicas.get(OTHER)) == (None, None)
    replicas.update(TP, -1, now_ms=0)  # the leader named none
    assert replicas.get(TP) is None
