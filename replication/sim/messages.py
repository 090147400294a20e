"""What the simulated controllers, brokers and clients send each other.

Each wraps the message the real shells exchange (the controller's request and response
dataclasses, the broker API's Produce and Fetch dataclasses) with ``rpc``: a run-wide unique
id that the answer echoes, so a late answer to a request of an earlier incarnation or an
earlier core is recognised and dropped, as a real client drops answers on a closed
connection. A controller's answer also carries ``leader``: the Raft leader it knows (-1 if
none), the ``current_leader`` hint a NOT_CONTROLLER answer redirects with. Raft messages
(`kraft.raft.messages`) travel on the same network: the metadata log's unwrapped, a
quorum-mode partition's in a `PartitionRaft` naming its partition (the multi-group
transport's group).
"""

from __future__ import annotations

from dataclasses import dataclass

from kraft.controller.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    RegisterBrokerRequest,
    RegisterBrokerResponse,
)
from kraft.raft.messages import RaftMessage
from kraft.types import TopicPartition
from replication.messages import (
    BrokerFetchRequest,
    BrokerFetchResponse,
    ProduceRequest,
    ProduceResponse,
)
from storage.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class RegisterReq:
    request: RegisterBrokerRequest
    rpc: int


@dataclass(frozen=True, slots=True)
class RegisterResp:
    response: RegisterBrokerResponse
    rpc: int
    leader: int = -1


@dataclass(frozen=True, slots=True)
class HeartbeatReq:
    request: BrokerHeartbeatRequest
    rpc: int


@dataclass(frozen=True, slots=True)
class HeartbeatResp:
    response: BrokerHeartbeatResponse
    rpc: int
    leader: int = -1


@dataclass(frozen=True, slots=True)
class CreateTopicsReq:
    request: CreateTopicsRequest
    rpc: int


@dataclass(frozen=True, slots=True)
class CreateTopicsResp:
    response: CreateTopicsResponse
    rpc: int
    leader: int = -1


@dataclass(frozen=True, slots=True)
class ReassignReq:
    request: AlterPartitionReassignmentsRequest
    rpc: int


@dataclass(frozen=True, slots=True)
class ReassignResp:
    response: AlterPartitionReassignmentsResponse
    rpc: int
    leader: int = -1


@dataclass(frozen=True, slots=True)
class AlterReq:
    request: AlterPartitionRequest
    rpc: int


@dataclass(frozen=True, slots=True)
class AlterResp:
    response: AlterPartitionResponse
    rpc: int
    leader: int = -1


@dataclass(frozen=True, slots=True)
class PartitionRaft:
    """A Raft message of a quorum-mode partition's group (best effort, no rpc: Raft's own
    correlation ids and timeouts match and retry)."""

    tp: TopicPartition
    message: RaftMessage


@dataclass(frozen=True, slots=True)
class FetchReq:
    """A Fetch, as the broker API takes it: a follower's (``replica_id`` >= 0) or a
    consumer's."""

    request: BrokerFetchRequest
    rpc: int


@dataclass(frozen=True, slots=True)
class FetchResp:
    response: BrokerFetchResponse
    rpc: int


@dataclass(frozen=True, slots=True)
class ProduceReq:
    request: ProduceRequest
    rpc: int


@dataclass(frozen=True, slots=True)
class ProduceResp:
    response: ProduceResponse
    rpc: int


@dataclass(frozen=True, slots=True)
class WriteMarkersReq:
    """The transaction coordinator's WriteTxnMarkers to one partition leader: ``batch`` (an
    end-transaction control batch, `storage.control.build_marker_batch`) appended with
    acks=all to each of ``partitions`` it leads. Answered with a `ProduceResp`, one partition
    answer each (NOT_LEADER_OR_FOLLOWER where it does not lead: the coordinator retries)."""

    partitions: tuple[TopicPartition, ...]
    batch: bytes
    rpc: int
    transaction_version: int = 0


@dataclass(frozen=True, slots=True)
class AppendReq:
    """A coordinator's acks=all append of ``batch`` to ``tp`` of an internal topic, by the
    leader's core (the broker hosting a coordinator appends to its replica itself; a client's
    Produce to an internal topic is refused). Answered with a `ProduceResp`;
    NOT_COORDINATOR if a coordinator of a later ``coordinator_epoch`` loaded the partition
    from this leader since (`ClientRequests.fence`)."""

    tp: TopicPartition
    batch: bytes
    rpc: int
    timeout_ms: int
    coordinator_epoch: int = -1


@dataclass(frozen=True, slots=True)
class TxnOffsetCommitReq:
    """A transactional producer's TxnOffsetCommit (KIP-98, KIP-447) to its group's
    coordinator, the leader of the group's ``__consumer_offsets`` partition: ``offsets`` (the
    next offset to read of each partition) appended as the producer's transactional records
    with acks=all (`replication.sim.group_offsets`). Answered with a `ProduceResp`."""

    group_id: str
    producer_id: int
    producer_epoch: int
    offsets: tuple[tuple[TopicPartition, int], ...]
    rpc: int


@dataclass(frozen=True, slots=True)
class OffsetFetchReq:
    """OffsetFetch with ``require_stable`` (KIP-447) to the group's coordinator."""

    group_id: str
    rpc: int


@dataclass(frozen=True, slots=True)
class OffsetFetchResp:
    """The group's committed offsets, or NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS (the
    leader has not committed its whole log yet) or UNSTABLE_OFFSET_COMMIT (a transaction
    holding offsets of the group is open)."""

    rpc: int
    error_code: ErrorCode
    offsets: tuple[tuple[TopicPartition, int], ...] = ()


__all__ = [
    "AlterReq",
    "AlterResp",
    "AppendReq",
    "CreateTopicsReq",
    "CreateTopicsResp",
    "FetchReq",
    "FetchResp",
    "HeartbeatReq",
    "HeartbeatResp",
    "OffsetFetchReq",
    "OffsetFetchResp",
    "PartitionRaft",
    "ProduceReq",
    "ProduceResp",
    "ReassignReq",
    "ReassignResp",
    "RegisterReq",
    "RegisterResp",
    "TxnOffsetCommitReq",
    "WriteMarkersReq",
]
