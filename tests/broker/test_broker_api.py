"""The broker API layer (`replication.broker.api`, issue 24): a handler called directly with a
`RequestContext`, no transport, authorizes on the dataclasses (a refusal is Kafka's error code
inside the response), bounds the request, and counts it in the request metrics."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

import pytest

from kraft.controller.messages import CreatableTopic, CreateTopicsRequest
from kraft.metadata import MetadataImage
from kraft.metadata.records import AccessControlEntryRecord
from kraft.metrics.registry import registry
from kraft.security.acls import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kraft.security.settings import STANDARD_AUTHORIZER
from kraft.types import TopicPartition
from replication.broker.api import RequestContext
from replication.broker.api.authorization import Refused
from replication.broker.config import BrokerNodeConfig
from replication.broker.limits import MAX_PARTITIONS_PER_REQUEST
from replication.broker.server import BrokerServer
from replication.messages import (
    BrokerFetchRequest,
    ConsumerGroupHeartbeatRequest,
    DescribeLogDirsRequest,
    DescribeProducersRequest,
    FetchPartition,
    FetchTopic,
    ListGroupsRequest,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
    MetadataRequest,
    OffsetFetchRequest,
    ProducePartitionData,
    ProduceRequest,
    ProduceTopicData,
    TopicPartitions,
)
from storage.errors import ErrorCode, InvalidRequestError, TopicAuthorizationFailedError
from tests.metadata.builders import ImageBuilder
from tests.replication.harness import batch

T = TypeVar("T")
LEADER = 101
ALICE = RequestContext(
    principal="User:CN=alice",
    client_host="10.0.0.7",
    listener="SSL",
    security_protocol="SSL",
)
"""A client over TLS that may WRITE and DESCRIBE topic ``t``, nothing else."""
ADMIN = RequestContext(principal="User:CN=admin", listener="SSL", security_protocol="SSL")
"""A super user over TLS."""
CAROL = RequestContext(principal="User:CN=carol", listener="SSL", security_protocol="SSL")
"""A client over TLS that may do anything to group ``mine`` and READ topic ``t``."""


def _acl(
    resource_type: ResourceType, name: str, operation: AclOperation, who: RequestContext = ALICE
) -> AclBinding:
    return AclBinding(
        resource_type=resource_type,
        resource_name=name,
        pattern_type=PatternType.LITERAL,
        principal=who.principal,
        host="*",
        operation=operation,
        permission_type=AclPermissionType.ALLOW,
    )


def _image() -> MetadataImage:
    image = (
        ImageBuilder()
        .with_brokers(101, 102, 103)
        .with_topic("t", assignments=[(LEADER,)])
        .with_partition("t", 0, isr=(LEADER,), leader=LEADER)
        .with_topic("secret", assignments=[(LEADER,)])
        .with_partition("secret", 0, isr=(LEADER,), leader=LEADER)
        .build()
    )
    acls = [
        _acl(ResourceType.TOPIC, "t", AclOperation.WRITE),
        _acl(ResourceType.TOPIC, "t", AclOperation.DESCRIBE),
        _acl(ResourceType.GROUP, "mine", AclOperation.ALL, CAROL),
        _acl(ResourceType.TOPIC, "t", AclOperation.READ, CAROL),
    ]
    records = [AccessControlEntryRecord.of(f"acl-{i}", b) for i, b in enumerate(acls)]
    return image.apply_batch(records, base_offset=image.last_offset + 1, epoch=1)


@asynccontextmanager
async def _broker(tmp_path: Path) -> AsyncIterator[BrokerServer]:
    """A real `BrokerServer`, not started: its image set by hand, its replicas opened."""
    config = BrokerNodeConfig.from_properties(
        {
            "node.id": str(LEADER),
            "controller.quorum.voters": "1@127.0.0.1:1",
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path / "broker"),
            "authorizer.class.name": STANDARD_AUTHORIZER,
            "super.users": ADMIN.principal,
        }
    )
    server = BrokerServer(config)
    server.broker_epoch = 7
    server.image = _image()
    server.replica_manager.reconcile()
    for _ in range(1000):  # a loaded machine opens the replicas over several passes
        if not server.replica_manager.reconcile_scheduled:
            break
        await asyncio.sleep(0)
    try:
        yield server
    finally:
        await server.close_unstarted()


def _run(tmp_path: Path, test: Callable[[BrokerServer], Awaitable[None]]) -> None:
    async def main() -> None:
        async with _broker(tmp_path) as server:
            await test(server)

    asyncio.run(main())


def _requests(request: str, status: str) -> float:
    value = registry().get_sample_value(
        "kafka_network_requestmetrics_requests_total", {"request": request, "status": status}
    )
    return value or 0.0


def _produce(*topics: str) -> ProduceRequest:
    return ProduceRequest(
        acks=1,
        timeout_ms=5_000,
        topic_data=tuple(
            ProduceTopicData(
                name=name, partition_data=(ProducePartitionData(index=0, records=batch(b"v")),)
            )
            for name in topics
        ),
    )


def test_a_produce_to_a_refused_topic_is_answered_topic_authorization_failed_inside(
    tmp_path: Path,
) -> None:
    async def test(server: BrokerServer) -> None:
        refused_before = _requests("Produce", "ERROR")
        response = await server.api.produce(_produce("secret"), ALICE)
        (topic,) = response.responses
        assert topic.name == "secret"
        assert [p.error_code for p in topic.partition_responses] == [
            ErrorCode.TOPIC_AUTHORIZATION_FAILED
        ]
        assert "User:CN=alice (from 10.0.0.7) may not WRITE topic 'secret'" in (
            topic.partition_responses[0].error_message
        )
        assert (
            server.replicas[TopicPartition("secret", 0)].log.log_end_offset == 0
        )  # nothing written
        assert _requests("Produce", "ERROR") == refused_before + 1

        # Per topic, as Kafka: the allowed topic is written, the refused one answered.
        allowed_before = _requests("Produce", "OK")
        mixed = await server.api.produce(_produce("t", "secret"), ALICE)
        codes = {t.name: t.partition_responses[0].error_code for t in mixed.responses}
        assert codes == {"t": ErrorCode.NONE, "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
        assert server.replicas[TopicPartition("t", 0)].log.log_end_offset == 1
        assert _requests("Produce", "OK") == allowed_before + 1

    _run(tmp_path, test)


def test_group_and_cluster_refusals_carry_their_codes_in_the_response(tmp_path: Path) -> None:
    async def test(server: BrokerServer) -> None:
        heartbeat = await server.api.consumer_group_heartbeat(
            ConsumerGroupHeartbeatRequest(group_id="g", subscribed_topic_names=("t",)), ALICE
        )
        assert heartbeat.error_code is ErrorCode.GROUP_AUTHORIZATION_FAILED
        fetched = await server.api.offset_fetch(OffsetFetchRequest(group_id="g"), ALICE)
        assert fetched.error_code is ErrorCode.GROUP_AUTHORIZATION_FAILED
        # A follower's fetch is a node's request: CLUSTER_ACTION, which alice lacks over TLS.
        follower = BrokerFetchRequest(
            replica_id=102,
            topics=(
                FetchTopic(topic="t", partitions=(FetchPartition(partition=0, fetch_offset=0),)),
            ),
        )
        answer = await server.api.fetch(follower, ALICE)
        assert answer.error_code is ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        # The transport-neutral `call` hands a whole refusal back as such (the gRPC adapter
        # answers it PERMISSION_DENIED, as kraft's clients expect).
        outcome = await server.api.call(server.api.fetch_api, follower, ALICE)
        assert isinstance(outcome, Refused)
        assert outcome.code is ErrorCode.CLUSTER_AUTHORIZATION_FAILED

    _run(tmp_path, test)


def test_classic_group_apis_are_refused_with_kafkas_codes(tmp_path: Path) -> None:
    """GROUP READ for JoinGroup, SyncGroup, Heartbeat, LeaveGroup; GROUP DESCRIBE for
    DescribeGroups (each group named answered Dead); GROUP DELETE for OffsetDelete."""
    from replication.broker.coordinators.classic_service import (
        DescribeGroupsRequest,
        OffsetDeleteRequest,
    )
    from replication.group.classic import (
        HeartbeatRequest,
        JoinGroupRequest,
        LeaveGroupRequest,
        MemberIdentity,
        SyncGroupRequest,
    )

    async def test(server: BrokerServer) -> None:
        api = server.api
        joined = await api.join_group(
            JoinGroupRequest(group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=1), ALICE
        )
        synced = await api.sync_group(
            SyncGroupRequest(group_id="g", generation_id=1, member_id="m"), ALICE
        )
        beat = await api.heartbeat(
            HeartbeatRequest(group_id="g", generation_id=1, member_id="m"), ALICE
        )
        left = await api.leave_group(
            LeaveGroupRequest(group_id="g", members=(MemberIdentity(member_id="m"),)), ALICE
        )
        for answer in (joined, synced, beat, left):
            assert answer.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        described = await api.describe_groups(DescribeGroupsRequest(group_ids=("a", "b")), ALICE)
        assert [(g.group_id, g.error_code) for g in described.groups] == [
            ("a", ErrorCode.GROUP_AUTHORIZATION_FAILED),
            ("b", ErrorCode.GROUP_AUTHORIZATION_FAILED),
        ]
        deleted = await api.offset_delete(
            OffsetDeleteRequest(group_id="g", partitions=(("t", 0),)), ALICE
        )
        assert deleted.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert _requests("JoinGroup", "ERROR") >= 1

    _run(tmp_path, test)


def test_describe_groups_and_offset_delete_are_refused_per_group_and_per_topic(
    tmp_path: Path,
) -> None:
    """Kafka's handleDescribeGroupsRequest answers a group the caller may not DESCRIBE
    GROUP_AUTHORIZATION_FAILED and describes the others; handleOffsetDeleteRequest refuses the
    request whole without DELETE on its group, else answers each topic without READ
    TOPIC_AUTHORIZATION_FAILED on its partitions and the others as the coordinator does."""
    from replication.broker.coordinators.classic_service import (
        DescribeGroupsRequest,
        OffsetDeleteRequest,
    )
    from replication.group import PartitionResult

    async def test(server: BrokerServer) -> None:
        api = server.api
        described = await api.describe_groups(DescribeGroupsRequest(group_ids=("g", "mine")), CAROL)
        # (no __consumer_offsets in this broker's image: its coordinator is not available)
        assert {g.group_id: g.error_code for g in described.groups} == {
            "g": ErrorCode.GROUP_AUTHORIZATION_FAILED,
            "mine": ErrorCode.COORDINATOR_NOT_AVAILABLE,
        }
        refused_group = await api.offset_delete(
            OffsetDeleteRequest(group_id="g", partitions=(("t", 0),)), CAROL
        )
        assert refused_group.error_code is ErrorCode.GROUP_AUTHORIZATION_FAILED
        every_topic_refused = await api.offset_delete(
            OffsetDeleteRequest(group_id="mine", partitions=(("secret", 0), ("secret", 1))), CAROL
        )
        assert every_topic_refused.error_code is ErrorCode.NONE
        assert every_topic_refused.partitions == (
            PartitionResult(topic="secret", partition=0, error_code=_TOPIC_REFUSED),
            PartitionResult(topic="secret", partition=1, error_code=_TOPIC_REFUSED),
        )
        # Some topics refused: the rest reach the coordinator, whose group error (here, no
        # coordinator) answers the request alone, as Kafka's OffsetDeleteResponse.Builder.merge.
        mixed = await api.offset_delete(
            OffsetDeleteRequest(group_id="mine", partitions=(("secret", 0), ("t", 0))), CAROL
        )
        assert (mixed.error_code, mixed.partitions) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, ())

    _run(tmp_path, test)


_TOPIC_REFUSED = ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_find_coordinator_describe_and_delete_groups_are_refused_per_group(
    tmp_path: Path,
) -> None:
    """Kafka's handleFindCoordinatorRequest (v4+, batched keys), handleConsumerGroupDescribe and
    handleDeleteGroupsRequest answer a group the caller may not DESCRIBE (DELETE) with
    GROUP_AUTHORIZATION_FAILED and serve the others; a request whose every group is refused
    gets the refusal on each."""
    from replication.messages import (
        ConsumerGroupDescribeRequest,
        DeleteGroupsRequest,
        FindCoordinatorRequest,
    )

    refused = ErrorCode.GROUP_AUTHORIZATION_FAILED
    # (no __consumer_offsets in this broker's image: its coordinator is not available)
    unavailable = ErrorCode.COORDINATOR_NOT_AVAILABLE

    async def test(server: BrokerServer) -> None:
        api = server.api
        found = await api.find_coordinator(
            FindCoordinatorRequest(coordinator_keys=("g", "mine", "h")), CAROL
        )
        assert [(c.key, c.error_code) for c in found.coordinators] == [
            ("g", refused),
            ("mine", unavailable),
            ("h", refused),
        ]
        assert "may not DESCRIBE group 'g'" in found.coordinators[0].error_message
        described = await api.consumer_group_describe(
            ConsumerGroupDescribeRequest(group_ids=("g", "mine")), CAROL
        )
        assert {g.group_id: g.error_code for g in described.groups} == {
            "g": refused,
            "mine": unavailable,
        }
        deleted = await api.delete_groups(
            DeleteGroupsRequest(groups_names=("mine", "g", "g")), CAROL
        )
        assert [(r.group_id, r.error_code) for r in deleted.results] == [
            ("mine", unavailable),
            ("g", refused),  # once, as Kafka answers each group once
        ]
        every = await api.delete_groups(DeleteGroupsRequest(groups_names=("g", "h")), CAROL)
        assert [(r.group_id, r.error_code) for r in every.results] == [
            ("g", refused),
            ("h", refused),
        ]

    _run(tmp_path, test)


def test_listings_show_only_what_the_caller_may_describe(tmp_path: Path) -> None:
    async def test(server: BrokerServer) -> None:
        everything = await server.api.metadata(MetadataRequest(), ALICE)
        assert [t.name for t in everything.topics] == ["t"]
        named = await server.api.metadata(MetadataRequest(topics=("t", "secret")), ALICE)
        assert {t.name: t.error_code for t in named.topics} == {
            "t": ErrorCode.NONE,
            "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        }
        assert await server.api.list_groups(ListGroupsRequest(), ALICE) is not None

    _run(tmp_path, test)


def test_a_request_over_the_partition_limit_is_refused_by_the_api_layer(tmp_path: Path) -> None:
    async def test(server: BrokerServer) -> None:
        partitions = tuple(
            ListOffsetsPartition(partition_index=i) for i in range(MAX_PARTITIONS_PER_REQUEST + 1)
        )
        request = ListOffsetsRequest(topics=(ListOffsetsTopic(name="t", partitions=partitions),))
        failed_before = _requests("ListOffsets", "ERROR")
        with pytest.raises(InvalidRequestError) as raised:
            await server.api.list_offsets(request, ALICE)
        assert raised.value.code is ErrorCode.INVALID_REQUEST
        assert f"more than {MAX_PARTITIONS_PER_REQUEST} partitions" in raised.value.message
        assert _requests("ListOffsets", "ERROR") == failed_before + 1
        # At the bound it is served (and answered per partition).
        at_bound = ListOffsetsRequest(
            topics=(ListOffsetsTopic(name="t", partitions=partitions[:-1]),)
        )
        answer = await server.api.list_offsets(at_bound, ALICE)
        assert len(answer.topics[0].partitions) == MAX_PARTITIONS_PER_REQUEST

    _run(tmp_path, test)


def test_a_forwarded_admin_request_is_authorized_before_the_controller_is_asked(
    tmp_path: Path,
) -> None:
    async def test(server: BrokerServer) -> None:
        request = CreateTopicsRequest(topics=(CreatableTopic(name="new", num_partitions=1),))
        before = _requests("CreateTopics", "ERROR")
        with pytest.raises(TopicAuthorizationFailedError) as raised:
            await server.api.forward(request, ALICE)  # no controller runs: refused first
        assert raised.value.code is ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert _requests("CreateTopics", "ERROR") == before + 1

    _run(tmp_path, test)


def test_the_api_layer_imports_no_transport() -> None:
    root = Path(__file__).resolve().parents[2] / "replication" / "broker" / "api"
    transport = re.compile(r"^\s*(import grpc|from grpc|from kraft\._generated)", re.MULTILINE)
    offenders = [p.name for p in sorted(root.glob("*.py")) if transport.search(p.read_text())]
    assert offenders == []


def test_describe_log_dirs_needs_cluster_describe_and_describe_producers_topic_read(
    tmp_path: Path,
) -> None:
    async def test(server: BrokerServer) -> None:
        log_dirs = await server.api.describe_log_dirs(DescribeLogDirsRequest(), ADMIN)
        assert log_dirs.error_code is ErrorCode.NONE
        assert {(p.topic, p.partition) for p in log_dirs.partitions} == {("t", 0), ("secret", 0)}
        assert log_dirs.log_dir == str(tmp_path / "broker") and log_dirs.total_bytes > 0
        asked = DescribeProducersRequest(topics=(TopicPartitions(name="t", partitions=(0, 5)),))
        producers = await server.api.describe_producers(asked, ADMIN)
        assert [(p.partition, p.error_code, p.producers) for p in producers.partitions] == [
            (0, ErrorCode.NONE, ()),
            (5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ()),
        ]
        # alice over TLS may WRITE and DESCRIBE "t": neither CLUSTER DESCRIBE nor TOPIC READ.
        refused = await server.api.describe_log_dirs(DescribeLogDirsRequest(), ALICE)
        assert refused.error_code is ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert refused.partitions == ()
        refused_producers = await server.api.describe_producers(asked, ALICE)
        assert refused_producers.error_code is ErrorCode.TOPIC_AUTHORIZATION_FAILED

    _run(tmp_path, test)
