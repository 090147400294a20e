"""One-shot Kafka-protocol requests of ``kraft compare``, the same bytes to any Kafka listener
(Apache Kafka's, or kraft's brokers'): kio requests through `kraft.interop.wire.Connection`.

- `describe_partition`: partition 0 of a topic as one broker's Metadata (v12) gives it:
  leader, **leader epoch**, ISR and replicas (librdkafka's ``list_topics`` has no epoch);
- `produce_once`: one acks=all Produce (v9) of one record to the partition's leader, and
  Kafka's name of the answer's error code (``NONE`` when written): what a broker says when it
  refuses a write (NOT_ENOUGH_REPLICAS with too few in-sync replicas), which a producer that
  retries until its delivery timeout does not show.

Each call opens fresh connections and closes them: a broker paused or killed under a fault
costs a timeout, never a connection left out of step.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any

from kraft.interop.normalize import error_name
from kraft.interop.wire import Connection

METADATA, PRODUCE = 3, 0
METADATA_VERSION = 12
"""Metadata v7+ carries each partition's leader epoch (KIP-320); v12 is the newest by topic
name that kraft's listener and Kafka 4.x both serve."""
PRODUCE_VERSION = 9


@dataclass(frozen=True, slots=True)
class PartitionView:
    """What the scenarios read of a partition."""

    leader: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    leader_epoch: int = -1


def _metadata(address: str, topic: str, timeout_s: float) -> Any:
    conn = Connection(address, timeout=timeout_s)
    try:
        return conn.send(
            METADATA,
            METADATA_VERSION,
            {"topics": [{"name": topic}], "allow_auto_topic_creation": False},
        )
    finally:
        conn.close()


def describe_partition(address: str, topic: str, timeout_s: float = 1.0) -> PartitionView:
    """Partition 0 of ``topic`` as the broker at ``address`` sees it.

    Raises:
        OSError: no answer within ``timeout_s``.
        LookupError: the broker does not know the topic (its error code in the message).
    """
    answer = _metadata(address, topic, timeout_s)
    for t in answer.topics:
        for p in t.partitions:
            if int(p.partition_index) == 0 and int(p.error_code) in (0, 5):
                # 5 LEADER_NOT_AVAILABLE: known, no leader now (leader_id -1)
                return PartitionView(
                    leader=int(p.leader_id),
                    isr=tuple(int(b) for b in p.isr_nodes),
                    replicas=tuple(int(b) for b in p.replica_nodes),
                    leader_epoch=int(p.leader_epoch),
                )
        raise LookupError(f"{topic}: {error_name(t.error_code)}")
    raise LookupError(f"{topic}: not in the answer")


def produce_once(bootstrap: str, topic: str, timeout_s: float = 2.0) -> str:
    """One acks=all Produce of one record to partition 0's leader, found through the first
    broker of ``bootstrap`` that answers: the answer's error name (``NONE``: written), or
    ``NO_LEADER`` / the socket error's type when there was none to ask."""
    from storage.records import build_batch

    leader_address = None
    for address in bootstrap.split(","):
        with contextlib.suppress(OSError, LookupError, ConnectionError):
            answer = _metadata(address, topic, timeout_s)
            brokers = {int(b.node_id): f"{b.host}:{b.port}" for b in answer.brokers}
            leader = int(answer.topics[0].partitions[0].leader_id)
            if leader < 0 or leader not in brokers:
                return "NO_LEADER"
            leader_address = brokers[leader]
            break
    if leader_address is None:
        return "NO_BROKER_ANSWERED"
    value = f"{topic}:once:{time.time_ns()}".encode()
    batch = build_batch([value], timestamp_ms=time.time_ns() // 1_000_000)
    body = {
        "acks": -1,
        "timeout": int(timeout_s * 1000),
        "topic_data": [
            {
                "name": topic,
                "partition_data": [{"index": 0, "records": batch}],
            }
        ],
    }
    try:
        # the socket waits past the broker's own timeout, so the broker's answer is what counts
        conn = Connection(leader_address, timeout=timeout_s + 2.0)
        try:
            answer = conn.send(PRODUCE, PRODUCE_VERSION, body)
        finally:
            conn.close()
    except (OSError, ConnectionError) as e:
        return type(e).__name__
    return error_name(answer.responses[0].partition_responses[0].error_code)


__all__ = ["PartitionView", "describe_partition", "produce_once"]
