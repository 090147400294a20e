"""Hostile input to the Raft core (issue 10, finding 1): requests from outside the voter set,
forged responses, and epochs or offsets the wire cannot carry change no state."""

from __future__ import annotations

from typing import Any

import pytest

from kraft.raft import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    HardState,
    Leader,
    RaftMessage,
    VoteRequest,
    VoteResponse,
)
from kraft.raft.admission import EPOCH_MAX
from kraft.raft.errors import InvalidTransitionError
from kraft.raft.messages import FetchSnapshotRequest, SnapshotId
from kraft.raft.replication import OBSERVER_SESSION_TIMEOUT_MS, OBSERVERS_MAX
from kraft.transport.codec import to_proto
from kraft.types import Epoch, NodeId, Offset
from storage.errors import ErrorCode
from tests.raft.builder import RaftNodeBuilder, RaftTestContext

only = RaftTestContext.only
OUTSIDER = NodeId(999)


def _state(ctx: RaftTestContext) -> tuple[str, int, int | None, HardState]:
    node = ctx.node
    return node.role_name, int(node.epoch), node.leader_id, ctx.disk.hard_state


def _error_of(msg: RaftMessage) -> ErrorCode:
    error = getattr(msg, "error", None)
    assert isinstance(error, ErrorCode), msg
    return error


def _end_quorum_epoch(source: int, dest: int, epoch: int, leader: int) -> EndQuorumEpochRequest:
    return EndQuorumEpochRequest(
        source=NodeId(source),
        destination=NodeId(dest),
        epoch=Epoch(epoch),
        correlation_id=5,
        leader_id=NodeId(leader),
        preferred_successors=(NodeId(dest),),
    )


def _begin_quorum_epoch(source: int, dest: int, epoch: int, leader: int) -> BeginQuorumEpochRequest:
    return BeginQuorumEpochRequest(
        source=NodeId(source),
        destination=NodeId(dest),
        epoch=Epoch(epoch),
        correlation_id=6,
        leader_id=NodeId(leader),
    )


def test_end_quorum_epoch_from_a_non_voter_with_int32_max_epoch_is_refused_and_keeps_epoch() -> (
    None
):
    """The finding: EndQuorumEpoch(source=999, epoch=2^31-1) moved a controller to that epoch,
    and its next VoteRequest (epoch 2^31) killed the Raft loop in the protobuf encoder.
    Kafka's validateVoterOnlyRequest answers INCONSISTENT_VOTER_SET (KIP-595)."""
    ctx = RaftNodeBuilder(local_id=2).with_elected_leader(epoch=1, leader=1).build()
    before = _state(ctx)
    sent = ctx.step(_end_quorum_epoch(999, 2, EPOCH_MAX, leader=999))
    resp = only(sent, EndQuorumEpochResponse)[0]
    assert resp.error == ErrorCode.INCONSISTENT_VOTER_SET and resp.destination == 999
    assert resp.epoch == 1 and resp.leader_id == 1
    assert _state(ctx) == before
    # ... and it does not hasten an election either: still following after a fetch timeout's
    # worth of answered fetches would keep it there.
    assert ctx.node.role_name == "follower"


def test_begin_quorum_epoch_from_a_non_voter_naming_a_voter_is_refused() -> None:
    """A non-voter may not announce a leader, not even a real voter (the finding's second
    failover). The request speaks for its leader, so its sender must be that leader."""
    ctx = RaftNodeBuilder(local_id=2).with_elected_leader(epoch=1, leader=1).build()
    before = _state(ctx)
    resp = only(ctx.step(_begin_quorum_epoch(999, 2, 112, leader=3)), BeginQuorumEpochResponse)[0]
    assert resp.error == ErrorCode.INCONSISTENT_VOTER_SET
    spoofed = _begin_quorum_epoch(3, 2, 112, leader=1)  # a voter speaking for another
    resp = only(ctx.step(spoofed), BeginQuorumEpochResponse)[0]
    assert resp.error == ErrorCode.INVALID_REQUEST
    assert _state(ctx) == before


@pytest.mark.parametrize("pre_vote", [False, True])
def test_vote_from_a_non_voter_is_rejected_and_leaves_the_epoch(pre_vote: bool) -> None:
    ctx = RaftNodeBuilder(local_id=1).with_elected_leader(epoch=1, leader=2).build()
    before = _state(ctx)
    req = ctx.vote_request(999, EPOCH_MAX, last_epoch=1, end_offset=10**9, pre_vote=pre_vote)
    resp = only(ctx.step(req), VoteResponse)[0]
    assert resp.error == ErrorCode.INCONSISTENT_VOTER_SET and not resp.vote_granted
    assert resp.pre_vote == pre_vote
    assert _state(ctx) == before


@pytest.mark.parametrize(
    "response",
    [
        VoteResponse(source=OUTSIDER, destination=NodeId(1), epoch=EPOCH_MAX, vote_granted=True),
        BeginQuorumEpochResponse(source=OUTSIDER, destination=NodeId(1), epoch=EPOCH_MAX),
        EndQuorumEpochResponse(
            source=OUTSIDER, destination=NodeId(1), epoch=EPOCH_MAX, leader_id=NodeId(2)
        ),
        FetchResponse(source=OUTSIDER, destination=NodeId(1), epoch=EPOCH_MAX, leader_id=NodeId(2)),
    ],
    ids=lambda r: type(r).__name__,
)
def test_a_response_from_a_non_voter_is_dropped_before_its_epoch_moves_us(
    response: RaftMessage,
) -> None:
    ctx = RaftNodeBuilder(local_id=1).with_elected_leader(epoch=3, leader=2).build()
    before = _state(ctx)
    assert ctx.step(response) == []
    assert _state(ctx) == before


def test_voter_only_requests_to_an_observer_are_refused() -> None:
    """Kafka refuses Vote, BeginQuorumEpoch and EndQuorumEpoch on an observer."""
    ctx = RaftNodeBuilder(local_id=9).with_elected_leader(epoch=2, leader=1).build()
    before = _state(ctx)
    for req in (
        ctx.vote_request(2, 5, last_epoch=2, end_offset=100),
        _begin_quorum_epoch(3, 9, 5, leader=3),
        _end_quorum_epoch(1, 9, 5, leader=1),
    ):
        (resp,) = [m for m in ctx.step(req) if not isinstance(m, FetchRequest)]
        assert _error_of(resp) == ErrorCode.INCONSISTENT_VOTER_SET, req
    assert _state(ctx) == before


def _fetch(**fields: Any) -> FetchRequest:
    base: dict[str, Any] = {
        "source": NodeId(2),
        "destination": NodeId(1),
        "epoch": Epoch(1),
        "correlation_id": 9,
        "fetch_offset": Offset(0),
        "last_fetched_epoch": Epoch(0),
    }
    return FetchRequest(**(base | fields))


@pytest.mark.parametrize(
    "request_",
    [
        _fetch(epoch=Epoch(-1)),
        _fetch(epoch=Epoch(EPOCH_MAX + 1)),
        _fetch(fetch_offset=Offset(-5)),
        _fetch(last_fetched_epoch=Epoch(-1)),
        _fetch(last_fetched_epoch=Epoch(2)),  # above the epoch it fetches in
        _fetch(max_bytes=-1),
        _fetch(max_wait_ms=-1),
        _fetch(high_watermark=Offset(-7)),
        FetchSnapshotRequest(
            source=NodeId(2),
            destination=NodeId(1),
            epoch=Epoch(1),
            snapshot_id=SnapshotId(Offset(-1), Epoch(0)),
            position=0,
        ),
        VoteRequest(
            source=NodeId(2),
            destination=NodeId(1),
            epoch=Epoch(2),
            last_epoch=Epoch(2),  # Kafka: lastEpoch >= candidateEpoch is INVALID_REQUEST
            last_epoch_end_offset=Offset(0),
        ),
        VoteRequest(
            source=NodeId(2),
            destination=NodeId(1),
            epoch=Epoch(2),
            last_epoch=Epoch(1),
            last_epoch_end_offset=Offset(-1),
        ),
        VoteRequest(
            source=NodeId(2),
            destination=NodeId(1),
            epoch=Epoch(-3),
            last_epoch=Epoch(-4),
            last_epoch_end_offset=Offset(0),
        ),
    ],
)
def test_nonsensical_numbers_are_invalid_requests_and_change_nothing(request_: RaftMessage) -> None:
    ctx = RaftNodeBuilder(local_id=1).with_log((1, 3)).build()
    ctx.become_leader()
    before = _state(ctx)
    hw = ctx.node.high_watermark
    (resp,) = ctx.step(request_)
    assert _error_of(resp) == ErrorCode.INVALID_REQUEST
    assert resp.correlation_id == request_.correlation_id and resp.destination == 2
    assert _state(ctx) == before and ctx.node.high_watermark == hw
    to_proto(resp)  # the answer fits the wire


def test_a_node_in_the_last_epoch_never_puts_a_larger_one_on_the_wire() -> None:
    """No transition produces an epoch the wire cannot carry: a voter in epoch 2^31-1 (only
    forged messages from a claimed voter get it there) stays prospective and says so, and
    every message it sends still encodes."""
    ctx = RaftNodeBuilder(local_id=1).with_unknown_leader(epoch=EPOCH_MAX).build()
    sent = ctx.tick(10 * ctx.config.election_timeout_ms)
    sent += ctx.tick(10 * ctx.config.election_timeout_ms)
    assert ctx.node.role_name == "prospective" and ctx.node.epoch == EPOCH_MAX
    assert not only(sent, VoteRequest)
    for msg in sent:
        to_proto(msg)
    # It can still follow a leader of that epoch.
    ctx.step(_begin_quorum_epoch(2, 1, EPOCH_MAX, leader=2))
    assert ctx.node.role_name == "follower" and ctx.node.leader_id == 2


def test_a_single_voter_in_the_last_epoch_does_not_elect_itself_past_it() -> None:
    ctx = RaftNodeBuilder(local_id=1, voters={1}).with_unknown_leader(epoch=EPOCH_MAX).build()
    ctx.tick(10 * ctx.config.election_timeout_ms)
    assert not ctx.node.is_leader and ctx.node.epoch == EPOCH_MAX


def test_quorum_state_refuses_a_candidacy_past_the_last_epoch() -> None:
    ctx = RaftNodeBuilder(local_id=1).with_unknown_leader(epoch=EPOCH_MAX).build()
    ctx.tick_until(lambda: ctx.node.role_name == "prospective")
    quorum = ctx.node._quorum  # the transition table's own guard
    with pytest.raises(InvalidTransitionError):
        quorum.transition_to_candidate(ctx.now_ms)


def test_an_observer_fetch_from_an_unknown_id_never_advances_the_high_watermark() -> None:
    """KIP-595: the high watermark is a majority of voters; an observer's fetch offset counts
    for nothing, whatever id it claims outside the voter set."""
    ctx = RaftNodeBuilder(local_id=1).build()
    ctx.become_leader()
    ctx.node.propose([b"a", b"b"], ctx.now_ms)
    ctx.drain()
    hw = ctx.node.high_watermark
    end = ctx.node.log_end_offset
    for outsider in (4, 999):
        ctx.step(ctx.fetch_request(outsider, epoch=ctx.node.epoch, offset=end, last_epoch=1))
    assert ctx.node.high_watermark == hw < end


def test_a_fetch_that_supersedes_a_parked_one_answers_the_parked_one() -> None:
    """Two senders claiming one id (a forged stream beside the real voter) must not leave the
    first waiting for an answer that never comes."""
    ctx = RaftNodeBuilder(local_id=1).build()
    ctx.become_leader()
    epoch = ctx.node.epoch
    end = ctx.node.log_end_offset
    ctx.step(ctx.fetch_request(2, epoch=epoch, offset=end, last_epoch=epoch))
    first = ctx.fetch_request(2, epoch=epoch, offset=end, last_epoch=epoch, max_wait_ms=50)
    second = FetchRequest(
        **{f: getattr(first, f) for f in FetchRequest.__dataclass_fields__} | {"correlation_id": 77}
    )
    assert ctx.step(first) == []  # parked
    sent = only(ctx.step(second), FetchResponse)
    assert [r.correlation_id for r in sent] == [first.correlation_id]


def test_fetches_from_made_up_ids_do_not_grow_the_leader_without_bound() -> None:
    """Observers are tracked for DescribeQuorum only; Kafka forgets one after 5 minutes of
    silence, and here at most OBSERVERS_MAX are kept (the stalest goes first)."""
    ctx = RaftNodeBuilder(local_id=1).build()
    ctx.become_leader()
    epoch = ctx.node.epoch
    end = ctx.node.log_end_offset
    ctx.step(ctx.fetch_request(4, epoch=epoch, offset=end, last_epoch=epoch))
    ctx.now_ms += OBSERVER_SESSION_TIMEOUT_MS + 1
    ctx.step(ctx.fetch_request(2, epoch=epoch, offset=end, last_epoch=epoch))
    ctx.step(ctx.fetch_request(3, epoch=epoch, offset=end, last_epoch=epoch))
    for source in range(1000, 1000 + 2 * OBSERVERS_MAX):
        ctx.step(ctx.fetch_request(source, epoch=epoch, offset=end, last_epoch=epoch))
    role = ctx.node.role
    assert isinstance(role, Leader)
    replicas = role.replicas
    observers = [r for r in replicas if r not in ctx.node.voters]
    assert len(observers) == OBSERVERS_MAX and 4 not in observers
    assert max(observers) == 1000 + 2 * OBSERVERS_MAX - 1
    assert {2, 3} <= set(replicas) and ctx.node.is_leader
