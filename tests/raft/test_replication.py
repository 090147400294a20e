"""KIP-595 pull replication: fetch validation, divergence, the high watermark, proposals."""

from __future__ import annotations

import pytest

from kraft.raft import (
    DivergingEpoch,
    FetchRequest,
    FetchResponse,
    NotLeaderError,
    SnapshotId,
    UnsafeOptions,
    parse_leader_change,
)
from kraft.types import Epoch, NodeId, Offset
from storage.errors import ErrorCode
from storage.records import build_batch, read_header, record_values
from tests.raft.builder import RaftNodeBuilder, RaftTestContext, batch

only = RaftTestContext.only


def leader_at_epoch_2(**kw: object) -> RaftTestContext:
    builder = RaftNodeBuilder(local_id=1).with_log((1, 3)).with_unknown_leader(epoch=1)
    if kw.get("unsafe"):
        builder = builder.with_unsafe(kw["unsafe"])  # type: ignore[arg-type]
    ctx = builder.build()
    ctx.become_leader()
    return ctx


def test_new_leader_opens_its_epoch_with_a_leader_change_batch() -> None:
    """Raft thesis §6.4: a leader commits a blank no-op entry at the start of its term."""
    ctx = leader_at_epoch_2()
    last = ctx.disk.read(Offset(3), Offset(4), 1 << 20)[0]
    header = read_header(last)
    assert header.is_control and header.partition_leader_epoch == 2 and header.base_offset == 3
    change = parse_leader_change(last)
    assert change is not None and change.leader_id == 1 and change.voters == (1, 2, 3)


def test_high_watermark_waits_for_a_majority_past_the_epoch_start() -> None:
    """Raft §5.4.2: "Only log entries from the leader's current term are committed by
    counting replicas." KIP-595: the high watermark moves once a majority of voters has
    fetched past the leader's epoch start offset. Reference: Raft §5.4.2."""
    ctx = leader_at_epoch_2()
    assert ctx.node.high_watermark == 0
    ctx.step(ctx.fetch_request(2, epoch=2, offset=3, last_epoch=1))  # all old entries
    assert ctx.node.high_watermark == 0
    ctx.step(ctx.fetch_request(2, epoch=2, offset=4, last_epoch=2))  # past the epoch start
    assert ctx.node.high_watermark == 4
    assert [read_header(b).base_offset for b in ctx.committed] == [0, 1, 2, 3]


def test_leader_answers_the_epoch_end_offset_when_the_follower_diverges() -> None:
    """KIP-595: the leader returns the largest epoch <= the follower's last fetched epoch
    and its end offset, so the follower can truncate."""
    ctx = leader_at_epoch_2()
    resp = only(ctx.step(ctx.fetch_request(2, epoch=2, offset=5, last_epoch=1)), FetchResponse)[0]
    assert resp.diverging_epoch == DivergingEpoch(Epoch(1), Offset(3)) and not resp.batches
    resp = only(ctx.step(ctx.fetch_request(3, epoch=2, offset=2, last_epoch=1)), FetchResponse)[0]
    assert resp.diverging_epoch is None and len(resp.batches) == 2


def test_follower_truncates_to_the_leaders_epoch_end_and_refetches() -> None:
    """KIP-101: truncate to the leader's epoch end offset, not to our high watermark."""
    ctx = (
        RaftNodeBuilder(local_id=2).with_log((1, 2), (3, 3)).with_elected_leader(epoch=4, leader=1)
    ).build()
    fetch = only(ctx.tick(), FetchRequest)[0]
    assert (fetch.fetch_offset, fetch.last_fetched_epoch) == (5, 3)
    sent = ctx.step(
        ctx.fetch_response_to(fetch, diverging_epoch=DivergingEpoch(Epoch(2), Offset(3)))
    )
    assert ctx.node.log_end_offset == 2  # min(3, our end of epoch <= 2, which is 2)
    refetch = only(sent, FetchRequest)[0]
    assert (refetch.fetch_offset, refetch.last_fetched_epoch) == (2, 1)
    assert ctx.disk.log_end_offset() == 2


def test_follower_acks_only_durable_batches() -> None:
    """The next fetch offset is the follower's acknowledgement (KIP-595), so it may leave
    only once what it acknowledges is synced: it rides the Ready that carries the entries,
    among the messages sent after the sync (never the early ones), so one fsync serves both."""
    ctx = RaftNodeBuilder(local_id=2).with_elected_leader(epoch=1, leader=1).build()
    fetch = only(ctx.tick(), FetchRequest)[0]
    ctx.node.step(
        ctx.fetch_response_to(fetch, batches=(batch(1, 0), batch(1, 1)), high_watermark=0),
        ctx.now_ms,
    )
    rd = ctx.node.ready()
    assert len(rd.entries) == 2 and rd.must_sync and rd.entries_end_offset == 2
    assert not only(list(rd.early_messages), FetchRequest)
    (nxt,) = only(list(rd.messages), FetchRequest)  # sent by the shell after the sync
    assert nxt.fetch_offset == 2


def test_a_fetch_never_acknowledges_entries_outside_its_ready() -> None:
    """Entries that arrive while a Ready is being persisted are acknowledged by a fetch in
    the next Ready, the one that carries them."""
    ctx = RaftNodeBuilder(local_id=2).with_elected_leader(epoch=1, leader=1).build()
    fetch = only(ctx.tick(), FetchRequest)[0]
    ctx.node.step(ctx.fetch_response_to(fetch, batches=(batch(1, 0),)), ctx.now_ms)
    first = ctx.node.ready()
    (ack1,) = only(list(first.messages), FetchRequest)
    ctx.node.step(ctx.fetch_response_to(ack1, batches=(batch(1, 1),)), ctx.now_ms)  # meanwhile
    ctx.disk.write_ready(first)
    ctx.disk.sync()
    ctx.node.advance(first)
    second = ctx.node.ready()
    (ack2,) = only(list(second.messages), FetchRequest)
    assert ack1.fetch_offset == 1 and first.entries_end_offset == 1
    assert ack2.fetch_offset == 2 and second.entries_end_offset == 2


def test_follower_learns_the_high_watermark_capped_by_its_log_end() -> None:
    ctx = RaftNodeBuilder(local_id=2).with_elected_leader(epoch=1, leader=1).build()
    fetch = only(ctx.tick(), FetchRequest)[0]
    ctx.step(ctx.fetch_response_to(fetch, batches=(batch(1, 0),), high_watermark=5))
    assert ctx.node.high_watermark == 1


def test_fetch_below_the_log_start_is_answered_with_the_snapshot_id() -> None:
    """KIP-630: a fetcher behind the log start offset loads the latest snapshot."""
    ctx = leader_at_epoch_2()
    ctx.step(ctx.fetch_request(2, epoch=2, offset=4, last_epoch=2))
    sid = ctx.node.snapshot_id_at(4)
    ctx.disk.save_snapshot(sid, b"state")
    ctx.disk.sync()
    ctx.node.snapshot_taken(sid)
    ctx.drain()
    assert ctx.node.log_start_offset == 4 and ctx.disk.log_start_offset() == 4
    resp = only(ctx.step(ctx.fetch_request(3, epoch=2, offset=1, last_epoch=1)), FetchResponse)[0]
    assert resp.snapshot_id == SnapshotId(Offset(4), Epoch(2))


def test_stale_fetch_gets_fenced_and_learns_the_leader() -> None:
    ctx = leader_at_epoch_2()
    resp = only(ctx.step(ctx.fetch_request(2, epoch=1, offset=0, last_epoch=0)), FetchResponse)[0]
    assert resp.error == ErrorCode.FENCED_LEADER_EPOCH and resp.leader_id == 1 and resp.epoch == 2


def test_fetch_to_a_follower_is_answered_with_the_leader_hint() -> None:
    ctx = RaftNodeBuilder(local_id=2).with_elected_leader(epoch=3, leader=1).build()
    resp = only(ctx.step(ctx.fetch_request(9, epoch=3, offset=0, last_epoch=0)), FetchResponse)[0]
    assert resp.error == ErrorCode.NOT_LEADER_OR_FOLLOWER and resp.leader_id == 1


def test_propose_on_a_follower_raises_not_leader_error_with_the_hint() -> None:
    ctx = RaftNodeBuilder(local_id=2).with_elected_leader(epoch=3, leader=1).build()
    with pytest.raises(NotLeaderError) as info:
        ctx.node.propose([b"x"], ctx.now_ms)
    assert info.value.leader_id == 1 and info.value.epoch == 3
    assert info.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_proposals_linger_into_one_batch_with_consecutive_offsets() -> None:
    ctx = leader_at_epoch_2()
    first = ctx.node.propose([b"a", b"b"], ctx.now_ms)
    second = ctx.node.propose([b"c"], ctx.now_ms)
    assert (first, second) == (4, 6)
    assert not ctx.drain() or ctx.node.log_end_offset == 4  # still lingering
    ctx.tick(ctx.config.append_linger_ms)
    batches = ctx.disk.read(Offset(4), Offset(7), 1 << 20)
    assert len(batches) == 1 and record_values(batches[0]) == [b"a", b"b", b"c"]
    assert read_header(batches[0]).partition_leader_epoch == 2


def test_caught_up_fetch_is_parked_until_new_data_arrives() -> None:
    ctx = leader_at_epoch_2()
    ctx.step(ctx.fetch_request(2, epoch=2, offset=4, last_epoch=2))
    hw = ctx.node.high_watermark
    parked = ctx.step(
        ctx.fetch_request(2, epoch=2, offset=4, last_epoch=2, high_watermark=hw, max_wait_ms=50)
    )
    assert not only(parked, FetchResponse)
    ctx.node.propose([b"new"], ctx.now_ms)
    answered = only(ctx.tick(ctx.config.append_linger_ms), FetchResponse)
    assert answered and len(answered[0].batches) == 1


def test_checker_hook_commit_without_majority_is_off_by_default() -> None:
    ctx = leader_at_epoch_2(unsafe=UnsafeOptions(commit_without_majority=True))
    assert ctx.node.high_watermark == 4  # the deliberate bug: committed on the leader alone
    assert leader_at_epoch_2().node.high_watermark == 0


def test_malformed_batches_in_a_fetch_response_are_dropped_not_raised() -> None:
    ctx = RaftNodeBuilder(local_id=2).with_elected_leader(epoch=1, leader=1).build()
    fetch = only(ctx.tick(), FetchRequest)[0]
    ctx.step(ctx.fetch_response_to(fetch, batches=(b"garbage",), high_watermark=0))
    assert ctx.node.log_end_offset == 0
    assert NodeId(2) == ctx.id


def test_propose_batch_keeps_the_producer_headers_and_assigns_offset_and_epoch() -> None:
    """A quorum-mode partition's entries are the producers' own batches: propose_batch
    rewrites only the base offset and the partition leader epoch, after pending proposals."""

    ctx = leader_at_epoch_2()
    produced = build_batch(
        [b"p", b"q"],
        timestamp_ms=5,
        base_offset=0,
        partition_leader_epoch=-1,
        producer_id=77,
        producer_epoch=3,
        base_sequence=10,
    )
    ctx.node.propose([b"pending"], ctx.now_ms)
    base = ctx.node.propose_batch(produced, ctx.now_ms)
    ctx.drain()
    assert base == 5
    stored = ctx.disk.read(Offset(5), Offset(7), 1 << 20)[0]
    header = read_header(stored)
    assert (header.base_offset, header.partition_leader_epoch) == (5, 2)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 3, 10)
    assert record_values(stored) == [b"p", b"q"]


def test_propose_batch_on_a_follower_raises_not_leader_error() -> None:

    ctx = RaftNodeBuilder(local_id=2).with_elected_leader(epoch=3, leader=1).build()
    with pytest.raises(NotLeaderError):
        ctx.node.propose_batch(build_batch([b"x"], timestamp_ms=0), ctx.now_ms)
