"""Per-topic answers (`kraft.security.per_topic`, issue 17): a request naming topics of which
only some are refused gets TOPIC_AUTHORIZATION_FAILED for those and a normal answer for the rest,
as Kafka's KafkaApis answers; a request whose every topic is refused, or whose group is, is
refused whole."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from kraft._generated import broker_pb2, broker_pb2_grpc, controller_pb2
from kraft.security.acls import AclOperation, ResourceType
from kraft.security.guard import AccessGuard
from kraft.security.per_topic import PER_TOPIC, answer_refused, without
from kraft.transport.channels import aio_server, bind
from storage.errors import ErrorCode
from tests.security.test_operations import ON, PLAIN, FakeImage, acl, guard_of

Op = AclOperation
FAILED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
B, C = broker_pb2, controller_pb2
TOPICS = ("a", "secret")


def _produce(*names: str) -> Any:
    return B.ProduceRequest(
        acks=1,
        topic_data=[
            B.ProduceTopicData(name=n, partition_data=[B.ProducePartitionData(index=0)])
            for n in names
        ],
    )


def _fetch(*names: str) -> Any:
    return B.BrokerFetchRequest(
        replica_id=-1,
        topics=[B.FetchTopic(topic=n, partitions=[B.FetchPartition(partition=0)]) for n in names],
    )


def _list_offsets(*names: str) -> Any:
    topics = [
        B.ListOffsetsTopic(name=n, partitions=[B.ListOffsetsPartition(partition_index=0)])
        for n in names
    ]
    return B.ListOffsetsRequest(replica_id=-1, topics=topics)


def _commit(*names: str) -> Any:
    topics = [
        B.OffsetCommitRequestTopic(
            name=n, partitions=[B.OffsetCommitRequestPartition(partition_index=0)]
        )
        for n in names
    ]
    return B.OffsetCommitRequest(group_id="g", topics=topics)


def _create(*names: str) -> Any:
    return C.CreateTopicsRequest(topics=[C.CreatableTopic(name=n) for n in names])


def _delete(*names: str) -> Any:
    return C.DeleteTopicsRequest(topic_names=list(names))


# method, request builder, the operation that allows a topic
CASES: list[tuple[str, Any, AclOperation]] = [
    ("Broker/Produce", _produce, Op.WRITE),
    ("Broker/Fetch", _fetch, Op.READ),
    ("Broker/ListOffsets", _list_offsets, Op.DESCRIBE),
    ("Broker/OffsetCommit", _commit, Op.READ),
    ("Controller/CreateTopics", _create, Op.CREATE),
    ("Controller/DeleteTopics", _delete, Op.DELETE),
]


def test_every_per_topic_method_has_a_case() -> None:
    assert {key for key, _, _ in CASES} == PER_TOPIC


def _guard(operation: AclOperation) -> AccessGuard:
    return guard_of(acl("a", operation), acl("g", Op.READ, resource_type=ResourceType.GROUP))


@pytest.mark.parametrize(("key", "build", "operation"), CASES, ids=[c[0] for c in CASES])
def test_only_the_refused_topics_are_refused_when_others_are_allowed(
    key: str, build: Any, operation: AclOperation
) -> None:
    guard = _guard(operation)
    decision = guard.decide(f"/kraft.v1.{key}", build(*TOPICS), PLAIN)
    assert decision.refusal is None
    assert decision.refused_topics == {"secret"}
    assert f"User:ANONYMOUS (from 127.0.0.1) may not {operation.name} topic" == decision.why
    # Every topic refused: nothing to answer, refused whole as before.
    whole = guard.decide(f"/kraft.v1.{key}", build("secret", "other"), PLAIN)
    assert whole.refusal is not None and whole.refusal.code is FAILED
    assert "'secret'" in whole.refusal.message
    # Every topic allowed: no per-topic refusal.
    assert guard.decide(f"/kraft.v1.{key}", build("a"), PLAIN) == guard.decide(
        f"/kraft.v1.{key}", build(), PLAIN
    )


def test_an_offset_commit_whose_group_is_refused_is_refused_whole() -> None:
    guard = guard_of(acl("a", Op.READ))  # no READ on group g
    decision = guard.decide("/kraft.v1.Broker/OffsetCommit", _commit(*TOPICS), PLAIN)
    assert decision.refusal is not None
    assert decision.refusal.code is ErrorCode.GROUP_AUTHORIZATION_FAILED


def _entries(key: str, response: Any) -> dict[str, list[int]]:
    """topic -> the error codes of its entries (per partition, or per topic)."""
    out: dict[str, list[int]] = {}
    if key == "Broker/Produce":
        for t in response.responses:
            out[t.name] = [p.error_code for p in t.partition_responses]
    elif key == "Broker/Fetch":
        for f in response.responses:
            out[f.topic] = [p.error_code for p in f.partitions]
    elif key in ("Broker/ListOffsets", "Broker/OffsetCommit"):
        for t in response.topics:
            out[t.name] = [p.error_code for p in t.partitions]
    else:
        for r in response.topics:
            out[r.name or r.topic_id] = [r.error_code]
    return out


RESPONSES = {
    "Broker/Produce": B.ProduceResponse,
    "Broker/Fetch": B.BrokerFetchResponse,
    "Broker/ListOffsets": B.ListOffsetsResponse,
    "Broker/OffsetCommit": B.OffsetCommitResponse,
    "Controller/CreateTopics": C.CreateTopicsResponse,
    "Controller/DeleteTopics": C.DeleteTopicsResponse,
}


@pytest.mark.parametrize(("key", "build", "operation"), CASES, ids=[c[0] for c in CASES])
def test_the_servicer_sees_the_allowed_topics_and_the_refused_ones_are_answered(
    key: str, build: Any, operation: AclOperation
) -> None:
    request = build(*TOPICS)
    reduced = without(key, request, {"secret"}, lambda _: None)
    assert reduced != request and request == build(*TOPICS)  # a copy; the original is kept
    assert reduced == build("a")
    response = RESPONSES[key]()
    answer_refused(key, request, {"secret"}, response, lambda t: f"no {t}", lambda _: None)
    assert _entries(key, response) == {"secret": [int(FAILED)]}


def test_a_delete_by_id_of_a_refused_topic_is_answered_without_its_name() -> None:
    names = {"id-a": "a", "id-s": "secret"}
    request = C.DeleteTopicsRequest(topic_ids=["id-a", "id-s", "id-unknown"])
    guard = AccessGuard(ON, lambda: FakeImage(acls={"1": acl("a", Op.DELETE)}, topics=names))
    decision = guard.decide("/kraft.v1.Controller/DeleteTopics", request, PLAIN)
    assert decision.refused_topics == {"secret"}
    reduced = without("Controller/DeleteTopics", request, {"secret"}, names.get)
    assert list(reduced.topic_ids) == ["id-a", "id-unknown"]
    response = C.DeleteTopicsResponse()
    answer_refused("Controller/DeleteTopics", request, {"secret"}, response, str, names.get)
    (entry,) = response.topics
    assert (entry.topic_id, entry.HasField("name"), entry.error_code) == ("id-s", False, FAILED)


class _EchoBroker(broker_pb2_grpc.BrokerServicer):  # type: ignore[misc]
    """Answers every partition of a Produce with NONE; remembers what it was asked."""

    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    async def Produce(self, request: Any, context: Any) -> Any:
        self.seen.append([t.name for t in request.topic_data])
        response = B.ProduceResponse()
        for t in request.topic_data:
            answer = response.responses.add(name=t.name)
            for p in t.partition_data:
                answer.partition_responses.add(index=p.index, base_offset=7)
        return response


def test_through_the_interceptor_a_mixed_produce_is_answered_per_topic() -> None:
    async def run() -> None:
        servicer = _EchoBroker()
        image = FakeImage(acls={"1": acl("a", Op.WRITE)})
        server = aio_server(guard=AccessGuard(ON, lambda: image))
        broker_pb2_grpc.add_BrokerServicer_to_server(servicer, server)
        port = bind(server, "127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = broker_pb2_grpc.BrokerStub(channel)
                response = await stub.Produce(_produce(*TOPICS), timeout=5)
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await stub.Produce(_produce("secret"), timeout=5)
        finally:
            await server.stop(None)
        assert servicer.seen == [["a"]]  # the refused topic never reached the servicer
        assert _entries("Broker/Produce", response) == {"a": [0], "secret": [int(FAILED)]}
        (secret,) = [t for t in response.responses if t.name == "secret"]
        message = secret.partition_responses[0].error_message
        assert message == "User:ANONYMOUS (from 127.0.0.1) may not WRITE topic 'secret'"
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED

    asyncio.run(run())
