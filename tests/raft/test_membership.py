"""KIP-853 dynamic quorums in the Raft core: the voter set in the log, AddVoter, RemoveVoter."""

from __future__ import annotations

import pytest

from kraft.raft import DivergingEpoch, FetchRequest
from kraft.raft.voters import (
    VoterHistory,
    build_voters_batch,
    decode_voters,
    encode_voters,
    frame_snapshot,
    parse_voters_batch,
    split_snapshot,
)
from kraft.types import Epoch, NodeId, Offset
from storage.errors import (
    CorruptRecordError,
    DuplicateVoterError,
    InvalidRequestError,
    RequestTimedOutError,
    VoterNotFoundError,
)
from tests.raft.builder import RaftNodeBuilder, RaftTestContext, batch

N1, N2, N3 = NodeId(1), NodeId(2), NodeId(3)


def _single_voter_leader() -> RaftTestContext:
    """Node 1, the only configured voter, leading with its epoch committed."""
    ctx = RaftNodeBuilder(local_id=1, voters={1}, dynamic_voters=True).build()
    ctx.tick_until(lambda: ctx.node.is_leader)
    ctx.drain()
    assert ctx.node.high_watermark > ctx.node.raft_log.epoch_start_offsets()[-1][1]
    return ctx


def _fetch(ctx: RaftTestContext, source: int, offset: int) -> FetchRequest:
    return ctx.fetch_request(
        source,
        epoch=ctx.node.epoch,
        offset=offset,
        last_epoch=ctx.node.raft_log.epoch_for_offset(offset - 1) if offset else 0,
    )


def _add_caught_up(ctx: RaftTestContext, voter: int) -> Offset:
    ctx.step(_fetch(ctx, voter, ctx.node.high_watermark))
    offset = ctx.node.add_voter(NodeId(voter), f"host{voter}:9093", ctx.now_ms)
    ctx.drain()
    return offset


def test_voters_record_round_trips_and_bad_bytes_are_a_typed_error() -> None:
    voters = {N1: "a:1", N3: "c:3"}
    assert decode_voters(encode_voters(voters)) == voters
    b = build_voters_batch(epoch=Epoch(2), voters=voters, base_offset=Offset(5), now_ms=0)
    assert parse_voters_batch(b) == voters
    assert parse_voters_batch(batch(1, 0)) is None
    with pytest.raises(CorruptRecordError):
        decode_voters(encode_voters(voters)[:-2])
    with pytest.raises(CorruptRecordError):
        decode_voters(b"\x00\x00\x7f\xff\xff\xff")
    framed = frame_snapshot(voters, b"app")
    assert split_snapshot(framed) == (voters, b"app")
    assert split_snapshot(b"app") == (None, b"app")
    with pytest.raises(CorruptRecordError):
        split_snapshot(framed[:20])


def test_the_latest_voter_set_in_the_log_is_used_and_a_truncation_goes_back() -> None:
    h = VoterHistory(frozenset({N1}))
    assert h.ids == {N1} and not h.from_log and h.latest_offset == -1
    h.append(10, {N1: "", N2: ""})
    h.append(20, {N1: "", N2: "", N3: ""})
    assert h.ids == {N1, N2, N3} and h.previous_ids == {N1, N2}
    assert h.at(15) == {N1: "", N2: ""} and h.at(10) is None
    h.truncate(20)
    assert h.ids == {N1, N2} and h.latest_offset == 10
    h.advance_start(12)  # a snapshot past the record: it becomes the base set
    assert h.ids == {N1, N2} and h.latest_offset == -1 and h.from_log
    h.reset(None)
    assert h.ids == {N1}


def test_a_log_without_a_voters_record_uses_the_configured_voters() -> None:
    ctx = RaftNodeBuilder(local_id=1, voters={1, 2, 3}, dynamic_voters=True).build()
    assert ctx.node.voters == {N1, N2, N3}
    ctx.restart()
    assert ctx.node.voters == {N1, N2, N3}


def test_a_static_voter_set_refuses_changes() -> None:
    ctx = RaftNodeBuilder(local_id=1, voters={1}).build()
    ctx.tick_until(lambda: ctx.node.is_leader)
    ctx.drain()
    with pytest.raises(InvalidRequestError, match="static"):
        ctx.node.add_voter(N2, "", ctx.now_ms)


def test_add_voter_waits_for_the_new_node_to_catch_up_as_an_observer() -> None:
    ctx = _single_voter_leader()
    with pytest.raises(RequestTimedOutError, match="never fetched"):
        ctx.node.add_voter(N2, "h:1", ctx.now_ms)
    ctx.step(_fetch(ctx, 2, 0))
    with pytest.raises(RequestTimedOutError, match="not caught up"):
        ctx.node.add_voter(N2, "h:1", ctx.now_ms)
    offset = _add_caught_up(ctx, 2)
    assert ctx.node.voters == {N1, N2}
    assert ctx.node.voter_endpoints[N2] == "host2:9093"
    # The new majority (both) must have the record before it commits.
    assert ctx.node.high_watermark <= offset
    ctx.step(_fetch(ctx, 2, ctx.node.log_end_offset))
    assert ctx.node.high_watermark > offset


def test_one_change_at_a_time_and_duplicates_and_unknown_voters_are_refused() -> None:
    ctx = _single_voter_leader()
    _add_caught_up(ctx, 2)
    ctx.step(_fetch(ctx, 3, ctx.node.high_watermark))
    with pytest.raises(RequestTimedOutError, match="another voter change"):
        ctx.node.add_voter(N3, "", ctx.now_ms)
    ctx.step(_fetch(ctx, 2, ctx.node.log_end_offset))  # commits {1, 2}
    with pytest.raises(DuplicateVoterError):
        ctx.node.add_voter(N2, "", ctx.now_ms)
    with pytest.raises(VoterNotFoundError):
        ctx.node.remove_voter(N3, ctx.now_ms)
    ctx.node.remove_voter(N2, ctx.now_ms)
    ctx.drain()
    assert ctx.node.voters == {N1}
    with pytest.raises(InvalidRequestError, match="last voter"):
        ctx.node.remove_voter(N1, ctx.now_ms + 1)


def test_a_leader_changes_voters_only_after_committing_in_its_own_epoch() -> None:
    ctx = RaftNodeBuilder(local_id=1, voters={1, 2}, dynamic_voters=True).build()
    ctx.become_leader()
    ctx.drain()
    ctx.step(_fetch(ctx, 3, 0))
    with pytest.raises(RequestTimedOutError, match="not committed in its epoch"):
        ctx.node.add_voter(N3, "", ctx.now_ms)


def test_a_follower_takes_the_voter_set_from_the_log_and_reverts_on_truncation() -> None:
    ctx = RaftNodeBuilder(local_id=2, voters={1, 2}, dynamic_voters=True).build()
    ctx.step(ctx.begin_quorum_epoch(1, 1))
    req = ctx.only(ctx.sent, FetchRequest)[-1]
    record = build_voters_batch(
        epoch=Epoch(1), voters={N1: "", N2: "", N3: ""}, base_offset=Offset(1), now_ms=0
    )
    ctx.step(ctx.fetch_response_to(req, batches=(batch(1, 0), record), high_watermark=0))
    assert ctx.node.voters == {N1, N2, N3}  # uncommitted, and in use
    ctx.restart(voters=frozenset({N1, N2}))
    assert ctx.node.voters == {N1, N2, N3}  # read back from the log on start
    ctx.step(ctx.begin_quorum_epoch(1, 2))
    req = ctx.only(ctx.sent, FetchRequest)[-1]
    ctx.step(ctx.fetch_response_to(req, diverging_epoch=DivergingEpoch(Epoch(1), Offset(1))))
    assert ctx.node.log_end_offset == 1
    assert ctx.node.voters == {N1, N2}  # the record was cut: back to the configured set


def test_a_removed_leader_resigns_once_the_removal_commits() -> None:
    ctx = _single_voter_leader()
    _add_caught_up(ctx, 2)
    ctx.step(_fetch(ctx, 2, ctx.node.log_end_offset))
    offset = ctx.node.remove_voter(N1, ctx.now_ms)
    ctx.drain()
    assert ctx.node.voters == {N2} and ctx.node.is_leader  # leads until the record commits
    ctx.step(_fetch(ctx, 2, ctx.node.log_end_offset))
    assert ctx.node.high_watermark > offset
    assert ctx.node.role_name == "resigned"
    ctx.tick_until(lambda: ctx.node.role_name == "unattached")  # an observer from now on


def test_a_one_voter_leader_that_adds_a_voter_does_not_resign_on_a_stale_check_quorum() -> None:
    ctx = _single_voter_leader()
    ctx.tick(10 * ctx.config.check_quorum_timeout_ms)  # alone: check-quorum does not apply
    assert ctx.node.is_leader
    _add_caught_up(ctx, 2)
    ctx.tick(1)
    assert ctx.node.is_leader  # the new voter gets a full check-quorum period to fetch
    ctx.tick(ctx.config.check_quorum_timeout_ms)
    assert ctx.node.role_name == "resigned"  # and then it must have fetched
