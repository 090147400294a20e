"""KIP-890 part 2 (``transaction.version`` 2) on the Kafka listener of the shared kraft 3+3
cluster: ApiVersions advertises the feature finalized at 2 with EndTxn v5 and TxnOffsetCommit
v5; a Produce v12 adds its partition to the transaction with no AddPartitionsToTxn; EndTxn v5
answers the epoch it bumped, the marker carries it, a late batch of the ended transaction is
refused, and a retried EndTxn is answered the same. (The Java client's whole protocol on
version 2: tests/kafka_java/test_transactions.py.)"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from kraft.cluster import LocalCluster
from storage.errors import ErrorCode
from storage.records import build_batch
from tests.kafka_wire.test_transactions_cluster import describe, new_topic, producer
from tests.kafka_wire.test_txn_verification import _latest, _open_transactions, _produce
from tests.kafka_wire.wire import call

pytestmark = [pytest.mark.process, pytest.mark.timeout(120)]

_CLIENT = {"client_software_name": "kraft-tests", "client_software_version": "1"}


def test_api_versions_advertises_transaction_version_2_finalized(cluster: LocalCluster) -> None:
    address = cluster.kafka_addresses[cluster.broker_ids[0]]
    answer = call(address, 18, 4, _CLIENT)
    supported = {f.name: (f.min_version, f.max_version) for f in answer.supported_features}
    assert supported == {"transaction.version": (0, 2)}
    finalized = {
        f.name: (f.min_version_level, f.max_version_level) for f in answer.finalized_features
    }
    assert finalized == {"transaction.version": (2, 2)}
    assert answer.finalized_features_epoch >= 0
    versions = {k.api_key: k.max_version for k in answer.api_keys}
    assert (versions[26], versions[28]) == (5, 5)  # EndTxn, TxnOffsetCommit
    # Below v4, a feature whose minimum is 0 is left out (older clients refuse it).
    assert call(address, 18, 3, _CLIENT).supported_features == ()


def _batch(state: Any, epoch: int, sequence: int, value: bytes) -> bytes:
    return build_batch(
        [value],
        timestamp_ms=int(time.time() * 1000),
        producer_id=state.producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=True,
    )


def _end_txn(cluster: LocalCluster, tid: str, producer_id: int, epoch: int) -> Any:
    """EndTxn v5 (commit) at the id's coordinator."""
    body = {
        "transactional_id": tid,
        "producer_id": producer_id,
        "producer_epoch": epoch,
        "committed": True,
    }
    answers = [call(cluster.kafka_addresses[b], 26, 5, body) for b in cluster.broker_ids]
    (answer,) = [a for a in answers if a.error_code != ErrorCode.NOT_COORDINATOR]
    return answer


def _producer_epochs(cluster: LocalCluster, leader: int, topic: str) -> dict[int, int]:
    request = {"topics": [{"name": topic, "partition_indexes": [0]}]}
    answer = call(cluster.kafka_addresses[leader], 61, 0, request)
    return {
        s.producer_id: s.producer_epoch
        for t in answer.topics
        for p in t.partitions
        for s in p.active_producers
    }


def test_a_produce_v12_joins_the_transaction_and_end_txn_v5_bumps_the_epoch(
    cluster: LocalCluster,
) -> None:
    topic = new_topic(cluster, "tv2")
    tid = f"tv2-{uuid.uuid4().hex[:8]}"
    owner = producer(cluster, tid)  # InitProducerId: the id's producer id and first epoch
    try:
        (state,) = describe(cluster, tid)
        pid, epoch = state.producer_id, state.producer_epoch
        # No AddPartitionsToTxn: the leader adds the partition for a Produce v12.
        ((leader, answer),) = _produce(cluster, 12, tid, topic, _batch(state, epoch, 0, b"a"))
        assert answer.error_code == ErrorCode.NONE
        assert _open_transactions(cluster, leader, topic) == [0]
        (ongoing,) = describe(cluster, tid)
        assert ongoing.transaction_state == "Ongoing"
        assert [(t.topic, list(t.partitions)) for t in ongoing.topics] == [(topic, [0])]

        ended = _end_txn(cluster, tid, pid, epoch)
        assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (
            ErrorCode.NONE,
            pid,
            epoch + 1,
        )
        deadline = time.monotonic() + 20
        while _latest(cluster, leader, topic, 1) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _latest(cluster, leader, topic, 1) == 2  # the record and its commit marker
        # The marker carried the bumped epoch to the partition ...
        assert _producer_epochs(cluster, leader, topic)[pid] == epoch + 1
        # ... so a late batch of the ended transaction cannot open another one there.
        ((_, late),) = _produce(cluster, 12, tid, topic, _batch(state, epoch, 1, b"late"))
        assert late.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        assert _open_transactions(cluster, leader, topic) == []
        # A retried EndTxn of the old epoch gets the answer it missed.
        again = _end_txn(cluster, tid, pid, epoch)
        assert (again.error_code, again.producer_epoch) == (ErrorCode.NONE, epoch + 1)
        # The next transaction runs on the bumped epoch, sequences from 0.
        ((_, nxt),) = _produce(cluster, 12, tid, topic, _batch(state, epoch + 1, 0, b"b"))
        assert nxt.error_code == ErrorCode.NONE
        assert _end_txn(cluster, tid, pid, epoch + 1).producer_epoch == epoch + 2
    finally:
        del owner
