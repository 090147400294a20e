"""`await_sequence_turn`: a partition leader holds an idempotent batch that arrived ahead of its
predecessor, briefly (`SEQUENCE_REORDER_WAIT_MS`), so that concurrent gRPC calls handled out of
order still append a producer's batches in sequence order (KIP-98).

NB: Kafka handles a connection's requests in order, and its producers rely on it (up to 5 in
flight, KIP-98). Concurrent gRPC calls may be handled in any order, so batch N+1 can reach the
leader before batch N: it would be rejected (OUT_OF_ORDER_SEQUENCE) or, for a producer the
leader does not know yet, start the producer's state at the wrong sequence (KIP-360 accepts
any first sequence). So a batch whose sequence does not follow waits up to
`SEQUENCE_REORDER_WAIT_MS` for the appends before it; then the core decides as usual, except
for a producer the leader still does not know: a batch with a sequence above 0 is refused
OUT_OF_ORDER_SEQUENCE_NUMBER rather than let start its state (the producer retries it once its
predecessor is in, or, if it was next in line because the leader lost the producer's state,
bumps its epoch and starts again at 0). Accepting it put a later record before earlier ones
whose requests were slower: `kraft nemesis` at a load of 60 saw records 2,002-2,266 of a
producer land after its record 2,272.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Protocol

import structlog

from kraft.types import TopicPartition
from replication.core import ProducerStateManager
from replication.driver import PartitionDriver
from storage.errors import KraftError
from storage.records import BatchHeader, read_header

SEQUENCE_REORDER_WAIT_MS = 500
"""How long an idempotent batch that arrived before its predecessor waits for it."""

_log = structlog.get_logger("replication.broker.replicas.partition")


class Leader(Protocol):
    """What the wait needs of a `PartitionReplica`."""

    topic_partition: TopicPartition
    local_id: int

    @property
    def driver(self) -> PartitionDriver: ...

    @property
    def producer_state(self) -> ProducerStateManager: ...

    @property
    def changed(self) -> asyncio.Event: ...


async def await_sequence_turn(replica: Leader, records: bytes, timeout_ms: int) -> bool:
    """Hold ``records`` (one partition's batch of a Produce to ``replica``, the leader) while it
    is ahead of its producer's sequence, at most `SEQUENCE_REORDER_WAIT_MS` (and
    ``timeout_ms``); False if it must be refused OUT_OF_ORDER_SEQUENCE_NUMBER."""
    if sequence_turn_now(replica, records):
        return True
    header = read_header(records)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + min(SEQUENCE_REORDER_WAIT_MS, max(timeout_ms, 0)) / 1000
    while replica.driver.is_leader and _ahead_of_sequence(replica, header):
        remaining = deadline - loop.time()
        if remaining <= 0:
            unknown = replica.producer_state.entry(header.producer_id) is None
            _log.info(
                "out_of_order_batch_refused" if unknown else "out_of_order_batch_released",
                topic_partition=str(replica.topic_partition),
                node_id=replica.local_id,
                producer_id=header.producer_id,
                base_sequence=header.base_sequence,
            )
            return not unknown
        changed = replica.changed
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), remaining)
    return True


def sequence_turn_now(replica: Leader, records: bytes) -> bool:
    """Whether `await_sequence_turn` lets ``records`` through at once: not an idempotent
    batch, not ahead of its producer's sequence, or ``replica`` no longer leads."""
    try:
        header = read_header(records)
    except KraftError:
        return True  # the core answers CORRUPT_MESSAGE
    if header.producer_id < 0 or header.is_control or header.base_sequence < 0:
        return True
    return not (replica.driver.is_leader and _ahead_of_sequence(replica, header))


def _ahead_of_sequence(replica: Leader, header: BatchHeader) -> bool:
    entry = replica.producer_state.entry(header.producer_id)
    first = header.base_sequence
    if entry is None or header.producer_epoch > entry.producer_epoch:
        return first != 0
    if header.producer_epoch < entry.producer_epoch:
        return False
    return first > entry.last_sequence + 1


__all__ = ["SEQUENCE_REORDER_WAIT_MS", "await_sequence_turn", "sequence_turn_now"]
