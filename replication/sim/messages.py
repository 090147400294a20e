"""What the simulated controllers, brokers and clients send each other.

Each wraps the message the real shells exchange (the controller's request and response
dataclasses, the replication cores' fetch types) with ``rpc``: a run-wide unique id that the
answer echoes, so a late answer to a request of an earlier incarnation or an earlier core is
recognised and dropped, as a real client drops answers on a closed connection. A controller's
answer also carries ``leader``: the Raft leader it knows (-1 if none), the ``current_leader``
hint a NOT_CONTROLLER answer redirects with. Raft messages (`kraft.raft.messages`) travel on
the same network: the metadata log's unwrapped, a quorum-mode partition's in a `PartitionRaft`
naming its partition (the multi-group transport's group).
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
from replication.core import FollowerFetchRequest, FollowerFetchResponse, ProduceCompletion
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
    tp: TopicPartition
    request: FollowerFetchRequest
    rpc: int


@dataclass(frozen=True, slots=True)
class FetchResp:
    response: FollowerFetchResponse
    rpc: int


@dataclass(frozen=True, slots=True)
class ProduceReq:
    tp: TopicPartition
    acks: int
    timeout_ms: int
    records: bytes
    rpc: int


@dataclass(frozen=True, slots=True)
class ProduceResp:
    completion: ProduceCompletion
    rpc: int


@dataclass(frozen=True, slots=True)
class ConsumeReq:
    """A consumer's fetch: records of ``tp`` from ``offset``, below the leader's HW."""

    tp: TopicPartition
    offset: int
    max_bytes: int
    rpc: int


@dataclass(frozen=True, slots=True)
class ConsumeResp:
    error_code: ErrorCode
    records: bytes
    high_watermark: int
    log_start_offset: int
    rpc: int


__all__ = [
    "AlterReq",
    "AlterResp",
    "ConsumeReq",
    "ConsumeResp",
    "CreateTopicsReq",
    "CreateTopicsResp",
    "FetchReq",
    "FetchResp",
    "HeartbeatReq",
    "HeartbeatResp",
    "PartitionRaft",
    "ProduceReq",
    "ProduceResp",
    "ReassignReq",
    "ReassignResp",
    "RegisterReq",
    "RegisterResp",
]
