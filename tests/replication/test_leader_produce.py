"""The leader's produce decisions: acks, min.insync.replicas, the acks=all purgatory, producer
sequence checks (Kafka's ``ReplicaManager.appendRecords`` and ``DelayedProduce``)."""

from __future__ import annotations

import pytest

from storage.config import LogConfig
from storage.errors import ErrorCode, KraftError
from tests.replication.builder import LAG_MS, LeaderContext
from tests.replication.harness import batch
from tests.storage.forged_batches import MALFORMED, good_batch


@pytest.mark.parametrize("acks", [2, -2, 3, 100])
def test_produce_with_acks_other_than_0_1_all_is_rejected(acks: int) -> None:
    ctx = LeaderContext()
    rid = ctx.produce(acks=acks)
    assert ctx.completions[rid].error_code is ErrorCode.INVALID_REQUIRED_ACKS
    assert ctx.log.log_end_offset == 0


def test_acks_all_is_rejected_before_append_when_isr_is_below_min_insync_replicas() -> None:
    """ "with ``all`` the leader answers once every ISR member has the batch and the ISR has at
    least min.insync.replicas members, else NOT_ENOUGH_REPLICAS" -- and nothing is appended."""
    ctx = LeaderContext(isr=(1,), min_isr=2)
    rid = ctx.produce(acks=-1)
    assert ctx.completions[rid].error_code is ErrorCode.NOT_ENOUGH_REPLICAS
    assert ctx.log.log_end_offset == 0


@pytest.mark.parametrize("acks", [0, 1])
def test_acks_0_and_1_are_appended_even_when_isr_is_below_min(acks: int) -> None:
    ctx = LeaderContext(isr=(1,), min_isr=2)
    rid = ctx.produce(acks=acks)
    assert ctx.completions[rid].error_code is ErrorCode.NONE
    assert ctx.completions[rid].base_offset == 0


def test_acks_1_is_answered_right_after_the_leader_append() -> None:
    ctx = LeaderContext()
    ctx.fill(2)
    rid = ctx.produce(acks=1)
    assert ctx.completions[rid].error_code is ErrorCode.NONE
    assert ctx.completions[rid].base_offset == 2


def test_acks_all_waits_until_every_isr_member_has_the_batch() -> None:
    ctx = LeaderContext(replicas=(1, 2, 3))
    rid = ctx.produce(acks=-1, count=3)
    assert rid not in ctx.completions
    ctx.fetch(2, 3)
    assert rid not in ctx.completions, "follower 3 does not have it yet"
    ctx.fetch(3, 2)
    assert rid not in ctx.completions
    ctx.fetch(3, 3)
    assert ctx.completions[rid].error_code is ErrorCode.NONE
    assert ctx.completions[rid].base_offset == 0
    assert ctx.high_watermark == 3


def test_acks_all_with_a_single_replica_isr_completes_at_once() -> None:
    ctx = LeaderContext(isr=(1,))
    rid = ctx.produce(acks=-1)
    assert ctx.completions[rid].error_code is ErrorCode.NONE


def test_acks_all_times_out_with_request_timed_out() -> None:
    ctx = LeaderContext()
    rid = ctx.produce(acks=-1, timeout_ms=500)
    ctx.tick(499)
    assert rid not in ctx.completions
    ctx.tick(1)
    assert ctx.completions[rid].error_code is ErrorCode.REQUEST_TIMED_OUT
    assert ctx.leader.waiting_produces == 0


def test_acks_all_fails_after_append_when_the_isr_shrinks_below_min_meanwhile() -> None:
    """NOT_ENOUGH_REPLICAS_AFTER_APPEND: appended, but the ISR shrank below
    min.insync.replicas before the batch was replicated."""
    ctx = LeaderContext(replicas=(1, 2, 3), min_isr=2)
    ctx.catch_up(2, 3)
    rid = ctx.produce(acks=-1, timeout_ms=5 * LAG_MS)
    ctx.tick(LAG_MS + 1)  # both followers lag: shrink to {1}
    assert ctx.alter_sends[-1].data.new_isr == (1,)
    assert rid not in ctx.completions, "the shrink is not committed yet"
    ctx.respond_alter()
    assert ctx.completions[rid].error_code is ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert ctx.log.log_end_offset == 1


def test_resigning_fails_waiting_produces_with_not_leader_or_follower() -> None:
    ctx = LeaderContext()
    rid = ctx.produce(acks=-1)
    assert not ctx.commit_metadata(leader=2, new_epoch=True)
    assert ctx.completions[rid].error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    later = ctx.produce(acks=1)
    assert ctx.completions[later].error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_produce_must_hold_exactly_one_batch() -> None:
    ctx = LeaderContext()
    two = batch(b"a") + batch(b"b")
    assert ctx.completions[ctx.produce(records=two)].error_code is ErrorCode.INVALID_RECORD
    torn = batch(b"a")[:-3]
    assert ctx.completions[ctx.produce(records=torn)].error_code is ErrorCode.INVALID_RECORD
    garbage = b"\x00" * 70
    assert ctx.completions[ctx.produce(records=garbage)].error_code is ErrorCode.CORRUPT_MESSAGE
    assert ctx.log.log_end_offset == 0


def test_append_failure_is_answered_with_the_storage_error() -> None:
    ctx = LeaderContext()
    from replication.core import PartitionProduce

    append = ctx.leader.handle_produce_request(
        PartitionProduce(request_id=7, acks=-1, timeout_ms=100, records=batch(b"x")), ctx.now_ms
    )
    assert append is not None and append.leader_epoch == 1
    ctx.leader.on_append_failed(7, ErrorCode.CORRUPT_MESSAGE, ctx.now_ms)
    ctx.drain()
    assert ctx.completions[7].error_code is ErrorCode.CORRUPT_MESSAGE
    assert ctx.leader.waiting_produces == 0


def test_duplicate_batch_is_answered_with_its_original_offset_and_not_appended() -> None:
    """KIP-98: a retry of a batch the log already has gets the first attempt's offsets."""
    ctx = LeaderContext(isr=(1,))
    first = ctx.produce(producer_id=9, producer_epoch=0, base_sequence=0, count=2)
    ctx.fill(1)
    retry = ctx.produce(producer_id=9, producer_epoch=0, base_sequence=0, count=2)
    assert ctx.completions[first].base_offset == 0
    assert ctx.completions[retry].error_code is ErrorCode.NONE
    assert ctx.completions[retry].base_offset == 0
    assert ctx.log.log_end_offset == 3


def test_duplicate_acks_all_still_waits_for_the_isr() -> None:
    ctx = LeaderContext(replicas=(1, 2))
    first = ctx.produce(producer_id=9, producer_epoch=0, base_sequence=0)
    retry = ctx.produce(producer_id=9, producer_epoch=0, base_sequence=0)
    assert first not in ctx.completions and retry not in ctx.completions
    ctx.catch_up(2)
    assert ctx.completions[retry].base_offset == 0
    assert ctx.completions[first].base_offset == 0


def test_sequence_gap_is_rejected_with_out_of_order_sequence_number() -> None:
    ctx = LeaderContext(isr=(1,))
    ctx.produce(producer_id=9, producer_epoch=0, base_sequence=0)
    gap = ctx.produce(producer_id=9, producer_epoch=0, base_sequence=2)
    assert ctx.completions[gap].error_code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert ctx.log.log_end_offset == 1


def test_older_producer_epoch_is_rejected_with_invalid_producer_epoch() -> None:
    ctx = LeaderContext(isr=(1,))
    ctx.produce(producer_id=9, producer_epoch=3, base_sequence=0)
    old = ctx.produce(producer_id=9, producer_epoch=2, base_sequence=1)
    assert ctx.completions[old].error_code is ErrorCode.INVALID_PRODUCER_EPOCH


def test_accepted_batches_update_the_producer_state_with_their_offsets() -> None:
    ctx = LeaderContext(isr=(1,))
    ctx.fill(2)
    ctx.produce(producer_id=9, producer_epoch=0, base_sequence=0, count=3)
    entry = ctx.producer_state.entry(9)
    assert entry is not None
    assert (entry.batches[-1].first_offset, entry.batches[-1].last_offset) == (2, 4)
    assert entry.last_sequence == 2


@pytest.mark.parametrize(
    ("kind", "records", "error"), MALFORMED, ids=[kind for kind, _, _ in MALFORMED]
)
def test_malformed_batch_is_answered_with_its_error_and_nothing_is_appended(
    kind: str, records: bytes, error: type[KraftError]
) -> None:
    """Issue 10, finding 3: CRC-valid but malformed batches were acknowledged with acks=all."""
    ctx = LeaderContext(isr=(1,))
    rid = ctx.produce(acks=-1, records=records)
    assert ctx.completions[rid].error_code is error.code
    assert ctx.log.log_end_offset == 0
    assert not ctx.producer_state.entries
    after = ctx.produce(acks=-1, records=good_batch())
    assert ctx.completions[after].error_code is ErrorCode.NONE
    assert ctx.completions[after].base_offset == 0


def test_the_leader_validates_against_the_topics_log_config_and_takes_changes_live() -> None:
    ctx = LeaderContext(isr=(1,))
    big = batch(b"x" * 500)
    assert ctx.completions[ctx.produce(acks=1, records=big)].error_code is ErrorCode.NONE
    ctx.leader.update_log_config(
        LogConfig(max_message_bytes=len(big) - 1, message_timestamp_after_max_ms=1_000)
    )
    assert ctx.completions[ctx.produce(acks=1, records=big)].error_code is (
        ErrorCode.MESSAGE_TOO_LARGE
    )
    future = batch(b"x", timestamp_ms=ctx.now_ms + 1_001)
    assert ctx.completions[ctx.produce(acks=1, records=future)].error_code is (
        ErrorCode.INVALID_TIMESTAMP
    )
    assert ctx.log.log_end_offset == 1


def test_a_topic_compression_type_makes_the_leader_recompress_keeping_producer_fields() -> None:
    """Kafka's LogValidator: a topic whose ``compression.type`` is not ``producer`` stores each
    batch in its codec; the sequence check and offsets work on the same header fields."""
    from storage.compression import Compression
    from storage.records import SimpleRecord, build_batch, iter_records, validate_batch

    ctx = LeaderContext(isr=(1,))
    ctx.leader.update_log_config(LogConfig.from_properties({"compression.type": "gzip"}))
    records = build_batch(
        [SimpleRecord(key=b"k", value=b"v" * 100)] * 3,
        timestamp_ms=ctx.now_ms,
        compression=Compression.LZ4,
        producer_id=5,
        producer_epoch=0,
        base_sequence=0,
    )
    rid = ctx.produce(acks=1, records=records)
    assert ctx.completions[rid].error_code is ErrorCode.NONE
    stored = ctx.log.read(0)
    header = validate_batch(stored)
    assert header.compression is Compression.GZIP
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (5, 0, 0)
    assert [r.value for r in iter_records(stored)] == [b"v" * 100] * 3
    again = ctx.produce(acks=1, records=records)  # the same sequence: a duplicate
    assert ctx.completions[again].base_offset == 0
    assert ctx.log.log_end_offset == 3


def test_a_compacted_topic_refuses_a_record_without_a_key() -> None:
    """Kafka's LogValidator: "Compacted topic cannot accept message without key"."""
    from storage.records import SimpleRecord, build_batch

    ctx = LeaderContext(isr=(1,))
    ctx.leader.update_log_config(LogConfig.from_properties({"cleanup.policy": "compact"}))
    keyless = build_batch(
        [SimpleRecord(key=b"k", value=b"v"), SimpleRecord(key=None, value=b"v")],
        timestamp_ms=ctx.now_ms,
    )
    rid = ctx.produce(acks=1, records=keyless)
    assert ctx.completions[rid].error_code is ErrorCode.INVALID_RECORD
    assert ctx.log.log_end_offset == 0
    keyed = build_batch([SimpleRecord(key=b"k", value=b"v")], timestamp_ms=ctx.now_ms)
    assert ctx.completions[ctx.produce(acks=1, records=keyed)].error_code is ErrorCode.NONE
