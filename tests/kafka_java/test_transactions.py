"""Apache Kafka's own transactional Java program against kraft (issue 28): Kafka's
``TransactionalMessageCopier`` (the exactly-once copier of Kafka's system tests) copies a kraft
topic's partition into another kraft topic through ``kraft peer kafka tool``, in transactions
that commit the consumed offsets with the output (``sendOffsetsToTransaction`` with the group's
metadata, KIP-447) and abort at random; a read_committed consumer then finds every input record
in the output exactly once. kraft finalizes ``transaction.version`` 2, so the client runs its
transactions on KIP-890 part 2's protocol: the epoch the coordinator ends with proves it.
``kafka-transactions`` (``TransactionsCommand``) lists and describes the copier's id.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest

from kraft.cluster import LocalCluster
from kraft.types import TopicPartition
from replication.clients import AdminClient, Producer
from tests.kafka_java.conftest import create_topic, run_kraft_tool, run_tool
from tests.kafka_wire.test_transactions_cluster import PARTITIONS, read_all

pytestmark = [pytest.mark.java, pytest.mark.process, pytest.mark.timeout(240)]

RECORDS = 300


def test_kafkas_transactional_copier_copies_every_record_exactly_once(
    cluster: LocalCluster,
) -> None:
    source = create_topic(cluster, "eos-in", partitions=1)
    sink = create_topic(cluster, "eos-out", partitions=PARTITIONS)
    values = [f"record-{i}".encode() for i in range(RECORDS)]
    with Producer(cluster.bootstrap, acks="all") as producer:
        for f in [producer.send(source, value=v, partition=0) for v in values]:
            f.result(timeout=30)
    tid = f"copier-{uuid.uuid4().hex[:8]}"
    copier = run_kraft_tool(
        "transactional-message-copier",
        *("--broker-list", cluster.kafka_bootstrap),
        *("--input-topic", source, "--input-partition", "0", "--output-topic", sink),
        *("--transactional-id", tid, "--consumer-group", f"{tid}-group"),
        *("--transaction-size", "40", "--transaction-timeout", "30000"),
        "--enable-random-aborts",
        "--use-group-metadata",
    )
    assert copier.returncode == 0, copier.stderr[-3000:]
    statuses = [json.loads(line) for line in copier.stdout.splitlines() if line.startswith("{")]
    assert statuses and statuses[-1]["remaining"] == 0, copier.stdout[-2000:]
    assert statuses[-1]["transactionalId"] == tid

    copied = read_all(cluster, sink, "read_committed", RECORDS)
    assert copied == sorted(values)  # every record, once: none aborted, none twice

    listed = run_tool("kafka-transactions", "--bootstrap-server", cluster.kafka_bootstrap, "list")
    rows = [line.split() for line in listed.splitlines()]
    assert rows[0][:4] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    (row,) = [r for r in rows if r[0] == tid]
    assert row[3] in ("CompleteCommit", "CompleteAbort", "Empty")
    described = run_tool(
        "kafka-transactions",
        *("--bootstrap-server", cluster.kafka_bootstrap),
        *("describe", "--transactional-id", tid),
    )
    header, line = [r for r in described.splitlines() if r.strip()][:2]
    assert header.split()[:4] == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch"]
    assert line.split()[1] == tid and line.split()[2] == row[2]
    # KIP-890 part 2: kraft finalizes transaction.version 2, so the Java client ran its
    # transactions on version 2 (EndTxn v5, no AddPartitionsToTxn): the coordinator bumped the
    # epoch at every transaction's end. On version 1 it would still be the first epoch (0).
    transactions = -(-RECORDS // 40)  # at least one per 40 records, more when one aborted
    assert int(line.split()[3]) >= transactions
    with AdminClient(cluster.bootstrap) as admin:
        described_here = admin.describe_transaction(tid)
        assert described_here.producer_epoch == int(line.split()[3])
        # TxnOffsetCommit v5 put the group's partition in each transaction itself (no
        # AddOffsetsToTxn): the input offsets were committed with the last transaction.
        deadline = time.monotonic() + 20
        while (offsets := admin.list_group_offsets(f"{tid}-group")) != {
            TopicPartition(source, 0): RECORDS
        }:
            assert time.monotonic() < deadline, offsets
            time.sleep(0.1)
