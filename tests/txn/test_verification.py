"""KIP-890 part 1's pure core (`replication.txn.verification`): which batches a leader
verifies, the guard, the batching per coordinator broker, and the errors a Produce gets."""

from __future__ import annotations

from dataclasses import replace

from kraft.types import TopicPartition
from replication.txn.verification import (
    BatchFacts,
    VerificationBatcher,
    VerificationGuard,
    VerifyTxn,
    admit,
    plan_verification,
    produce_error,
    txn_offset_commit_error,
)
from storage.errors import ErrorCode

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def facts(*, pid: int = 7, epoch: int = 0, txn: bool = True, open_here: bool = False) -> BatchFacts:
    return BatchFacts(producer_id=pid, producer_epoch=epoch, transactional=txn, open_here=open_here)


def txn(tid: str = "a", epoch: int = 0, *tps: TopicPartition) -> VerifyTxn:
    return VerifyTxn(
        transactional_id=tid, producer_id=7, producer_epoch=epoch, partitions=frozenset(tps)
    )


def test_only_transactional_batches_with_no_transaction_open_here_are_verified() -> None:
    plan = plan_verification("a", {TP0: facts(), TP1: facts(open_here=True)})
    assert plan.verify == txn("a", 0, TP0) and not plan.refused
    assert plan_verification("a", {TP0: facts(txn=False)}).verify is None
    assert plan_verification("", {TP0: facts()}).verify is None  # the append's check refuses it


def test_two_producers_in_one_produce_are_refused_invalid_producer_id_mapping() -> None:
    plan = plan_verification("a", {TP0: facts(pid=1), TP1: facts(pid=2)})
    assert plan.refused == {
        TP0: ErrorCode.INVALID_PRODUCER_ID_MAPPING,
        TP1: ErrorCode.INVALID_PRODUCER_ID_MAPPING,
    }


def test_the_coordinators_answers_become_the_produce_errors_of_its_version() -> None:
    """Reference: Kafka 4's AddPartitionsToTxnManager and ReplicaManager.handleProduceAppend."""
    assert produce_error(ErrorCode.TRANSACTION_ABORTABLE, 11)[0] is ErrorCode.TRANSACTION_ABORTABLE
    assert produce_error(ErrorCode.TRANSACTION_ABORTABLE, 10)[0] is ErrorCode.INVALID_TXN_STATE
    assert produce_error(ErrorCode.TRANSACTION_ABORTABLE, -1)[0] is ErrorCode.INVALID_TXN_STATE
    assert produce_error(ErrorCode.PRODUCER_FENCED, 11)[0] is ErrorCode.INVALID_PRODUCER_EPOCH
    for retriable in (
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.NETWORK_EXCEPTION,
    ):
        assert produce_error(retriable, 9)[0] is ErrorCode.NOT_ENOUGH_REPLICAS
    assert produce_error(ErrorCode.NONE, 9) == (ErrorCode.NONE, "")


def test_a_marker_after_the_verification_voids_it_unless_the_transaction_is_open() -> None:
    guard = VerificationGuard(markers_seen=3)
    assert admit(open_here=False, guard=guard, markers_seen=3) is ErrorCode.NONE
    assert admit(open_here=False, guard=guard, markers_seen=4) is ErrorCode.INVALID_TXN_STATE
    assert admit(open_here=False, guard=None, markers_seen=0) is ErrorCode.INVALID_TXN_STATE
    assert admit(open_here=True, guard=None, markers_seen=9) is ErrorCode.NONE


def test_entries_for_one_broker_wait_for_the_request_in_flight_then_go_together() -> None:
    batcher = VerificationBatcher()
    t1, done = batcher.submit(1, txn("a", 0, TP0))
    assert done == []
    (first,) = batcher.poll()
    assert first.node == 1 and first.transactions == (txn("a", 0, TP0),)
    t2, _ = batcher.submit(1, txn("b", 0, TP0))
    t3, _ = batcher.submit(1, txn("c", 0, TP1))
    assert batcher.poll() == []  # one in flight per broker
    (answer,) = batcher.answered(1, {"a": {TP0: ErrorCode.NONE}})
    assert answer.ticket == t1 and answer.errors == {}
    (second,) = batcher.poll()
    assert [t.transactional_id for t in second.transactions] == ["b", "c"]
    answers = batcher.answered(
        1, {"b": {TP0: ErrorCode.TRANSACTION_ABORTABLE}, "c": {TP1: ErrorCode.NONE}}
    )
    assert {a.ticket: a.errors for a in answers} == {
        t2: {TP0: ErrorCode.TRANSACTION_ABORTABLE},
        t3: {},
    }


def test_same_epoch_entries_merge_and_a_newer_epoch_fences_the_older() -> None:
    batcher = VerificationBatcher()
    t1, _ = batcher.submit(1, txn("a", 0, TP0))
    t2, _ = batcher.submit(1, txn("a", 0, TP1))
    (out,) = batcher.poll()
    assert out.transactions == (txn("a", 0, TP0, TP1),)
    answers = batcher.answered(1, {"a": {TP0: ErrorCode.NONE, TP1: ErrorCode.NONE}})
    assert sorted(a.ticket for a in answers) == [t1, t2]
    old, _ = batcher.submit(2, txn("a", 0, TP0))
    _, done = batcher.submit(2, txn("a", 1, TP0))
    assert [(d.ticket, d.errors) for d in done] == [(old, {TP0: ErrorCode.INVALID_PRODUCER_EPOCH})]
    stale, done = batcher.submit(2, txn("a", 0, TP1))
    assert [(d.ticket, d.errors) for d in done] == [
        (stale, {TP1: ErrorCode.INVALID_PRODUCER_EPOCH})
    ]


def test_an_unknown_coordinator_or_a_failed_call_answers_retriable_errors() -> None:
    batcher = VerificationBatcher()
    t, done = batcher.submit(None, txn("a", 0, TP0))
    assert [(d.ticket, d.errors) for d in done] == [(t, {TP0: ErrorCode.COORDINATOR_NOT_AVAILABLE})]
    t, _ = batcher.submit(3, txn("a", 0, TP0))
    batcher.poll()
    (failed,) = batcher.answered(3, ErrorCode.NETWORK_EXCEPTION)
    assert failed.errors == {TP0: ErrorCode.NETWORK_EXCEPTION}


def test_a_version_2_produce_asks_to_add_and_an_add_merged_in_keeps_adding() -> None:
    """KIP-890 part 2: a Produce v12+ has its partitions added, not only verified."""
    plan = plan_verification("a", {TP0: facts()}, add=True)
    assert plan.verify is not None and plan.verify.add
    batcher = VerificationBatcher()
    batcher.submit(1, txn("a", 0, TP0))
    batcher.submit(1, replace(txn("a", 0, TP1), add=True))
    (out,) = batcher.poll()
    (merged,) = out.transactions
    assert merged.add and merged.partitions == {TP0, TP1}


def test_txn_offset_commit_v5_errors_of_the_implicit_join() -> None:
    assert txn_offset_commit_error(ErrorCode.CONCURRENT_TRANSACTIONS) is (
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    )
    assert txn_offset_commit_error(ErrorCode.PRODUCER_FENCED) is ErrorCode.INVALID_PRODUCER_EPOCH
    assert txn_offset_commit_error(ErrorCode.INVALID_TXN_STATE) is ErrorCode.INVALID_TXN_STATE
