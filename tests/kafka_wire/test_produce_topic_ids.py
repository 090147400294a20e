"""Produce v13 (KIP-516): topics named by id. The handler (`replication.broker.kafka.apis.table`)
maps each id to its name through the broker's image, produces by name as before, and answers
by id; an id the broker does not know is answered UNKNOWN_TOPIC_ID on each of its partitions,
as Kafka's KafkaApis does. Against a stand-in broker API (the Java client's producer, which
sends v13, runs against real brokers in `tests/kafka_java`)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from kio.index import load_request_schema

from kraft.cluster import LocalCluster
from kraft.types import TopicPartition
from replication.broker.api import RequestContext
from replication.broker.kafka.apis import HANDLERS
from replication.broker.kafka.entities import build, read_entity, to_chunks
from replication.broker.kafka.frames import Encoded, Request, response_class
from replication.clients import Consumer
from replication.messages import (
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicResponse,
)
from storage.errors import ErrorCode
from storage.records import build_batch
from tests.kafka_wire.wire import call

KNOWN = uuid.UUID("6c1f1a9e-0000-4000-8000-00000000000a")
UNKNOWN = uuid.UUID("6c1f1a9e-0000-4000-8000-00000000000b")


class StandIn:
    """Knows one topic, ``orders`` (id ``KNOWN``); acknowledges every partition produced."""

    def __init__(self) -> None:
        self.seen: list[ProduceRequest] = []

    def topic_name(self, topic_id: str) -> str | None:
        return "orders" if topic_id == str(KNOWN) else None

    async def produce(self, request: ProduceRequest, ctx: RequestContext) -> ProduceResponse:
        self.seen.append(request)
        return ProduceResponse(
            responses=tuple(
                ProduceTopicResponse(
                    name=t.name,
                    partition_responses=tuple(
                        ProducePartitionResponse(index=p.index, base_offset=40 + p.index)
                        for p in t.partition_data
                    ),
                )
                for t in request.topic_data
            )
        )


def produce(version: int, body: dict[str, Any], api: StandIn) -> Any:
    entity = build(load_request_schema(0, version), body)
    request = Request(
        sequence=0, api_key=0, api_version=version, correlation_id=1, client_id="c", body=entity
    )
    answer = asyncio.run(HANDLERS[0].handle(api, request, RequestContext()))  # type: ignore[arg-type]
    if answer is None:
        return None
    cls = response_class(0, version)
    if isinstance(answer, Encoded):  # every partition succeeded: encoded without kio
        response, end = read_entity(cls, answer.body, 0)
        assert end == len(answer.body)
        return response
    response = build(cls, answer)
    assert to_chunks(response).size > 0
    return response


def topic(ident: uuid.UUID, *partitions: int) -> dict[str, Any]:
    return {
        "topic_id": ident,
        "partition_data": [{"index": p, "records": b"batch"} for p in partitions],
    }


def test_v13_produces_to_a_known_id_by_name_and_answers_an_unknown_id_unknown_topic_id() -> None:
    api = StandIn()
    response = produce(
        13,
        {"acks": -1, "timeout": 5000, "topic_data": [topic(KNOWN, 0, 2), topic(UNKNOWN, 1)]},
        api,
    )
    (seen,) = api.seen
    assert [(t.name, [p.index for p in t.partition_data]) for t in seen.topic_data] == [
        ("orders", [0, 2])
    ]
    assert seen.topic_data[0].partition_data[0].records == b"batch"
    by_id = {
        t.topic_id: [(p.index, p.error_code.value, p.base_offset) for p in t.partition_responses]
        for t in response.responses
    }
    assert by_id == {
        KNOWN: [(0, ErrorCode.NONE, 40), (2, ErrorCode.NONE, 42)],
        UNKNOWN: [(1, ErrorCode.UNKNOWN_TOPIC_ID, -1)],
    }


@pytest.mark.parametrize("ident", [UNKNOWN, uuid.UUID(int=0)])
def test_v13_with_only_unknown_ids_produces_nothing(ident: uuid.UUID) -> None:
    """Apache Kafka 4.4 answers the zero id too UNKNOWN_TOPIC_ID, base and log start offset
    -1 (asked on a `kraft peer kafka` broker)."""
    api = StandIn()
    response = produce(13, {"acks": 1, "timeout": 5000, "topic_data": [topic(ident, 0)]}, api)
    assert api.seen[0].topic_data == ()
    ((topic_id, answers),) = [
        (
            t.topic_id,
            [
                (p.error_code.value, p.base_offset, p.log_start_offset)
                for p in t.partition_responses
            ],
        )
        for t in response.responses
    ]
    assert (topic_id or uuid.UUID(int=0)) == ident  # (kio reads the zero id as None)
    assert answers == [(ErrorCode.UNKNOWN_TOPIC_ID, -1, -1)]


@pytest.mark.parametrize("version", [11, 12])
def test_before_v13_topics_are_named_and_answered_by_name(version: int) -> None:
    api = StandIn()
    body = {
        "acks": -1,
        "timeout": 5000,
        "topic_data": [{"name": "orders", "partition_data": [{"index": 3, "records": b"b"}]}],
    }
    response = produce(version, body, api)
    assert api.seen[0].topic_data[0].name == "orders"
    assert [(t.name, t.partition_responses[0].base_offset) for t in response.responses] == [
        ("orders", 43)
    ]


def test_v13_refuses_bad_acks_per_partition_by_id() -> None:
    response = produce(
        13,
        {"acks": 2, "timeout": 5000, "topic_data": [topic(KNOWN, 0), topic(UNKNOWN, 0)]},
        StandIn(),
    )
    assert {t.topic_id: t.partition_responses[0].error_code.value for t in response.responses} == {
        KNOWN: ErrorCode.INVALID_REQUIRED_ACKS,
        UNKNOWN: ErrorCode.UNKNOWN_TOPIC_ID,
    }


@pytest.mark.process
@pytest.mark.timeout(120)
def test_v13_on_the_wire_to_a_real_broker(cluster: LocalCluster) -> None:
    """A v13 Produce, as Kafka's Java client 4.x sends it, to the leader of a topic of the
    shared cluster: the known id's partition is appended (kraft's own consumer reads the record
    back), a partition the topic lacks is UNKNOWN_TOPIC_OR_PARTITION and an unknown id
    UNKNOWN_TOPIC_ID, with Apache Kafka 4.4's offsets (-1)."""
    name = "produce-v13"
    cluster.create_topic(name, 1, 3)
    leader = cluster.kafka_addresses[cluster.describe_topic(name).partitions[0].leader]
    # The leader's image names the topic's id once it has applied the topic's record.
    topic_id = None
    deadline = time.monotonic() + 30
    while topic_id is None:
        assert time.monotonic() < deadline, "the leader's Metadata has no id for the topic"
        (described,) = call(leader, 3, 12, {"topics": [{"name": name}]}).topics
        topic_id = described.topic_id
        time.sleep(0.05)  # NB: polling a condition, with the deadline above
    record = build_batch([b"by-id"], timestamp_ms=1)
    answer = call(
        leader,
        0,
        13,
        {
            "acks": -1,
            "timeout": 10_000,
            "topic_data": [
                {
                    "topic_id": topic_id,
                    "partition_data": [
                        {"index": 0, "records": record},
                        {"index": 5, "records": record},
                    ],
                },
                {"topic_id": UNKNOWN, "partition_data": [{"index": 0, "records": record}]},
            ],
        },
    )
    got = {
        (t.topic_id, p.index): (p.error_code.value, p.base_offset)
        for t in answer.responses
        for p in t.partition_responses
    }
    assert got == {
        (topic_id, 0): (ErrorCode.NONE, 0),
        (topic_id, 5): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
        (UNKNOWN, 0): (ErrorCode.UNKNOWN_TOPIC_ID, -1),
    }
    with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(name, 0)])
        values: list[bytes | None] = []
        deadline = time.monotonic() + 30
        while not values and time.monotonic() < deadline:
            values = [r.value for r in consumer.poll(timeout=0.5)]
    assert values == [b"by-id"]


@pytest.mark.process
@pytest.mark.timeout(120)
def test_a_broker_not_leading_names_the_leader_and_its_endpoint_in_produce(
    cluster: LocalCluster,
) -> None:
    """KIP-951 in Produce v10+: a broker that does not lead the partition answers
    NOT_LEADER_OR_FOLLOWER with ``current_leader`` and the leader's Kafka endpoint in
    ``node_endpoints``, so a client sends there without a Metadata refresh; v9 has neither."""
    name = "produce-node-endpoints"
    cluster.create_topic(name, 1, 1)
    leader = cluster.describe_topic(name).partitions[0].leader
    outsider = cluster.kafka_addresses[min(set(cluster.broker_ids) - {leader})]
    body = {
        "acks": -1,
        "timeout": 10_000,
        "topic_data": [
            {
                "name": name,
                "partition_data": [{"index": 0, "records": build_batch([b"x"], timestamp_ms=1)}],
            }
        ],
    }
    deadline = time.monotonic() + 30
    while True:  # NB: until the outsider's image has the topic, it is unknown there
        answer = call(outsider, 0, 11, body)
        (part,) = answer.responses[0].partition_responses
        if part.error_code.value == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            break
        assert time.monotonic() < deadline, part
        time.sleep(0.05)  # NB: polling a condition, with the deadline above
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (
        leader,
        cluster.describe_topic(name).partitions[0].leader_epoch,
    )
    assert [(e.node_id, f"{e.host}:{e.port}") for e in answer.node_endpoints] == [
        (leader, cluster.kafka_addresses[leader])
    ]
    old = call(outsider, 0, 9, body)
    assert old.responses[0].partition_responses[0].error_code.value == (
        ErrorCode.NOT_LEADER_OR_FOLLOWER
    )
    assert not hasattr(old, "node_endpoints")


@pytest.mark.process
@pytest.mark.timeout(150)
def test_a_moved_leader_is_named_in_produce_and_fetch_answers(cluster: LocalCluster) -> None:
    """After the leader moves (a reassignment to the same replicas in another order, then a
    preferred election), librdkafka applies its Produce answer's ``current_leader`` (KIP-951)
    as an inline metadata update: its next produce to the old leader logs "updated with leader
    <new>" (its ``rd_kafka_metadata_update_op``, which only the inline path runs) and the record
    is delivered. (librdkafka knows every broker already, so it needs no ``node_endpoints``
    here; those are checked on the wire above.) A Fetch v16+ with the old leader epoch is
    FENCED_LEADER_EPOCH with the new leader, its epoch and its endpoint."""
    import logging

    import confluent_kafka

    from replication.clients import AdminClient

    name = "produce-leader-moved"
    cluster.create_topic(name, 1, 3)
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger(f"rdkafka.{name}")
    logger.addHandler(Collect())
    logger.setLevel(logging.DEBUG)
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "debug": "metadata",
            "topic.metadata.refresh.interval.ms": 600_000,  # no periodic refresh in between
        },
        logger=logger,
    )
    errors: list[Any] = []

    def produce(value: bytes) -> None:
        producer.produce(name, value, partition=0, on_delivery=lambda e, _m: errors.append(e))
        assert producer.flush(30) == 0

    produce(b"before")
    partition = cluster.describe_topic(name).partitions[0]
    old_epoch = partition.leader_epoch
    moved_to = next(r for r in partition.replicas if r != partition.leader)
    wanted = [moved_to, *(r for r in partition.replicas if r != moved_to)]
    tp = TopicPartition(name, 0)
    with AdminClient(cluster.bootstrap) as admin:
        assert admin.alter_partition_reassignments({tp: wanted}) == {tp: None}
        deadline = time.monotonic() + 60
        while cluster.describe_topic(name).partitions[0].leader != moved_to:
            assert time.monotonic() < deadline, "the leader did not move"
            admin.elect_leaders([tp])  # ELECTION_NOT_NEEDED once the reassignment is done
            time.sleep(0.2)  # NB: polling a condition, with the deadline above
    produce(b"after")
    assert errors == [None, None]
    assert any(f"[0]: updated with leader {moved_to} " in line for line in lines), lines[-20:]

    new_epoch = cluster.describe_topic(name).partitions[0].leader_epoch
    leader_address = cluster.kafka_addresses[moved_to]
    (described,) = call(leader_address, 3, 12, {"topics": [{"name": name}]}).topics
    fetch = {
        "max_wait": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic_id": described.topic_id,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": old_epoch,
                        "fetch_offset": 0,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
    }
    fenced = call(leader_address, 1, 17, fetch)
    (part,) = fenced.responses[0].partitions
    assert part.error_code.value == ErrorCode.FENCED_LEADER_EPOCH
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (
        moved_to,
        new_epoch,
    )
    assert [(e.node_id, f"{e.host}:{e.port}") for e in fenced.node_endpoints] == [
        (moved_to, leader_address)
    ]
