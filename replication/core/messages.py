"""Inputs and outputs of the replication cores, as frozen dataclasses.

The shell converts between these and the wire messages of `replication.messages` (one
partition of a Produce or Fetch) and `kraft.controller.messages` (AlterPartition, reused as
is). They carry only what the cores decide on; ids, epochs and offsets use ``-1`` for "none",
as on the wire.

Inputs: `PartitionProduce` (a client's produce for one partition), `FollowerFetch` (a follower's
fetch as seen by the leader), `FollowerFetchResponse` (the leader's answer as seen by the
follower), `BrokerStatus` (what metadata says of a replica's broker, KIP-841).

Outputs: `LeaderAppend` (append these bytes now), `LeaderFetchAnswer` (how to answer a follower
fetch), `ProduceCompletion` (answer a produce), `AlterPartitionSend` (send an AlterPartition),
`FollowerFetchRequest` (send a fetch to the leader), and the two Ready types in
``replication.core.leader`` / ``replication.core.follower``.
"""

from __future__ import annotations

from dataclasses import dataclass

from kraft.controller.messages import AlterPartitionData
from kraft.types import Epoch, NodeId, Offset, TopicPartition
from replication.core.log_view import NO_OFFSET
from storage.errors import ErrorCode

ACKS_NONE = 0
ACKS_LEADER = 1
ACKS_ALL = -1
VALID_ACKS = frozenset({ACKS_NONE, ACKS_LEADER, ACKS_ALL})

NO_EPOCH = Epoch(-1)
"""An epoch not known (the field's check is skipped, as in Kafka)."""

# -- leader inputs -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionProduce:
    """One partition of a ProduceRequest.

    ``request_id`` is the shell's handle: unique among this leader's unanswered produces, it
    comes back in exactly one `ProduceCompletion`.
    """

    request_id: int
    acks: int
    timeout_ms: int
    """How long an acks=all produce may wait for the ISR (ProduceRequest ``timeout_ms``)."""
    records: bytes
    """Exactly one v2 batch (Kafka requires one batch per partition since Produce v3)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerStatus:
    """A replica's broker as the metadata image has it (``BrokerRegistration``): KIP-841 lets
    only an unfenced broker, not in controlled shutdown, at its registered epoch, join an ISR."""

    broker_epoch: int
    fenced: bool = False
    in_controlled_shutdown: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class FollowerFetch:
    """One partition of a follower's FetchRequest, as the leader receives it (KIP-320, KIP-380)."""

    replica_id: NodeId
    broker_epoch: int = -1
    """The follower's broker epoch (FetchRequest ``replica_epoch``, KIP-903); the leader
    answers a fetch only with the epoch the metadata has registered for the replica."""
    fetch_offset: Offset
    last_fetched_epoch: Epoch = NO_EPOCH
    """The epoch of the follower's last batch; -1 skips the divergence check."""
    current_leader_epoch: Epoch = NO_EPOCH
    """The leader epoch the follower believes in; -1 skips fencing."""
    log_start_offset: Offset = NO_OFFSET


# -- leader outputs ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DivergingEpoch:
    """FetchResponse ``diverging_epoch``: the follower's log diverges from the leader's after
    ``end_offset`` of ``epoch`` (KIP-320 truncation on fetch, KIP-279 semantics)."""

    epoch: Epoch
    end_offset: Offset


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAppend:
    """The shell must append ``records`` as leader now (``SegmentedLog.append(records,
    leader_epoch=leader_epoch)``), then call `PartitionLeader.on_appended` with the base
    offset, or `PartitionLeader.on_append_failed` with the error code."""

    request_id: int
    records: bytes
    leader_epoch: Epoch


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderFetchAnswer:
    """How to answer a follower's fetch for this partition.

    If ``read_offset`` is set, the shell reads the log from it (``SegmentedLog.read``) into the
    response's records; otherwise the response carries no records. ``high_watermark`` is the
    value before this fetch moved it, as Kafka's ``Partition.readRecords`` answers
    (``initialHighWatermark``): the follower learns an advance on its next fetch.
    """

    error_code: ErrorCode = ErrorCode.NONE
    high_watermark: Offset = NO_OFFSET
    log_start_offset: Offset = NO_OFFSET
    log_end_offset: Offset = NO_OFFSET
    diverging_epoch: DivergingEpoch | None = None
    read_offset: Offset | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ProduceCompletion:
    """The answer to the produce ``request_id`` (skip sending it for acks=0)."""

    request_id: int
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    base_offset: Offset = NO_OFFSET
    log_start_offset: Offset = NO_OFFSET


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionSend:
    """Send ``data`` in an AlterPartitionRequest (KIP-497) from this broker (the shell adds its
    broker id and epoch and the topic id) and feed the partition's result back with
    `PartitionLeader.handle_alter_partition_response` and this ``alter_id``."""

    alter_id: int
    topic_partition: TopicPartition
    data: AlterPartitionData


# -- follower ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class FollowerFetchRequest:
    """One partition of the FetchRequest the follower's shell sends to ``leader_id``."""

    fetch_id: int
    """The core's handle; pass it back with the response."""
    topic_partition: TopicPartition
    leader_id: NodeId
    replica_id: NodeId
    broker_epoch: int
    fetch_offset: Offset
    last_fetched_epoch: Epoch
    current_leader_epoch: Epoch
    log_start_offset: Offset

    def as_follower_fetch(self) -> FollowerFetch:
        """This request as the leader receives it (``PartitionLeader.handle_follower_fetch``)."""
        return FollowerFetch(
            replica_id=self.replica_id,
            broker_epoch=self.broker_epoch,
            fetch_offset=self.fetch_offset,
            last_fetched_epoch=self.last_fetched_epoch,
            current_leader_epoch=self.current_leader_epoch,
            log_start_offset=self.log_start_offset,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class FollowerFetchResponse:
    """The leader's answer for this partition (``FetchPartitionData``), or a transport error
    as ``error_code`` (NETWORK_EXCEPTION, REQUEST_TIMED_OUT, ...)."""

    fetch_id: int
    error_code: ErrorCode = ErrorCode.NONE
    high_watermark: Offset = NO_OFFSET
    log_start_offset: Offset = NO_OFFSET
    diverging_epoch: DivergingEpoch | None = None
    records: bytes = b""


__all__ = [
    "ACKS_ALL",
    "ACKS_LEADER",
    "ACKS_NONE",
    "VALID_ACKS",
    "AlterPartitionSend",
    "BrokerStatus",
    "DivergingEpoch",
    "FollowerFetch",
    "FollowerFetchRequest",
    "FollowerFetchResponse",
    "LeaderAppend",
    "LeaderFetchAnswer",
    "PartitionProduce",
    "ProduceCompletion",
]
