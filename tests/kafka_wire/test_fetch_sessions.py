"""Fetch sessions (KIP-227) and topic ids in Fetch v13+ (KIP-516) on the shared cluster's Kafka
listeners: on the wire, byte for byte as a client sends them, and through real clients that use
sessions (Kafka's Java consumer, kafka-python), whose incremental fetches the brokers' metrics
count; librdkafka, which has no sessions, fetches by topic id."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Callable
from typing import Any

import confluent_kafka
import kafka
import pytest

from kraft.cluster import LocalCluster
from kraft.metrics.kafka import FETCH_SESSION_REQUESTS
from kraft.peer.jars import kafka_jars
from kraft.peer.tools import tool_command
from replication.broker.limits import MAX_PARTITIONS_PER_REQUEST
from replication.clients import Producer
from tests.java_jars import jars_unavailable
from tests.kafka_wire.wire import call
from tests.metrics.test_metrics_cluster import scrape

pytestmark = [pytest.mark.process, pytest.mark.timeout(180)]

FETCH, METADATA = 1, 3
UNKNOWN_TOPIC_ID, FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH = 100, 70, 71
FETCH_SESSION_TOPIC_ID_ERROR, INVALID_REQUEST, NOT_LEADER_OR_FOLLOWER = 106, 42, 6


def _wait(condition: Callable[[], bool], what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _produce(cluster: LocalCluster, topic: str, values: list[bytes], partition: int = 0) -> None:
    with Producer(cluster.bootstrap, acks="all") as producer:
        for future in [producer.send(topic, v, partition=partition) for v in values]:
            future.result(timeout=30)


def _fetch(address: str, version: int, **fields: Any) -> Any:
    body = {
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "session_id": 0,
        "session_epoch": 0,
        "topics": [],
        "forgotten_topics_data": [],
        **fields,
    }
    return call(address, FETCH, version, body)


def _by_id(topic_id: uuid.UUID, offset: int) -> dict[str, Any]:
    partition = {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
    return {"topic_id": topic_id, "partitions": [partition]}


def _many(topic_id: uuid.UUID, indexes: range) -> dict[str, Any]:
    partitions = [{"partition": i, "fetch_offset": 0, "partition_max_bytes": 1} for i in indexes]
    return {"topic_id": topic_id, "partitions": partitions}


def _code(answer: Any) -> int:
    return int(answer.error_code.value)


def _partitions(answer: Any) -> dict[tuple[Any, int], Any]:
    return {
        (getattr(t, "topic_id", None) or t.topic, p.partition_index): p
        for t in answer.responses
        for p in t.partitions
    }


def _fetches(cluster: LocalCluster, topics: str, kind: str = "incremental") -> float:
    """Fetches of ``kind`` served over the brokers, of requests naming topics by ``topics``
    (``id`` or ``name``)."""
    name = f"{FETCH_SESSION_REQUESTS}{{kind={kind},topics={topics}}}"
    return sum(scrape(address).get(name, 0.0) for address in cluster.metrics_addresses.values())


def test_a_session_by_topic_id_answers_only_news_and_refuses_wrong_epochs_and_ids(
    cluster: LocalCluster,
) -> None:
    topic = "fetch-session-wire"
    cluster.create_topic(topic, 1, 3)
    _produce(cluster, topic, [b"v%d" % i for i in range(5)])
    leader = cluster.kafka_addresses[cluster.describe_topic(topic).partitions[0].leader]
    # Metadata names the topic's real id (a Java client fetches by id only then).
    described = call(leader, METADATA, 12, {"topics": [{"name": topic}]})
    (metadata,) = described.topics
    topic_id = metadata.topic_id
    assert topic_id is not None and topic_id.int != 0
    unknown = uuid.uuid4()

    full = _fetch(leader, 18, topics=[_by_id(topic_id, 0), _by_id(unknown, 0)])
    assert _code(full) == 0 and full.session_id != 0
    got = _partitions(full)
    assert got[topic_id, 0].high_watermark == 5 and got[topic_id, 0].records
    assert int(got[unknown, 0].error_code.value) == UNKNOWN_TOPIC_ID
    sid = full.session_id

    # Epoch 1: the position moved, the unknown topic is forgotten: no news, an empty answer.
    quiet = _fetch(
        leader,
        18,
        session_id=sid,
        session_epoch=1,
        topics=[_by_id(topic_id, 5)],
        forgotten_topics_data=[{"topic_id": unknown, "partitions": [0]}],
    )
    assert (_code(quiet), quiet.session_id, quiet.responses) == (0, sid, ())
    # Epoch 2 names nothing: the broker fetches the session's partition from offset 5 and
    # waits for a record.
    _produce(cluster, topic, [b"v5"])
    news = _fetch(leader, 18, session_id=sid, session_epoch=2, max_wait=5000)
    (only,) = _partitions(news).values()
    assert only.high_watermark == 6 and only.records

    assert _code(_fetch(leader, 18, session_id=sid, session_epoch=2)) == (
        INVALID_FETCH_SESSION_EPOCH
    )
    wrong_id = sid % (2**31 - 1) + 1
    assert _code(_fetch(leader, 18, session_id=wrong_id, session_epoch=3)) == (
        FETCH_SESSION_ID_NOT_FOUND
    )
    # A session made with ids does not go on with names (Fetch v12).
    assert _code(_fetch(leader, 12, session_id=sid, session_epoch=3)) == (
        FETCH_SESSION_TOPIC_ID_ERROR
    )
    # Epoch -1 closes the session: a sessionless answer, then the id is gone.
    closed = _fetch(leader, 18, session_id=sid, session_epoch=-1, topics=[_by_id(topic_id, 6)])
    assert (_code(closed), closed.session_id) == (0, 0)
    assert _code(_fetch(leader, 18, session_id=sid, session_epoch=3)) == (
        FETCH_SESSION_ID_NOT_FOUND
    )

    # A session grown past what one request may name (a few partitions at a time) ends with
    # INVALID_REQUEST, a typed answer, and the client starts over.
    half = MAX_PARTITIONS_PER_REQUEST // 2 + 1
    grown = _fetch(leader, 18, topics=[_many(topic_id, range(half))])
    assert _code(grown) == 0 and grown.session_id != 0
    over = _fetch(
        leader,
        18,
        session_id=grown.session_id,
        session_epoch=1,
        topics=[_many(topic_id, range(half, 2 * half))],
    )
    assert (_code(over), over.session_id) == (INVALID_REQUEST, 0)
    assert _code(_fetch(leader, 18, session_id=grown.session_id, session_epoch=2)) == (
        FETCH_SESSION_ID_NOT_FOUND
    )


def test_kafka_python_consumes_in_incremental_fetch_sessions(cluster: LocalCluster) -> None:
    topic = "fetch-session-kafka-python"
    cluster.create_topic(topic, 3, 3)
    first = [b"kp-%d" % i for i in range(30)]
    for p in range(3):
        _produce(cluster, topic, first[p::3], partition=p)
    before = _fetches(cluster, "name")
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=cluster.kafka_bootstrap,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
    )
    got: list[bytes] = []
    try:
        consumer.assign([kafka.TopicPartition(topic, p) for p in range(3)])

        def read(count: int) -> bool:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(r.value for r in records)
            return len(got) >= count

        _wait(lambda: read(30), "kafka-python reading the first records")
        # More records while its sessions are open: they come in incremental fetches.
        second = [b"kp-%d" % i for i in range(30, 45)]
        for p in range(3):
            _produce(cluster, topic, second[p::3], partition=p)
        _wait(lambda: read(45), "kafka-python reading the records written later")
    finally:
        consumer.close()
    assert sorted(got) == sorted(first + second)
    # kafka-python 3.0 sends Fetch up to v12: topics by name.
    assert _fetches(cluster, "name") > before


def test_librdkafka_consumes_by_topic_id(cluster: LocalCluster) -> None:
    """librdkafka fetches with topic ids (Fetch v13+) where a broker offers them, without
    sessions."""
    topic = "fetch-topic-id-librdkafka"
    cluster.create_topic(topic, 2, 3)
    values = [b"rd-%d" % i for i in range(20)]
    for p in range(2):
        _produce(cluster, topic, values[p::2], partition=p)
    before = _fetches(cluster, "id", "sessionless")
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "group.id": "fetch-topic-id-librdkafka",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    got: list[bytes] = []
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(2)])
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            for m in consumer.consume(50, timeout=0.5):
                assert m.error() is None, m.error()
                got.append(m.value())
    finally:
        consumer.close()
    assert sorted(got) == sorted(values)
    # librdkafka has no fetch sessions (KIP-227): session id 0, epoch -1, topics by id.
    assert _fetches(cluster, "id", "sessionless") > before


@pytest.mark.java
def test_the_java_consumer_fetches_by_topic_id_in_incremental_sessions(
    cluster: LocalCluster,
) -> None:
    reason = jars_unavailable(kafka_jars())
    assert reason is None, reason
    topic = "fetch-session-java"
    cluster.create_topic(topic, 3, 3)
    first = [f"j-{i}" for i in range(30)]
    for p in range(3):
        _produce(cluster, topic, [v.encode() for v in first[p::3]], partition=p)
    before = _fetches(cluster, "id")
    consumer = subprocess.Popen(
        tool_command(
            "kafka-console-consumer",
            "--bootstrap-server",
            cluster.kafka_bootstrap,
            "--topic",
            topic,
            "--from-beginning",
            "--max-messages",
            "45",
            "--timeout-ms",
            "60000",
            "--command-property",
            "fetch.max.wait.ms=100",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Once its sessions are open and incremental fetches flow, write the rest.
        _wait(
            lambda: _fetches(cluster, "id") > before + 3,
            "the Java consumer's incremental fetches",
            timeout_s=60,
        )
        second = [f"j-{i}" for i in range(30, 45)]
        for p in range(3):
            _produce(cluster, topic, [v.encode() for v in second[p::3]], partition=p)
        out, err = consumer.communicate(timeout=90)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.communicate()
    assert consumer.returncode == 0, err[-3000:]
    assert sorted(out.splitlines()) == sorted(first + second)


def test_a_broker_not_leading_names_the_leader_and_its_endpoint(cluster: LocalCluster) -> None:
    """KIP-951 in Fetch v16+: NOT_LEADER_OR_FOLLOWER with the leader and its Kafka address."""
    topic = "fetch-node-endpoints"
    cluster.create_topic(topic, 1, 1)
    leader = cluster.describe_topic(topic).partitions[0].leader
    outsider = cluster.kafka_addresses[min(set(cluster.broker_ids) - {leader})]
    named: list[Any] = []

    def known() -> bool:
        # NB: until the outsider's metadata has the new topic, Metadata answers it
        # UNKNOWN_TOPIC_OR_PARTITION with the zero topic id (CI fetched by that id once)
        (found,) = call(outsider, METADATA, 12, {"topics": [{"name": topic}]}).topics
        named.append(found)
        return _code(found) == 0

    _wait(known, "the outsider's metadata naming the topic")
    metadata = named[-1]
    answers: list[Any] = []

    def moved() -> bool:
        # NB: until the outsider's metadata has the topic, its id is unknown there.
        fetched = _fetch(outsider, 18, session_epoch=-1, topics=[_by_id(metadata.topic_id, 0)])
        answers.append(fetched)
        (part,) = _partitions(fetched).values()
        return int(part.error_code.value) == NOT_LEADER_OR_FOLLOWER

    _wait(moved, "the outsider's NOT_LEADER_OR_FOLLOWER")
    (part,) = _partitions(answers[-1]).values()
    assert part.current_leader.leader_id == leader
    assert [(e.node_id, f"{e.host}:{e.port}") for e in answers[-1].node_endpoints] == [
        (leader, cluster.kafka_addresses[leader])
    ]
