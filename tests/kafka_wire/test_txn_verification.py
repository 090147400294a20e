"""KIP-890 part 1 against the shared kraft 3+3 cluster: a transactional Produce for a partition
the producer never added to its transaction (no AddPartitionsToTxn) is refused by the leader,
which asked the coordinator, and leaves no open transaction there: the last stable offset does
not hang. The commit, abort and fencing tests of `test_transactions_cluster` run librdkafka's
producer through the same verification (their partitions are added first, so it passes)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import confluent_kafka
import pytest

from kraft.cluster import LocalCluster
from storage.errors import ErrorCode
from storage.records import build_batch
from tests.kafka_wire.test_transactions_cluster import describe, new_topic, offset_fetch, producer
from tests.kafka_wire.wire import call

pytestmark = [pytest.mark.process, pytest.mark.timeout(120)]


def _produce(
    cluster: LocalCluster, version: int, tid: str, topic: str, batch: bytes
) -> list[tuple[int, Any]]:
    """(broker, partition answer) from every broker: the leader's is the one not refused
    NOT_LEADER_OR_FOLLOWER."""
    body = {
        "transactional_id": tid,
        "acks": -1,
        "timeout": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    }
    out = []
    for b in cluster.broker_ids:
        answer = call(cluster.kafka_addresses[b], 0, version, body)
        for r in answer.responses:
            out.extend((b, p) for p in r.partition_responses)
    return [(b, p) for b, p in out if p.error_code != ErrorCode.NOT_LEADER_OR_FOLLOWER]


def _transactional_batch(state: Any, value: bytes) -> bytes:
    """The first batch of ``state``'s producer (a DescribeTransactions answer)."""
    return build_batch(
        [value],
        timestamp_ms=int(time.time() * 1000),
        producer_id=state.producer_id,
        producer_epoch=state.producer_epoch,
        base_sequence=0,
        is_transactional=True,
    )


def _open_transactions(cluster: LocalCluster, leader: int, topic: str) -> list[int]:
    request = {"topics": [{"name": topic, "partition_indexes": [0]}]}
    answer = call(cluster.kafka_addresses[leader], 61, 0, request)
    return [
        s.current_txn_start_offset
        for t in answer.topics
        for p in t.partitions
        for s in p.active_producers
        if s.current_txn_start_offset >= 0
    ]


def _latest(cluster: LocalCluster, leader: int, topic: str, isolation: int) -> int:
    request = {
        "replica_id": -1,
        "isolation_level": isolation,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    }
    answer = call(cluster.kafka_addresses[leader], 2, 5, request)
    return int(answer.topics[0].partitions[0].offset)


@pytest.mark.parametrize(
    ("version", "refused_with"),
    [(9, ErrorCode.INVALID_TXN_STATE), (11, ErrorCode.TRANSACTION_ABORTABLE)],
)
def test_a_batch_for_a_partition_not_in_the_transaction_is_refused_and_leaves_nothing_open(
    cluster: LocalCluster, version: int, refused_with: ErrorCode
) -> None:
    topic = new_topic(cluster, "verify")
    tid = f"verify-{uuid.uuid4().hex[:8]}"
    owner = producer(cluster, tid)  # the id's producer id and epoch, at its coordinator
    try:
        (state,) = describe(cluster, tid)
        batch = _transactional_batch(state, b"hanging")
        ((leader, answer),) = _produce(cluster, version, tid, topic, batch)
        assert answer.error_code == refused_with
        assert _open_transactions(cluster, leader, topic) == []
        # The last stable offset is the high watermark: nothing hangs read_committed.
        assert _latest(cluster, leader, topic, 1) == _latest(cluster, leader, topic, 0) == 0
        # The producer's own transaction, through AddPartitionsToTxn, still works.
        owner.begin_transaction()
        owner.produce(topic, value=b"ok", partition=0)
        owner.commit_transaction(30)
        deadline = time.monotonic() + 20
        while _latest(cluster, leader, topic, 1) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _latest(cluster, leader, topic, 1) == 2  # the record and its marker
    finally:
        del owner


def test_a_produce_verified_by_the_coordinator_opens_the_transaction(
    cluster: LocalCluster,
) -> None:
    """The same forged batch, after AddPartitionsToTxn: verified, appended, open (and the
    coordinator's timeout or the next InitProducerId aborts it)."""
    topic = new_topic(cluster, "verified")
    tid = f"verified-{uuid.uuid4().hex[:8]}"
    owner = producer(cluster, tid)
    try:
        (state,) = describe(cluster, tid)
        add = {
            "v3_and_below_transactional_id": tid,
            "v3_and_below_producer_id": state.producer_id,
            "v3_and_below_producer_epoch": state.producer_epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": [0]}],
        }
        codes = {
            p.partition_error_code
            for b in cluster.broker_ids
            for t in call(cluster.kafka_addresses[b], 24, 3, add).results_by_topic_v3_and_below
            for p in t.results_by_partition
        }
        assert ErrorCode.NONE in codes
        batch = _transactional_batch(state, b"verified")
        ((leader, answer),) = _produce(cluster, 11, tid, topic, batch)
        assert answer.error_code == ErrorCode.NONE
        assert _open_transactions(cluster, leader, topic) == [0]
    finally:
        fresh = confluent_kafka.Producer(
            {"bootstrap.servers": cluster.kafka_bootstrap, "transactional.id": tid, "log_level": 3}
        )
        fresh.init_transactions(30)  # aborts the open transaction (a newer epoch)
        del owner, fresh


def _at_coordinator(cluster: LocalCluster, api_key: int, version: int, body: Any) -> Any:
    """The answer of the broker that is the coordinator (the others: NOT_COORDINATOR)."""
    for b in cluster.broker_ids:
        answer = call(cluster.kafka_addresses[b], api_key, version, body)
        codes = [int(getattr(answer, "error_code", 0))] + [
            int(p.error_code) for t in getattr(answer, "topics", ()) for p in t.partitions
        ]
        if ErrorCode.NOT_COORDINATOR not in codes:
            return answer
    raise AssertionError(f"no coordinator answered API {api_key}")


def test_a_txn_offset_commit_after_its_transaction_ended_is_refused_and_leaves_nothing_pending(
    cluster: LocalCluster,
) -> None:
    """A version-1 client's TxnOffsetCommit (v3, after AddOffsetsToTxn) that reaches the group
    coordinator only after the transaction was aborted (a request held up by a paused
    coordinator and retried, as `kraft nemesis --network netns --workload txn` ran into) is
    refused: the coordinator verifies the transaction first (KIP-890 part 1, as Kafka's
    ``scheduleTransactionalWriteOperation`` does). Accepted, its offsets would stay pending with
    no marker to end them, and an OffsetFetch with ``require_stable`` (librdkafka's
    ``committed()``) would answer UNSTABLE_OFFSET_COMMIT for ever."""
    topic = new_topic(cluster, "late-offsets")
    tid, group = f"late-{uuid.uuid4().hex[:8]}", f"late-{uuid.uuid4().hex[:8]}"
    owner = producer(cluster, tid)
    try:
        deadline = time.monotonic() + 20  # FindCoordinator makes __consumer_offsets
        while call(
            cluster.kafka_addresses[cluster.broker_ids[0]], 10, 3, {"key": group, "key_type": 0}
        ).error_code:
            assert time.monotonic() < deadline, "no group coordinator"
            time.sleep(0.1)
        (state,) = describe(cluster, tid)
        ids = {
            "transactional_id": tid,
            "producer_id": state.producer_id,
            "producer_epoch": state.producer_epoch,
        }
        added = _at_coordinator(cluster, 25, 3, {**ids, "group_id": group})
        assert added.error_code == ErrorCode.NONE
        ended = _at_coordinator(cluster, 26, 3, {**ids, "committed": False})
        assert ended.error_code == ErrorCode.NONE
        deadline = time.monotonic() + 20
        while describe(cluster, tid)[0].transaction_state != "CompleteAbort":
            assert time.monotonic() < deadline, describe(cluster, tid)
            time.sleep(0.05)
        commit = {
            **ids,
            "group_id": group,
            "generation_id": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 5,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                    ],
                }
            ],
        }
        answer = _at_coordinator(cluster, 28, 3, commit)
        (partition,) = answer.topics[0].partitions
        assert partition.error_code == ErrorCode.INVALID_TXN_STATE
        assert offset_fetch(cluster, group, topic, stable=True) == (ErrorCode.NONE, -1)
    finally:
        del owner
