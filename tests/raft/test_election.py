"""Leader election: KIP-595 Vote with KIP-996 pre-vote, check-quorum, EndQuorumEpoch."""

from __future__ import annotations

import pytest

from kraft.raft import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    Leader,
    NotLeaderError,
    Resigned,
    VoteRequest,
    VoteResponse,
)
from kraft.types import Epoch, NodeId
from storage.errors import ErrorCode
from tests.raft.builder import RaftNodeBuilder, RaftTestContext

only = RaftTestContext.only


def test_unattached_voter_pre_votes_after_election_timeout_without_bumping_epoch() -> None:
    """KIP-996: a prospective asks whether it would win before it bumps the epoch."""
    ctx = RaftNodeBuilder(local_id=1).with_unknown_leader(epoch=4).build()
    sent = ctx.tick_until(lambda: ctx.node.role_name == "prospective")
    requests = only(sent, VoteRequest)
    assert {r.destination for r in requests} == {2, 3}
    assert all(r.pre_vote and r.epoch == 5 for r in requests)
    assert ctx.node.epoch == 4 and ctx.disk.hard_state.epoch == 4


def test_election_timeout_is_randomised_from_the_injected_rng() -> None:
    """Raft §5.2: "Raft uses randomized election timeouts to ensure that split votes are
    rare." Reference: Raft §5.2."""
    deadlines = {
        RaftNodeBuilder(seed=seed).with_unknown_leader(epoch=1).build().node.next_deadline_ms()
        for seed in range(20)
    }
    timeout = RaftNodeBuilder().build().config.election_timeout_ms
    assert len(deadlines) > 5
    assert all(timeout <= d < 2 * timeout for d in deadlines)


def test_pre_vote_majority_makes_a_candidate_whose_vote_requests_follow_its_synced_vote() -> None:
    """Raft §5.2: "To begin an election, a follower increments its current term ... It then
    votes for itself"; the vote is synced before the requests leave. Reference: Raft §5.2."""
    ctx = RaftNodeBuilder(local_id=1).with_unknown_leader(epoch=4).build()
    ctx.tick_until(lambda: ctx.node.role_name == "prospective")
    ctx.node.step(ctx.vote_response(2, 4, pre_vote=True), ctx.now_ms)
    assert ctx.node.role_name == "candidate" and ctx.node.epoch == 5
    rd = ctx.node.ready()
    assert rd.hard_state is not None and rd.hard_state.voted_for == 1 and rd.must_sync
    requests = only(list(rd.messages), VoteRequest)
    assert {r.destination for r in requests} == {2, 3} and not any(r.pre_vote for r in requests)
    ctx.node.advance(rd)


def test_candidate_with_majority_becomes_leader_and_announces_itself() -> None:
    ctx = RaftNodeBuilder(local_id=1).with_unknown_leader(epoch=1).build()
    ctx.become_leader()
    assert isinstance(ctx.node.role, Leader) and ctx.node.epoch == 2
    begins = only(ctx.sent, BeginQuorumEpochRequest)
    assert {b.destination for b in begins} == {2, 3}


def test_voter_grants_at_most_one_vote_per_epoch() -> None:
    """Raft §5.2: "Each server will vote for at most one candidate in a given term, on a
    first-come-first-served basis." Reference: Raft §5.2."""
    ctx = RaftNodeBuilder(local_id=1).with_unknown_leader(epoch=1).build()
    first = only(ctx.step(ctx.vote_request(2, 2)), VoteResponse)
    second = only(ctx.step(ctx.vote_request(3, 2)), VoteResponse)
    again = only(ctx.step(ctx.vote_request(2, 2)), VoteResponse)
    assert first[0].vote_granted and not second[0].vote_granted and again[0].vote_granted
    assert ctx.disk.hard_state.voted_for == 2


def test_vote_survives_a_restart() -> None:
    """Raft §5.2 / Figure 2: votedFor is persistent state, updated before responding."""
    ctx = RaftNodeBuilder(local_id=1).with_unknown_leader(epoch=1).build()
    ctx.step(ctx.vote_request(2, 2))
    ctx.restart()
    assert ctx.node.epoch == 2 and ctx.node.voted_for == 2
    assert not only(ctx.step(ctx.vote_request(3, 2)), VoteResponse)[0].vote_granted


def test_voter_rejects_a_candidate_whose_log_is_behind() -> None:
    """Raft §5.4.1: "If the logs have last entries with different terms, then the log with
    the later term is more up-to-date. If the logs end with the same term, then whichever
    log is longer is more up-to-date." Reference: Raft §5.4.1."""
    ctx = RaftNodeBuilder(local_id=1).with_log((1, 2), (2, 1)).with_unknown_leader(epoch=2).build()
    shorter = ctx.step(ctx.vote_request(2, 3, last_epoch=2, end_offset=2))
    older = ctx.step(ctx.vote_request(3, 3, last_epoch=1, end_offset=10))
    assert not only(shorter, VoteResponse)[0].vote_granted
    assert not only(older, VoteResponse)[0].vote_granted
    newer = ctx.step(ctx.vote_request(3, 4, last_epoch=3, end_offset=1))
    assert only(newer, VoteResponse)[0].vote_granted


def test_stale_vote_request_is_answered_with_fenced_leader_epoch() -> None:
    ctx = RaftNodeBuilder(local_id=1).with_elected_leader(epoch=5, leader=2).build()
    resp = only(ctx.step(ctx.vote_request(3, 4)), VoteResponse)[0]
    assert resp.error == ErrorCode.FENCED_LEADER_EPOCH and resp.epoch == 5 and resp.leader_id == 2


def test_vote_request_from_a_non_voter_is_answered_with_inconsistent_voter_set() -> None:
    ctx = RaftNodeBuilder(local_id=1).with_unknown_leader(epoch=1).build()
    resp = only(ctx.step(ctx.vote_request(9, 2)), VoteResponse)[0]
    assert resp.error == ErrorCode.INCONSISTENT_VOTER_SET and not resp.vote_granted


def test_follower_refuses_pre_votes_while_its_leader_answers_fetches() -> None:
    """KIP-996: a voter that has fetched from a live leader within the fetch timeout
    rejects pre-votes, so a partitioned node cannot disrupt the quorum."""
    ctx = RaftNodeBuilder(local_id=1).with_unknown_leader(epoch=1).build()
    sent = ctx.step(ctx.begin_quorum_epoch(2, 2))
    fetch = only(sent, FetchRequest)[0]
    ctx.step(ctx.fetch_response_to(fetch, high_watermark=0))
    pre = ctx.step(ctx.vote_request(3, 3, pre_vote=True))
    assert not only(pre, VoteResponse)[0].vote_granted
    assert ctx.node.epoch == 2  # a pre-vote changes nothing
    ctx.now_ms += ctx.config.fetch_timeout_ms
    late = ctx.step(ctx.vote_request(3, 3, pre_vote=True))
    assert only(late, VoteResponse)[0].vote_granted


def test_leader_resigns_when_no_majority_fetches_within_check_quorum_timeout() -> None:
    """KIP-595 check-quorum: a leader that no majority of voters has fetched from within
    1.5x the fetch timeout resigns."""
    ctx = RaftNodeBuilder(local_id=1).with_unknown_leader(epoch=1).build()
    ctx.become_leader()
    sent = ctx.tick(ctx.config.check_quorum_timeout_ms)
    assert isinstance(ctx.node.role, Resigned)
    assert {m.destination for m in only(sent, EndQuorumEpochRequest)} == {2, 3}


def test_leader_with_fetching_majority_stays_leader() -> None:
    ctx = RaftNodeBuilder(local_id=1).with_unknown_leader(epoch=1).build()
    ctx.become_leader()
    for _ in range(5):
        ctx.now_ms += ctx.config.fetch_timeout_ms // 2
        ctx.step(ctx.fetch_request(2, epoch=2, offset=0, last_epoch=0))
        ctx.tick()
    assert ctx.node.is_leader


def test_graceful_resign_names_successors_most_caught_up_first() -> None:
    ctx = RaftNodeBuilder(local_id=1).with_unknown_leader(epoch=1).build()
    ctx.become_leader()
    ctx.step(ctx.fetch_request(3, epoch=2, offset=1, last_epoch=2))
    ctx.step(ctx.fetch_request(2, epoch=2, offset=0, last_epoch=0))
    ctx.node.resign(ctx.now_ms)
    sent = ctx.drain()
    ends = only(sent, EndQuorumEpochRequest)
    assert ends and all(e.preferred_successors == (3, 2) for e in ends)
    with pytest.raises(NotLeaderError):
        ctx.node.resign(ctx.now_ms)


def test_first_preferred_successor_campaigns_at_once_after_end_quorum_epoch() -> None:
    ctx = RaftNodeBuilder(local_id=3).with_elected_leader(epoch=2, leader=1).build()
    end = EndQuorumEpochRequest(
        source=NodeId(1),
        destination=NodeId(3),
        epoch=Epoch(2),
        leader_id=NodeId(1),
        preferred_successors=(NodeId(3), NodeId(2)),
    )
    ctx.step(end)
    ctx.tick(0)
    assert ctx.node.role_name == "prospective"


def _follower_of_2(ctx: RaftTestContext) -> None:
    sent = ctx.step(ctx.begin_quorum_epoch(2, 2))
    ctx.step(ctx.fetch_response_to(only(sent, FetchRequest)[0], high_watermark=0))


def test_a_follower_whose_leader_s_connection_closed_campaigns_without_the_fetch_timeout() -> None:
    """A crashed leader's host closes its connections: the follower pre-votes in its turn
    (node 1 is first of the others: within ``election_backoff_max_ms``), not after the fetch
    timeout, and grants the other follower's pre-vote though it fetched a moment ago."""
    ctx = RaftNodeBuilder(local_id=1).with_unknown_leader(epoch=1).build()
    _follower_of_2(ctx)
    pre = ctx.step(ctx.vote_request(3, 3, pre_vote=True))
    assert not only(pre, VoteResponse)[0].vote_granted
    lost_at = ctx.now_ms
    ctx.node.peer_connection_lost(NodeId(2), ctx.now_ms)
    pre = ctx.step(ctx.vote_request(3, 3, pre_vote=True))
    assert only(pre, VoteResponse)[0].vote_granted
    before = len(ctx.sent)
    ctx.tick_until(lambda: any(isinstance(m, VoteRequest) for m in ctx.sent[before:]))
    assert ctx.node.role_name == "prospective"
    assert ctx.now_ms - lost_at <= ctx.config.election_backoff_max_ms
    assert ctx.node.epoch == 2 and ctx.config.election_backoff_max_ms < ctx.config.fetch_timeout_ms


def test_a_closed_connection_to_a_leader_that_still_answers_costs_no_epoch() -> None:
    """A false alarm: the others refuse the follower's pre-vote, it follows its leader again
    when the pre-vote round times out, and once a fetch succeeds it refuses pre-votes again."""
    ctx = RaftNodeBuilder(local_id=1).with_unknown_leader(epoch=1).build()
    _follower_of_2(ctx)
    ctx.node.peer_connection_lost(NodeId(3), ctx.now_ms)  # not the leader: nothing changes
    assert ctx.node.next_deadline_ms() > ctx.now_ms + ctx.config.election_backoff_max_ms
    ctx.node.peer_connection_lost(NodeId(2), ctx.now_ms)
    ctx.tick_until(lambda: ctx.node.role_name == "prospective")
    for voter in (2, 3):
        ctx.step(ctx.vote_response(voter, 2, pre_vote=True, granted=False, leader=2))
    before = len(ctx.sent)
    ctx.tick_until(lambda: any(isinstance(m, FetchRequest) for m in ctx.sent[before:]))
    assert ctx.node.role_name == "follower" and ctx.node.epoch == 2 and ctx.node.leader_id == 2
    fetch = only(ctx.sent[before:], FetchRequest)[-1]
    ctx.step(ctx.fetch_response_to(fetch, high_watermark=0))
    pre = ctx.step(ctx.vote_request(3, 3, pre_vote=True))
    assert not only(pre, VoteResponse)[0].vote_granted


def test_observer_never_campaigns_and_finds_the_leader_by_asking_a_voter() -> None:
    ctx = RaftNodeBuilder(local_id=9).build()
    sent = ctx.tick(10 * ctx.config.election_timeout_ms)
    assert ctx.node.role_name == "unattached"
    probe = only(sent, FetchRequest)[-1]
    assert probe.destination in {1, 2, 3}
    hint = FetchResponse(
        source=probe.destination,
        destination=NodeId(9),
        epoch=Epoch(3),
        correlation_id=probe.correlation_id,
        error=ErrorCode.NOT_LEADER_OR_FOLLOWER,
        leader_id=NodeId(2),
    )
    ctx.step(hint)
    assert ctx.node.role_name == "follower" and ctx.node.leader_id == 2 and ctx.node.epoch == 3


def test_single_voter_elects_itself() -> None:
    ctx = RaftNodeBuilder(local_id=1, voters={1}).build()
    ctx.tick_until(lambda: ctx.node.is_leader)
    assert ctx.node.epoch == 1
    ctx.node.propose([b"a"], ctx.now_ms)
    ctx.tick_until(lambda: ctx.node.high_watermark == 2)


def test_restarted_leader_comes_back_resigned() -> None:
    ctx = RaftNodeBuilder(local_id=1).with_unknown_leader(epoch=1).build()
    ctx.become_leader()
    ctx.restart()
    assert isinstance(ctx.node.role, Resigned) and ctx.node.epoch == 2


def test_higher_epoch_begin_quorum_epoch_makes_leader_follow() -> None:
    ctx = RaftNodeBuilder(local_id=1).with_unknown_leader(epoch=1).build()
    ctx.become_leader()
    ctx.step(ctx.begin_quorum_epoch(3, 7))
    assert ctx.node.role_name == "follower" and ctx.node.leader_id == 3 and ctx.node.epoch == 7
    assert ctx.disk.hard_state.epoch == 7 and ctx.disk.hard_state.leader_id == 3


def test_pre_vote_from_a_node_stuck_in_a_higher_epoch_moves_the_quorum_above_it() -> None:
    """Regression (sim seed 1577): a voter that lost a vote in epoch E+1 can neither fetch
    from the leader of E nor win a pre-vote while the others follow it; its pre-vote (for
    E+2) makes us move to E+1 so the quorum re-elects above it."""
    ctx = RaftNodeBuilder(local_id=1).with_unknown_leader(epoch=1).build()
    ctx.become_leader()  # epoch 2
    resp = only(
        ctx.step(ctx.vote_request(3, 4, last_epoch=2, end_offset=1, pre_vote=True)), VoteResponse
    )[0]
    assert ctx.node.role_name == "unattached" and ctx.node.epoch == 3
    assert resp.vote_granted and resp.epoch == 3
