"""The per-RPC table (`kraft.security.operations`) and the guard that applies it
(`kraft.security.guard`): every RPC is covered, each checks Kafka's operation, refusals carry
Kafka's error codes, listings are filtered, node RPCs pass on plaintext only, and a changed ACL
set rebuilds the authorizer."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest

from kraft._generated import broker_pb2, broker_pb2_grpc, controller_pb2, raft_pb2
from kraft.security.acls import (
    ANONYMOUS,
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kraft.security.authorizer import Authorizer, AuthorizerConfig
from kraft.security.guard import AccessGuard, Caller, authorization_error, peer_host
from kraft.security.operations import Need, covered, filter_response, requirement, rules
from kraft.security.settings import STANDARD_AUTHORIZER, AuthorizationSettings
from kraft.transport.channels import aio_server, bind, translate_rpc_error
from storage.errors import (
    ClusterAuthorizationFailedError,
    ErrorCode,
    GroupAuthorizationFailedError,
    InvalidConfigError,
    TopicAuthorizationFailedError,
)

Op, R = AclOperation, ResourceType
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ON = AuthorizationSettings.from_properties({"authorizer.class.name": STANDARD_AUTHORIZER})
PLAIN = Caller(ANONYMOUS, "127.0.0.1", tls=False)
ALICE = Caller("User:CN=alice", "10.0.0.7", tls=True)


def acl(
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = ALLOW,
    *,
    principal: str = ANONYMOUS,
    resource_type: ResourceType = R.TOPIC,
) -> AclBinding:
    return AclBinding(
        resource_type=resource_type,
        resource_name=name,
        pattern_type=PatternType.LITERAL,
        principal=principal,
        host="*",
        operation=operation,
        permission_type=permission,
    )


@dataclass
class _Topic:
    name: str


@dataclass
class FakeImage:
    acls: Mapping[str, AclBinding] = field(default_factory=dict)
    topics: Mapping[str, str] = field(default_factory=dict)  # id -> name

    def topic_by_id(self, topic_id: str) -> _Topic | None:
        name = self.topics.get(topic_id)
        return None if name is None else _Topic(name)


def guard_of(*bindings: AclBinding, settings: AuthorizationSettings = ON) -> AccessGuard:
    image = FakeImage(acls={str(i): b for i, b in enumerate(bindings)})
    return AccessGuard(settings, lambda: image)


def _no_topics(_: str) -> str | None:
    return None


# -- the table -------------------------------------------------------------------------------


def test_every_rpc_of_every_kraft_service_has_a_rule() -> None:
    methods = [
        f"/{service.full_name}/{method.name}"
        for module in (broker_pb2, controller_pb2, raft_pb2)
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    ]
    assert len(methods) >= 30
    assert [m for m in methods if not covered(m)] == []
    assert len(rules()) == len(methods)


def test_an_rpc_the_table_does_not_know_is_refused_by_the_guard() -> None:
    refusal = guard_of().check("/kraft.v1.Broker/SomethingNew", broker_pb2.ProduceRequest(), PLAIN)
    assert refusal is not None and refusal.code is ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_health_probes_are_public() -> None:
    assert guard_of().check("/grpc.health.v1.Health/Check", None, PLAIN) is None


def _needs(method: str, request: Any) -> list[tuple[Need, ...]]:
    required = requirement(f"/kraft.v1.{method}", request, lambda i: {"id1": "gone"}.get(i))
    assert required is not None
    return list(required.groups)


def _topic(operation: AclOperation, name: str) -> tuple[Need, ...]:
    return (Need(R.TOPIC, operation, name),)


def _cluster(operation: AclOperation) -> tuple[Need, ...]:
    return (Need(R.CLUSTER, operation, CLUSTER_NAME),)


def test_produce_needs_write_on_each_topic_named_once() -> None:
    request = broker_pb2.ProduceRequest(
        topic_data=[
            broker_pb2.ProduceTopicData(name="a"),
            broker_pb2.ProduceTopicData(name="b"),
            broker_pb2.ProduceTopicData(name="a"),
        ]
    )
    assert _needs("Broker/Produce", request) == [_topic(Op.WRITE, "a"), _topic(Op.WRITE, "b")]


def test_a_consumer_fetch_needs_read_and_a_follower_fetch_is_a_node_rpc() -> None:
    topics = [broker_pb2.FetchTopic(topic="t")]
    consumer = broker_pb2.BrokerFetchRequest(replica_id=-1, topics=topics)
    follower = broker_pb2.BrokerFetchRequest(replica_id=2, topics=topics)
    assert _needs("Broker/Fetch", consumer) == [_topic(Op.READ, "t")]
    required = requirement("/kraft.v1.Broker/Fetch", follower, _no_topics)
    assert required is not None and required.node
    assert list(required.groups) == [_cluster(Op.CLUSTER_ACTION)]


def test_create_topics_needs_create_on_the_topic_or_the_cluster() -> None:
    request = controller_pb2.CreateTopicsRequest(topics=[controller_pb2.CreatableTopic(name="t")])
    assert _needs("Controller/CreateTopics", request) == [
        (Need(R.TOPIC, Op.CREATE, "t"), Need(R.CLUSTER, Op.CREATE, CLUSTER_NAME))
    ]
    internal = controller_pb2.CreateTopicsRequest(
        topics=[controller_pb2.CreatableTopic(name="__consumer_offsets")]
    )
    required = requirement("/kraft.v1.Controller/CreateTopics", internal, _no_topics)
    assert required is not None and required.node


def test_delete_topics_by_id_needs_delete_on_the_topic_the_id_names() -> None:
    request = controller_pb2.DeleteTopicsRequest(topic_names=["a"], topic_ids=["id1", "nope"])
    assert _needs("Controller/DeleteTopics", request) == [
        _topic(Op.DELETE, "a"),
        _topic(Op.DELETE, "gone"),
    ]


def test_configs_of_a_topic_are_the_topic_and_of_a_broker_the_cluster() -> None:
    resources = [
        controller_pb2.AlterConfigsResource(resource_type=2, resource_name="t"),
        controller_pb2.AlterConfigsResource(resource_type=4, resource_name="1"),
    ]
    alter = controller_pb2.IncrementalAlterConfigsRequest(resources=resources)
    assert _needs("Controller/IncrementalAlterConfigs", alter) == [
        _topic(Op.ALTER_CONFIGS, "t"),
        _cluster(Op.ALTER_CONFIGS),
    ]
    describe = controller_pb2.DescribeConfigsRequest(
        resources=[controller_pb2.DescribeConfigsResource(resource_type=2, resource_name="t")]
    )
    assert _needs("Controller/DescribeConfigs", describe) == [_topic(Op.DESCRIBE_CONFIGS, "t")]


def test_group_rpcs_need_kafkas_group_and_topic_operations() -> None:
    heartbeat = broker_pb2.ConsumerGroupHeartbeatRequest(
        group_id="g", subscribed_topic_names=broker_pb2.TopicNameList(items=["t"])
    )
    assert _needs("Broker/ConsumerGroupHeartbeat", heartbeat) == [
        (Need(R.GROUP, Op.READ, "g"),),
        _topic(Op.DESCRIBE, "t"),
    ]
    commit = broker_pb2.OffsetCommitRequest(
        group_id="g", topics=[broker_pb2.OffsetCommitRequestTopic(name="t")]
    )
    assert _needs("Broker/OffsetCommit", commit) == [
        (Need(R.GROUP, Op.READ, "g"),),
        _topic(Op.READ, "t"),
    ]
    fetch = broker_pb2.OffsetFetchRequest(group_id="g")
    assert _needs("Broker/OffsetFetch", fetch) == [(Need(R.GROUP, Op.DESCRIBE, "g"),)]
    delete = broker_pb2.DeleteGroupsRequest(groups_names=["g"])
    assert _needs("Broker/DeleteGroups", delete) == [(Need(R.GROUP, Op.DELETE, "g"),)]
    find = broker_pb2.FindCoordinatorRequest(coordinator_keys=["g"])
    assert _needs("Broker/FindCoordinator", find) == [(Need(R.GROUP, Op.DESCRIBE, "g"),)]


@pytest.mark.parametrize(
    ("method", "operation"),
    [
        ("Controller/CreateAcls", Op.ALTER),
        ("Controller/DeleteAcls", Op.ALTER),
        ("Controller/DescribeAcls", Op.DESCRIBE),
        ("Controller/ElectLeaders", Op.ALTER),
        ("Controller/DescribeQuorum", Op.DESCRIBE),
        ("Controller/UnregisterBroker", Op.ALTER),
        ("Controller/AlterPartitionReassignments", Op.ALTER),
        ("Controller/ListPartitionReassignments", Op.DESCRIBE),
        ("Controller/AddRaftVoter", Op.ALTER),
        ("Controller/RemoveRaftVoter", Op.ALTER),
    ],
)
def test_cluster_admin_rpcs_need_their_cluster_operation(
    method: str, operation: AclOperation
) -> None:
    assert _needs(method, object()) == [_cluster(operation)]


# -- the guard -------------------------------------------------------------------------------

PRODUCE_T = broker_pb2.ProduceRequest(topic_data=[broker_pb2.ProduceTopicData(name="t")])


def test_with_the_authorizer_off_every_call_passes() -> None:
    guard = guard_of(settings=AuthorizationSettings())
    assert guard.check("/kraft.v1.Broker/Produce", PRODUCE_T, PLAIN) is None


def test_without_an_acl_a_produce_is_refused_with_topic_authorization_failed() -> None:
    refusal = guard_of().check("/kraft.v1.Broker/Produce", PRODUCE_T, PLAIN)
    assert refusal is not None
    assert refusal.code is ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert "User:ANONYMOUS (from 127.0.0.1) may not WRITE topic 't'" in refusal.message


def test_an_allow_acl_permits_and_a_deny_acl_wins() -> None:
    assert guard_of(acl("t", Op.WRITE)).check("/kraft.v1.Broker/Produce", PRODUCE_T, PLAIN) is None
    refusal = guard_of(acl("t", Op.ALL), acl("t", Op.WRITE, DENY)).check(
        "/kraft.v1.Broker/Produce", PRODUCE_T, PLAIN
    )
    assert refusal is not None and refusal.code is ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_node_rpcs_pass_on_plaintext_and_need_cluster_action_over_tls() -> None:
    vote = "/kraft.v1.Raft/Vote"
    assert guard_of().check(vote, raft_pb2.VoteRequest(), PLAIN) is None
    refusal = guard_of().check(vote, raft_pb2.VoteRequest(), ALICE)
    assert refusal is not None and refusal.code is ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    supers = AuthorizationSettings.from_properties(
        {"authorizer.class.name": "x", "super.users": "User:CN=alice"}
    )
    assert guard_of(settings=supers).check(vote, raft_pb2.VoteRequest(), ALICE) is None
    granted = acl(
        CLUSTER_NAME, Op.CLUSTER_ACTION, principal=ALICE.principal, resource_type=R.CLUSTER
    )
    assert guard_of(granted).check(vote, raft_pb2.VoteRequest(), ALICE) is None


def test_init_producer_id_passes_with_write_on_any_topic_kip_679() -> None:
    method, request = "/kraft.v1.Broker/InitProducerId", broker_pb2.InitProducerIdRequest()
    refusal = guard_of().check(method, request, PLAIN)
    assert refusal is not None and refusal.code is ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert guard_of(acl("t", Op.WRITE)).check(method, request, PLAIN) is None
    assert guard_of(acl("t", Op.WRITE), acl("t", Op.WRITE, DENY)).check(
        method, request, PLAIN
    ) == guard_of().check(method, request, PLAIN)
    idempotent = acl(CLUSTER_NAME, Op.IDEMPOTENT_WRITE, resource_type=R.CLUSTER)
    assert guard_of(idempotent).check(method, request, PLAIN) is None


def test_a_group_refusal_is_group_authorization_failed() -> None:
    request = broker_pb2.OffsetCommitRequest(group_id="g")
    refusal = guard_of(acl("t", Op.READ)).check("/kraft.v1.Broker/OffsetCommit", request, PLAIN)
    assert refusal is not None and refusal.code is ErrorCode.GROUP_AUTHORIZATION_FAILED


def test_the_authorizer_is_rebuilt_when_the_images_acls_change_and_only_then() -> None:
    image = FakeImage()
    guard = AccessGuard(ON, lambda: image)
    first = guard.authorizer()
    assert guard.authorizer() is first
    assert guard.check("/kraft.v1.Broker/Produce", PRODUCE_T, PLAIN) is not None
    image.acls = {"1": acl("t", Op.WRITE)}
    assert guard.check("/kraft.v1.Broker/Produce", PRODUCE_T, PLAIN) is None
    assert guard.authorizer() is not first
    image.acls = {}  # revoked
    assert guard.check("/kraft.v1.Broker/Produce", PRODUCE_T, PLAIN) is not None


def _metadata(*names: str) -> broker_pb2.MetadataResponse:
    return broker_pb2.MetadataResponse(
        topics=[
            broker_pb2.MetadataTopic(name=n, partitions=[broker_pb2.MetadataPartition()])
            for n in names
        ]
    )


def test_metadata_of_every_topic_shows_only_the_describable_ones() -> None:
    guard = guard_of(acl("a", Op.READ))  # READ implies DESCRIBE
    response = _metadata("a", "b")
    guard.filter("/kraft.v1.Broker/Metadata", broker_pb2.MetadataRequest(), response, PLAIN)
    assert [t.name for t in response.topics] == ["a"]


def test_metadata_of_a_named_topic_not_describable_is_topic_authorization_failed() -> None:
    guard = guard_of(acl("a", Op.DESCRIBE))
    response = _metadata("a", "b")
    request = broker_pb2.MetadataRequest(topics=["a", "b"])
    guard.filter("/kraft.v1.Broker/Metadata", request, response, PLAIN)
    assert [(t.name, t.error_code, len(t.partitions)) for t in response.topics] == [
        ("a", ErrorCode.NONE, 1),
        ("b", ErrorCode.TOPIC_AUTHORIZATION_FAILED, 0),
    ]


def test_list_groups_shows_only_the_describable_groups() -> None:
    response = broker_pb2.ListGroupsResponse(
        groups=[broker_pb2.ListedGroup(group_id="g1"), broker_pb2.ListedGroup(group_id="g2")]
    )
    guard = guard_of(acl("g2", Op.DESCRIBE, resource_type=R.GROUP))
    guard.filter("/kraft.v1.Broker/ListGroups", broker_pb2.ListGroupsRequest(), response, PLAIN)
    assert [g.group_id for g in response.groups] == ["g2"]


def test_describe_cluster_hides_topics_but_not_brokers() -> None:
    response = controller_pb2.DescribeClusterResponse(
        brokers=[controller_pb2.BrokerRegistration(broker_id=1)],
        topics=[controller_pb2.TopicMetadata(name="a")],
    )
    request = controller_pb2.DescribeClusterRequest()
    filter_response("/kraft.v1.Controller/DescribeCluster", request, response, lambda _: False)
    assert len(response.brokers) == 1 and list(response.topics) == []


# -- the shell: principal, host, errors, settings ---------------------------------------------


@pytest.mark.parametrize(
    ("peer", "host"),
    [("ipv4:127.0.0.1:5555", "127.0.0.1"), ("ipv6:[::1]:5555", "::1"), ("", "")],
)
def test_the_host_of_a_call_is_the_peers_address(peer: str, host: str) -> None:
    assert peer_host(peer) == host


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        (ErrorCode.TOPIC_AUTHORIZATION_FAILED, TopicAuthorizationFailedError),
        (ErrorCode.GROUP_AUTHORIZATION_FAILED, GroupAuthorizationFailedError),
        (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ClusterAuthorizationFailedError),
    ],
)
def test_a_refusal_becomes_its_typed_error_on_the_client(code: ErrorCode, cls: type) -> None:
    error = authorization_error(f"{code.name}: User:ANONYMOUS may not ...")
    assert isinstance(error, cls) and error.code is code


def test_settings_read_kafkas_keys_and_refuse_malformed_ones() -> None:
    props = {
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:a; User:b",
        "allow.everyone.if.no.acl.found": "true",
        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/L,DEFAULT",
    }
    settings = AuthorizationSettings.from_properties(props)
    assert settings.enabled and settings.super_users == {"User:a", "User:b"}
    assert settings.authorizer == AuthorizerConfig(
        enabled=True,
        super_users=frozenset({"User:a", "User:b"}),
        allow_everyone_if_no_acl_found=True,
    )
    assert AuthorizationSettings.from_properties(settings.to_properties()) == settings
    assert not AuthorizationSettings.from_properties({}).enabled
    for bad in (
        {"super.users": "alice"},
        {"allow.everyone.if.no.acl.found": "yes"},
        {"ssl.principal.mapping.rules": "RULE:oops"},
    ):
        with pytest.raises(InvalidConfigError):
            AuthorizationSettings.from_properties(bad)


def test_authorize_any_needs_an_allow_that_is_not_denied() -> None:
    config = AuthorizerConfig(enabled=True)
    assert not Authorizer([], config).authorize_any(ANONYMOUS, "h", Op.WRITE, R.TOPIC)
    assert Authorizer([acl("t", Op.WRITE)], config).authorize_any(ANONYMOUS, "h", Op.WRITE, R.TOPIC)
    denied = [acl("t", Op.WRITE), acl("*", Op.WRITE, DENY)]
    assert not Authorizer(denied, config).authorize_any(ANONYMOUS, "h", Op.WRITE, R.TOPIC)
    assert not Authorizer([acl("t", Op.READ)], config).authorize_any(
        ANONYMOUS, "h", Op.WRITE, R.TOPIC
    )


class _Broker(broker_pb2_grpc.BrokerServicer):  # type: ignore[misc]
    async def Produce(self, request: Any, context: Any) -> Any:
        return broker_pb2.ProduceResponse()

    async def Metadata(self, request: Any, context: Any) -> Any:
        return _metadata("a", "b")


def test_the_interceptor_refuses_before_the_servicer_and_filters_listings() -> None:
    """Through a real grpc.aio server: the client gets the typed error."""

    async def run() -> None:
        image = FakeImage(acls={"1": acl("a", Op.DESCRIBE)})
        server = aio_server(guard=AccessGuard(ON, lambda: image))
        broker_pb2_grpc.add_BrokerServicer_to_server(_Broker(), server)
        port = bind(server, "127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = broker_pb2_grpc.BrokerStub(channel)
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await stub.Produce(PRODUCE_T, timeout=5)
                error = translate_rpc_error(refused.value, f"127.0.0.1:{port}", "broker")
                assert isinstance(error, TopicAuthorizationFailedError)
                listed = await stub.Metadata(broker_pb2.MetadataRequest(), timeout=5)
                assert [t.name for t in listed.topics] == ["a"]
                image.acls = {**image.acls, "2": acl("t", Op.WRITE)}
                await stub.Produce(PRODUCE_T, timeout=5)
        finally:
            await server.stop(None)

    asyncio.run(run())


class _Context:
    def __init__(self, auth: dict[str, list[bytes]], peer: str) -> None:
        self._auth, self._peer = auth, peer

    def auth_context(self) -> dict[str, list[bytes]]:
        return self._auth

    def peer(self) -> str:
        return self._peer


def test_the_caller_is_the_mapped_certificate_subject_over_tls_else_anonymous(
    tmp_path: Path,
) -> None:
    from kraft.security.certs import create_certs
    from kraft.security.guard import caller_of

    pem = create_certs(tmp_path, clients=["alice"]).client("alice").certfile.read_bytes()
    tls = {"transport_security_type": [b"ssl"], "x509_pem_cert": [pem]}
    rules = AuthorizationSettings.from_properties(
        {"ssl.principal.mapping.rules": "RULE:^CN=(.*)$/$1/U"}
    )
    assert caller_of(_Context(tls, "ipv4:10.0.0.7:4242"), ON) == Caller(
        "User:CN=alice", "10.0.0.7", tls=True
    )
    assert caller_of(_Context(tls, "ipv4:10.0.0.7:4242"), rules).principal == "User:ALICE"
    no_certificate = {"transport_security_type": [b"ssl"]}
    assert caller_of(_Context(no_certificate, "ipv4:10.0.0.7:1"), ON).principal == ANONYMOUS
    plaintext = {"transport_security_type": [b"insecure"]}
    assert caller_of(_Context(plaintext, "ipv6:[::1]:1"), ON) == Caller(ANONYMOUS, "::1", False)


def test_operations_md_names_every_rpc_of_the_table() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    start = text.index("## Authorization: principals and ACLs")
    section = text[start : text.index("\n## ", start + 1)]
    named = [m for m in rules() if not m.startswith("Raft/")]
    assert [m for m in named if m.split("/")[1] not in section] == []
    assert "every Raft RPC" in section
