"""Proto <-> dataclass conversion for the Raft RPCs: the one place proto objects are touched.

Optional node ids travel as -1; a Fetch response's batches travel concatenated in one
``records`` field (as in Kafka) and are split back into whole batches on receipt. An envelope
names its Raft group; the metadata quorum's group (`METADATA_GROUP`) travels as the empty
string, which is what nodes that predate groups send and expect.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from kraft._generated import raft_pb2 as pb
from kraft.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DivergingEpoch,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftMessage,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from kraft.types import Epoch, NodeId, Offset
from storage.errors import ErrorCode
from storage.records import split_batches

METADATA_GROUP: Final = "__cluster_metadata"
"""The Raft group of the metadata quorum (Kafka's ``__cluster_metadata`` topic)."""

_NONE = -1


def _code(error: ErrorCode) -> Any:
    return int(error)


def _opt_node(value: int) -> NodeId | None:
    return None if value < 0 else NodeId(value)


def _node_or_none(value: NodeId | None) -> int:
    return _NONE if value is None else int(value)


def _header(m: RaftMessage) -> pb.RaftHeader:
    return pb.RaftHeader(
        source=m.source, destination=m.destination, epoch=m.epoch, correlation_id=m.correlation_id
    )


def _common(h: pb.RaftHeader) -> dict[str, Any]:
    return {
        "source": NodeId(h.source),
        "destination": NodeId(h.destination),
        "epoch": Epoch(h.epoch),
        "correlation_id": h.correlation_id,
    }


def _snapshot_id(s: SnapshotId | None) -> pb.SnapshotId | None:
    return None if s is None else pb.SnapshotId(end_offset=s.end_offset, epoch=s.epoch)


# --- to proto ------------------------------------------------------------------------------------


def to_proto(m: RaftMessage) -> Any:
    """The generated message for a core message (any RaftMessage subclass)."""
    encode = _ENCODERS[type(m)]
    return encode(m)


def _vote_request(m: Any) -> pb.VoteRequest:
    return pb.VoteRequest(
        header=_header(m),
        last_epoch=m.last_epoch,
        last_epoch_end_offset=m.last_epoch_end_offset,
        pre_vote=m.pre_vote,
    )


def _vote_response(m: Any) -> pb.VoteResponse:
    return pb.VoteResponse(
        header=_header(m),
        error=_code(m.error),
        leader_id=_node_or_none(m.leader_id),
        vote_granted=m.vote_granted,
        pre_vote=m.pre_vote,
    )


def _begin_request(m: Any) -> pb.BeginQuorumEpochRequest:
    return pb.BeginQuorumEpochRequest(header=_header(m), leader_id=m.leader_id)


def _begin_response(m: Any) -> pb.BeginQuorumEpochResponse:
    return pb.BeginQuorumEpochResponse(
        header=_header(m), error=_code(m.error), leader_id=_node_or_none(m.leader_id)
    )


def _end_request(m: Any) -> pb.EndQuorumEpochRequest:
    return pb.EndQuorumEpochRequest(
        header=_header(m),
        leader_id=m.leader_id,
        preferred_successors=list(m.preferred_successors),
    )


def _end_response(m: Any) -> pb.EndQuorumEpochResponse:
    return pb.EndQuorumEpochResponse(
        header=_header(m), error=_code(m.error), leader_id=_node_or_none(m.leader_id)
    )


def _fetch_request(m: Any) -> pb.FetchRequest:
    return pb.FetchRequest(
        header=_header(m),
        fetch_offset=m.fetch_offset,
        last_fetched_epoch=m.last_fetched_epoch,
        high_watermark=m.high_watermark,
        max_bytes=m.max_bytes,
        max_wait_ms=m.max_wait_ms,
    )


def _fetch_response(m: Any) -> pb.FetchResponse:
    out = pb.FetchResponse(
        header=_header(m),
        error=_code(m.error),
        leader_id=_node_or_none(m.leader_id),
        high_watermark=m.high_watermark,
        log_start_offset=m.log_start_offset,
        records=b"".join(m.batches),
    )
    if m.diverging_epoch is not None:
        out.diverging_epoch.CopyFrom(
            pb.DivergingEpoch(
                epoch=m.diverging_epoch.epoch, end_offset=m.diverging_epoch.end_offset
            )
        )
    if m.snapshot_id is not None:
        out.snapshot_id.CopyFrom(
            pb.SnapshotId(end_offset=m.snapshot_id.end_offset, epoch=m.snapshot_id.epoch)
        )
    return out


def _fetch_snapshot_request(m: Any) -> pb.FetchSnapshotRequest:
    return pb.FetchSnapshotRequest(
        header=_header(m),
        snapshot_id=_snapshot_id(m.snapshot_id),
        position=m.position,
        max_bytes=m.max_bytes,
    )


def _fetch_snapshot_response(m: Any) -> pb.FetchSnapshotResponse:
    out = pb.FetchSnapshotResponse(
        header=_header(m),
        error=_code(m.error),
        leader_id=_node_or_none(m.leader_id),
        position=m.position,
        size_bytes=m.size_bytes,
        data=m.data,
    )
    if m.snapshot_id is not None:
        out.snapshot_id.CopyFrom(
            pb.SnapshotId(end_offset=m.snapshot_id.end_offset, epoch=m.snapshot_id.epoch)
        )
    return out


_ENCODERS: dict[type, Callable[[Any], Any]] = {
    VoteRequest: _vote_request,
    VoteResponse: _vote_response,
    BeginQuorumEpochRequest: _begin_request,
    BeginQuorumEpochResponse: _begin_response,
    EndQuorumEpochRequest: _end_request,
    EndQuorumEpochResponse: _end_response,
    FetchRequest: _fetch_request,
    FetchResponse: _fetch_response,
    FetchSnapshotRequest: _fetch_snapshot_request,
    FetchSnapshotResponse: _fetch_snapshot_response,
}


# --- from proto ----------------------------------------------------------------------------------


def _error(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


def _snap(p: pb.SnapshotId) -> SnapshotId:
    return SnapshotId(end_offset=Offset(p.end_offset), epoch=Epoch(p.epoch))


def from_proto(p: Any) -> RaftMessage:
    """The core message for a generated message (the inverse of `to_proto`)."""
    decode = _DECODERS[type(p)]
    return decode(p)


def _d_vote_request(p: Any) -> VoteRequest:
    return VoteRequest(
        **_common(p.header),
        last_epoch=Epoch(p.last_epoch),
        last_epoch_end_offset=Offset(p.last_epoch_end_offset),
        pre_vote=p.pre_vote,
    )


def _d_vote_response(p: Any) -> VoteResponse:
    return VoteResponse(
        **_common(p.header),
        error=_error(p.error),
        leader_id=_opt_node(p.leader_id),
        vote_granted=p.vote_granted,
        pre_vote=p.pre_vote,
    )


def _d_begin_request(p: Any) -> BeginQuorumEpochRequest:
    return BeginQuorumEpochRequest(**_common(p.header), leader_id=NodeId(p.leader_id))


def _d_begin_response(p: Any) -> BeginQuorumEpochResponse:
    return BeginQuorumEpochResponse(
        **_common(p.header), error=_error(p.error), leader_id=_opt_node(p.leader_id)
    )


def _d_end_request(p: Any) -> EndQuorumEpochRequest:
    return EndQuorumEpochRequest(
        **_common(p.header),
        leader_id=NodeId(p.leader_id),
        preferred_successors=tuple(NodeId(n) for n in p.preferred_successors),
    )


def _d_end_response(p: Any) -> EndQuorumEpochResponse:
    return EndQuorumEpochResponse(
        **_common(p.header), error=_error(p.error), leader_id=_opt_node(p.leader_id)
    )


def _d_fetch_request(p: Any) -> FetchRequest:
    return FetchRequest(
        **_common(p.header),
        fetch_offset=Offset(p.fetch_offset),
        last_fetched_epoch=Epoch(p.last_fetched_epoch),
        high_watermark=Offset(p.high_watermark),
        max_bytes=p.max_bytes,
        max_wait_ms=p.max_wait_ms,
    )


def _d_fetch_response(p: Any) -> FetchResponse:
    return FetchResponse(
        **_common(p.header),
        error=_error(p.error),
        leader_id=_opt_node(p.leader_id),
        high_watermark=Offset(p.high_watermark),
        log_start_offset=Offset(p.log_start_offset),
        batches=tuple(split_batches(p.records)) if p.records else (),
        diverging_epoch=DivergingEpoch(
            epoch=Epoch(p.diverging_epoch.epoch), end_offset=Offset(p.diverging_epoch.end_offset)
        )
        if p.HasField("diverging_epoch")
        else None,
        snapshot_id=_snap(p.snapshot_id) if p.HasField("snapshot_id") else None,
    )


def _d_fetch_snapshot_request(p: Any) -> FetchSnapshotRequest:
    return FetchSnapshotRequest(
        **_common(p.header),
        snapshot_id=_snap(p.snapshot_id),
        position=p.position,
        max_bytes=p.max_bytes,
    )


def _d_fetch_snapshot_response(p: Any) -> FetchSnapshotResponse:
    return FetchSnapshotResponse(
        **_common(p.header),
        error=_error(p.error),
        leader_id=_opt_node(p.leader_id),
        snapshot_id=_snap(p.snapshot_id) if p.HasField("snapshot_id") else None,
        position=p.position,
        size_bytes=p.size_bytes,
        data=p.data,
    )


_DECODERS: dict[type, Callable[[Any], RaftMessage]] = {
    pb.VoteRequest: _d_vote_request,
    pb.VoteResponse: _d_vote_response,
    pb.BeginQuorumEpochRequest: _d_begin_request,
    pb.BeginQuorumEpochResponse: _d_begin_response,
    pb.EndQuorumEpochRequest: _d_end_request,
    pb.EndQuorumEpochResponse: _d_end_response,
    pb.FetchRequest: _d_fetch_request,
    pb.FetchResponse: _d_fetch_response,
    pb.FetchSnapshotRequest: _d_fetch_snapshot_request,
    pb.FetchSnapshotResponse: _d_fetch_snapshot_response,
}


# --- envelopes (the Stream RPC) ------------------------------------------------------------------

_ENVELOPE_FIELDS: dict[type, str] = {
    VoteRequest: "vote_request",
    VoteResponse: "vote_response",
    BeginQuorumEpochRequest: "begin_quorum_epoch_request",
    BeginQuorumEpochResponse: "begin_quorum_epoch_response",
    EndQuorumEpochRequest: "end_quorum_epoch_request",
    EndQuorumEpochResponse: "end_quorum_epoch_response",
    FetchRequest: "fetch_request",
    FetchResponse: "fetch_response",
    FetchSnapshotRequest: "fetch_snapshot_request",
    FetchSnapshotResponse: "fetch_snapshot_response",
}


def to_envelope(
    m: RaftMessage, group: str = METADATA_GROUP, leader_endpoint: str = ""
) -> pb.RaftEnvelope:
    """Wrap any core message of Raft group ``group`` for the Stream RPC, with the
    ``host:port`` of the leader a response names (KIP-853), if known."""
    envelope = pb.RaftEnvelope(**{_ENVELOPE_FIELDS[type(m)]: to_proto(m)})
    if group != METADATA_GROUP:
        envelope.group = group
    if leader_endpoint:
        envelope.leader_endpoint = leader_endpoint
    return envelope


def envelope_group(envelope: pb.RaftEnvelope) -> str:
    """The Raft group an envelope belongs to (empty on the wire: the metadata group)."""
    return envelope.group or METADATA_GROUP


def from_envelope(envelope: pb.RaftEnvelope) -> RaftMessage | None:
    """The core message in an envelope (None for an empty one)."""
    field = envelope.WhichOneof("message")
    return None if field is None else from_proto(getattr(envelope, field))
