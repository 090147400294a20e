"""What the simulated controller, brokers and producers send each other.

Each wraps the message the real shells exchange (the controller's request and response
dataclasses, the replication cores' fetch types) with ``rpc``: a run-wide unique id that the
answer echoes, so a late answer to a request of an earlier incarnation or an earlier core is
recognised and dropped, as a real client drops answers on a closed connection.
"""

from __future__ import annotations

from dataclasses import dataclass

from kraft.controller.messages import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    RegisterBrokerRequest,
    RegisterBrokerResponse,
)
from kraft.metadata.image import MetadataImage
from kraft.types import TopicPartition
from replication.core import FollowerFetchRequest, FollowerFetchResponse, ProduceCompletion


@dataclass(frozen=True, slots=True)
class RegisterReq:
    request: RegisterBrokerRequest
    rpc: int


@dataclass(frozen=True, slots=True)
class RegisterResp:
    response: RegisterBrokerResponse
    rpc: int


@dataclass(frozen=True, slots=True)
class HeartbeatReq:
    request: BrokerHeartbeatRequest
    rpc: int


@dataclass(frozen=True, slots=True)
class HeartbeatResp:
    response: BrokerHeartbeatResponse
    rpc: int


@dataclass(frozen=True, slots=True)
class MetadataReq:
    """A broker's metadata fetch: answered only when the controller has something newer."""

    last_offset: int


@dataclass(frozen=True, slots=True)
class MetadataResp:
    image: MetadataImage
    """The committed image (immutable: sharing it is sending a copy)."""


@dataclass(frozen=True, slots=True)
class AlterReq:
    request: AlterPartitionRequest
    rpc: int


@dataclass(frozen=True, slots=True)
class AlterResp:
    response: AlterPartitionResponse
    rpc: int


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


__all__ = [
    "AlterReq",
    "AlterResp",
    "FetchReq",
    "FetchResp",
    "HeartbeatReq",
    "HeartbeatResp",
    "MetadataReq",
    "MetadataResp",
    "ProduceReq",
    "ProduceResp",
    "RegisterReq",
    "RegisterResp",
]
