"""The refusal table of issue 17 on a mTLS cluster with the authorizer on every node: each
client-facing RPC (and two node RPCs) called by five callers -

- no client certificate, and a certificate from another CA: refused at the TLS handshake;
- a valid certificate without an ACL (``nobody``): refused with TOPIC_, GROUP_ or
  CLUSTER_AUTHORIZATION_FAILED (a listing hides what it may not describe);
- a certificate with the ACLs (``alice``): allowed (the call passes authorization; what the
  node then answers is the operation's business);
- a certificate with the ACLs and a DENY of everything (``mallory``): refused.

Every expected refusal must be a refusal and every allowed call must pass. The nodes are super
users by their certificates' principals (``User:CN=broker-101`` ...), the cluster's own
``client`` certificate too: it creates the ACLs.

Then ``bob``, with real clients: a grant, a DENY and a revocation each take effect within
`ACL_BOUND_S` (the time for the broker to replay one metadata record), and ``kraft acls``
adds, lists and removes over TLS. The plaintext rules (everyone ``User:ANONYMOUS``, node RPCs
let through) are unit-tested in test_operations.py."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest

from kraft._generated import (
    broker_pb2,
    broker_pb2_grpc,
    controller_pb2,
    controller_pb2_grpc,
    raft_pb2,
    raft_pb2_grpc,
)
from kraft.cluster.local import LocalCluster
from kraft.security.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kraft.security.certs import create_certs
from kraft.security.settings import STANDARD_AUTHORIZER
from kraft.security.tls import TlsConfig, client_tls
from kraft.transport.channels import client_channel, translate_rpc_error
from kraft.types import TopicPartition
from replication.clients.admin import AdminClient
from replication.clients.consumer import Consumer
from replication.clients.producer import Producer
from storage.errors import (
    ClusterAuthorizationFailedError,
    ErrorCode,
    KraftError,
    SslAuthenticationFailedError,
    TopicAuthorizationFailedError,
)

pytestmark = [pytest.mark.process, pytest.mark.timeout(240)]

ACL_BOUND_S = 5.0
"""How long a broker may take to apply a created or removed ACL: the time to fetch and replay
one metadata record (10-50 ms measured on loopback; the tests wait on the condition, this is
only the deadline)."""

T = TypeVar("T")

SUPER_USERS = "User:CN=controller-1;User:CN=broker-101;User:CN=client"
AUTH = {"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": SUPER_USERS}
CALLERS = ("no-certificate", "other-ca", "nobody", "alice", "mallory")
HANDSHAKE, REFUSED, ALLOWED = "handshake", "refused", "allowed"
AUTHORIZATION_ERRORS = {
    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
}


def _acl(
    resource_type: ResourceType,
    name: str,
    principal: str,
    operation: AclOperation = AclOperation.ALL,
    permission: AclPermissionType = AclPermissionType.ALLOW,
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


def _grants(principal: str) -> list[AclBinding]:
    """Everything a client does, but not CLUSTER_ACTION (the nodes' operation)."""
    cluster_ops = (
        AclOperation.CREATE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
        AclOperation.ALTER_CONFIGS,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
    )
    return [
        _acl(ResourceType.TOPIC, "*", principal),
        _acl(ResourceType.GROUP, "*", principal),
        *(_acl(ResourceType.CLUSTER, CLUSTER_NAME, principal, op) for op in cluster_ops),
    ]


def _denies(principal: str) -> list[AclBinding]:
    deny = AclPermissionType.DENY
    return [
        _acl(ResourceType.TOPIC, "*", principal, permission=deny),
        _acl(ResourceType.GROUP, "*", principal, permission=deny),
        _acl(ResourceType.CLUSTER, CLUSTER_NAME, principal, permission=deny),
    ]


DAVE = "User:CN=dave"


def _partial_grants(principal: str) -> list[AclBinding]:
    """Some topics, not others: ``orders`` and every ``dave-`` topic, and group ``g``."""
    prefixed = AclBinding(
        resource_type=ResourceType.TOPIC,
        resource_name="dave-",
        pattern_type=PatternType.PREFIXED,
        principal=principal,
        host="*",
        operation=AclOperation.ALL,
        permission_type=AclPermissionType.ALLOW,
    )
    return [
        _acl(ResourceType.TOPIC, "orders", principal),
        prefixed,
        _acl(ResourceType.GROUP, "g", principal, AclOperation.READ),
    ]


class Setup:
    def __init__(self, cluster: LocalCluster, tls: dict[str, TlsConfig | None]) -> None:
        self.cluster = cluster
        self.tls = tls


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    data_dir = tmp_path_factory.mktemp("authz-tls")
    with LocalCluster(
        controllers=1,
        brokers=1,
        data_dir=data_dir,
        tls=True,
        tls_clients=("alice", "mallory", "nobody", "bob", "dave"),
        broker_config=AUTH,
        controller_config=AUTH,
    ) as cluster:
        cluster.start()
        cluster.wait_until_healthy(timeout=120)
        cluster.create_topic("orders", partitions=1, replication_factor=1)
        other = create_certs(Path(data_dir) / "other-ca", clients=["alice"]).client("alice")
        ca = cluster.client_security["ssl_cafile"]
        tls: dict[str, TlsConfig | None] = {
            "no-certificate": client_tls("SSL", ca),
            "other-ca": client_tls("SSL", ca, other.certfile, other.keyfile),
            **{n: client_tls(**cluster.client_security_of(n)) for n in ("nobody", "alice")},
            "mallory": client_tls(**cluster.client_security_of("mallory")),
            "client": cluster.tls,
        }
        with AdminClient(cluster.bootstrap, timeout=30, **cluster.client_security) as admin:
            admin.create_acls(
                [
                    *_grants("User:CN=alice"),
                    *_grants("User:CN=mallory"),
                    *_denies("User:CN=mallory"),
                    *_partial_grants(DAVE),
                ]
            )
            # A group to list and describe (an admin commit creates it).
            admin.alter_group_offsets("g", {TopicPartition("orders", 0): 0})
        yield Setup(cluster, tls)


BROKER_CALLS: dict[str, tuple[str, Any]] = {
    "Produce": ("Produce", broker_pb2.ProduceRequest(acks=1, timeout_ms=1000, topic_data=[
        broker_pb2.ProduceTopicData(name="orders")])),
    "Fetch": ("Fetch", broker_pb2.BrokerFetchRequest(replica_id=-1, max_bytes=1000, topics=[
        broker_pb2.FetchTopic(topic="orders", partitions=[broker_pb2.FetchPartition(
            partition=0, current_leader_epoch=-1, partition_max_bytes=1000)])])),
    "ListOffsets": ("ListOffsets", broker_pb2.ListOffsetsRequest(replica_id=-1, topics=[
        broker_pb2.ListOffsetsTopic(name="orders")])),
    "Metadata": ("Metadata", broker_pb2.MetadataRequest(topics=["orders"])),
    "InitProducerId": ("InitProducerId", broker_pb2.InitProducerIdRequest(
        producer_id=-1, producer_epoch=-1)),
    "FindCoordinator": ("FindCoordinator", broker_pb2.FindCoordinatorRequest(
        coordinator_keys=["g"])),
    "OffsetCommit": ("OffsetCommit", broker_pb2.OffsetCommitRequest(
        group_id="g", generation_id_or_member_epoch=-1, topics=[
            broker_pb2.OffsetCommitRequestTopic(name="orders")])),
    "OffsetFetch": ("OffsetFetch", broker_pb2.OffsetFetchRequest(group_id="g", member_epoch=-1)),
    "ListGroups": ("ListGroups", broker_pb2.ListGroupsRequest()),
    "ConsumerGroupDescribe": ("ConsumerGroupDescribe", broker_pb2.ConsumerGroupDescribeRequest(
        group_ids=["g"])),
    "DeleteGroups": ("DeleteGroups", broker_pb2.DeleteGroupsRequest(groups_names=["ghost"])),
}  # fmt: skip

ANY_FILTER = controller_pb2.AclBindingFilter(
    resource_type=1, pattern_type=1, operation=1, permission_type=1
)
ADMIN_CALLS: dict[str, tuple[str, Any]] = {  # forwarded by the broker
    "CreateTopics": ("CreateTopics", controller_pb2.CreateTopicsRequest(validate_only=True, topics=[
        controller_pb2.CreatableTopic(name="fresh", num_partitions=1, replication_factor=1)])),
    "DeleteTopics": ("DeleteTopics", controller_pb2.DeleteTopicsRequest(topic_names=["ghost"])),
    "CreatePartitions": ("CreatePartitions", controller_pb2.CreatePartitionsRequest(
        validate_only=True, topics=[controller_pb2.CreatePartitionsTopic(name="orders", count=2)])),
    "IncrementalAlterConfigs": ("IncrementalAlterConfigs",
        controller_pb2.IncrementalAlterConfigsRequest(validate_only=True, resources=[
            controller_pb2.AlterConfigsResource(resource_type=2, resource_name="orders")])),
    "DescribeConfigs": ("DescribeConfigs", controller_pb2.DescribeConfigsRequest(resources=[
        controller_pb2.DescribeConfigsResource(resource_type=2, resource_name="orders")])),
    "ElectLeaders": ("ElectLeaders", controller_pb2.ElectLeadersRequest(election_type=0)),
    "AlterPartitionReassignments": ("AlterPartitionReassignments",
        controller_pb2.AlterPartitionReassignmentsRequest()),
    "ListPartitionReassignments": ("ListPartitionReassignments",
        controller_pb2.ListPartitionReassignmentsRequest()),
    "CreateAcls": ("CreateAcls", controller_pb2.CreateAclsRequest()),
    "DeleteAcls": ("DeleteAcls", controller_pb2.DeleteAclsRequest()),
    "DescribeAcls": ("DescribeAcls", controller_pb2.DescribeAclsRequest(filter=ANY_FILTER)),
}  # fmt: skip


def _outcome(setup: Setup, caller: str, target: str, service: str, call: tuple[str, Any]) -> str:
    """HANDSHAKE, REFUSED or ALLOWED for one call by ``caller`` to ``target``."""
    cluster, tls = setup.cluster, setup.tls[caller]
    address = (
        cluster.bootstrap.split(",")[0] if target == "broker" else cluster.controller_bootstrap
    )
    method, request = call
    channel = client_channel(address, tls)
    try:
        stub: Any = {
            "broker": broker_pb2_grpc.BrokerStub,
            "controller": controller_pb2_grpc.ControllerStub,
            "raft": raft_pb2_grpc.RaftStub,
        }[service](channel)
        try:
            response = getattr(stub, method)(request, timeout=15)
        except grpc.RpcError as e:
            error = translate_rpc_error(e, address, target, tls)
            if isinstance(error, SslAuthenticationFailedError):
                return HANDSHAKE
            return REFUSED if error.code in AUTHORIZATION_ERRORS else ALLOWED
    finally:
        channel.close()
    if method == "Metadata":  # a named topic it may not describe: answered per topic
        (topic,) = response.topics
        return REFUSED if topic.error_code in AUTHORIZATION_ERRORS else ALLOWED
    if method == "ListGroups":  # a listing hides what it may not describe
        return ALLOWED if "g" in {g.group_id for g in response.groups} else REFUSED
    return ALLOWED


CLIENT_EXPECTED = {
    "no-certificate": HANDSHAKE,
    "other-ca": HANDSHAKE,
    "nobody": REFUSED,
    "alice": ALLOWED,
    "mallory": REFUSED,
}

ROWS = [
    *(("broker", "broker", name, call, CLIENT_EXPECTED) for name, call in BROKER_CALLS.items()),
    *(("broker", "controller", name, call, CLIENT_EXPECTED) for name, call in ADMIN_CALLS.items()),
    # Straight to the controller (Kafka 3.7+ admin clients may, KIP-919): it checks too.
    ("controller", "controller", "DescribeQuorum@controller",
     ("DescribeQuorum", controller_pb2.DescribeQuorumRequest()), CLIENT_EXPECTED),
    ("controller", "controller", "CreateAcls@controller",
     ("CreateAcls", controller_pb2.CreateAclsRequest()), CLIENT_EXPECTED),
    # Node RPCs: CLUSTER_ACTION, which only the nodes (super users) have; alice has no grant.
    ("broker", "controller", "BrokerHeartbeat",
     ("BrokerHeartbeat", controller_pb2.BrokerHeartbeatRequest(broker_id=999, broker_epoch=1)),
     {**CLIENT_EXPECTED, "alice": REFUSED, "client": ALLOWED}),
    ("controller", "raft", "Raft.Vote",
     ("Vote", raft_pb2.VoteRequest()), {**CLIENT_EXPECTED, "alice": REFUSED}),
]  # fmt: skip


def test_every_rpc_refuses_every_caller_it_must_and_allows_the_others(setup: Setup) -> None:
    # The ACLs apply once the broker and the controller replayed them: wait on alice's view.
    deadline = time.monotonic() + 30
    while _outcome(setup, "alice", "broker", "broker", BROKER_CALLS["ListGroups"]) != ALLOWED:
        assert time.monotonic() < deadline, "the ACLs were not applied within 30s"
        time.sleep(0.05)
    wrong: list[str] = []
    checked = 0
    for target, service, name, call, expected in ROWS:
        for caller, outcome in expected.items():
            got = _outcome(setup, caller, target, service, call)
            checked += 1
            if got != outcome:
                wrong.append(f"{name} by {caller}: {got}, expected {outcome}")
    assert wrong == [], "\n".join(wrong)
    assert checked >= 5 * 25


# -- per-topic answers ----------------------------------------------------------------------------

B, C = broker_pb2, controller_pb2
PER_TOPIC_CALLS: dict[str, tuple[str, str, Any]] = {  # dave may use orders and dave-*, not secret
    "Produce": ("broker", "Produce", B.ProduceRequest(acks=1, timeout_ms=1000, topic_data=[
        B.ProduceTopicData(name=n, partition_data=[B.ProducePartitionData(index=0)])
        for n in ("orders", "secret")])),
    "Fetch": ("broker", "Fetch", B.BrokerFetchRequest(replica_id=-1, max_bytes=1000, topics=[
        B.FetchTopic(topic=n, partitions=[B.FetchPartition(
            partition=0, current_leader_epoch=-1, partition_max_bytes=1000)])
        for n in ("orders", "secret")])),
    "ListOffsets": ("broker", "ListOffsets", B.ListOffsetsRequest(replica_id=-1, topics=[
        B.ListOffsetsTopic(name=n, partitions=[B.ListOffsetsPartition(partition_index=0)])
        for n in ("orders", "secret")])),
    "Metadata": ("broker", "Metadata", B.MetadataRequest(topics=["orders", "secret"])),
    "OffsetCommit": ("broker", "OffsetCommit", B.OffsetCommitRequest(
        group_id="g", generation_id_or_member_epoch=-1, topics=[
            B.OffsetCommitRequestTopic(name=n, partitions=[
                B.OffsetCommitRequestPartition(partition_index=0, committed_offset=0)])
            for n in ("orders", "secret")])),
    "CreateTopics": ("controller", "CreateTopics", C.CreateTopicsRequest(
        validate_only=True, topics=[
            C.CreatableTopic(name=n, num_partitions=1, replication_factor=1)
            for n in ("dave-new", "secret")])),
    "DeleteTopics": ("controller", "DeleteTopics", C.DeleteTopicsRequest(
        topic_names=["dave-ghost", "secret"])),
}  # fmt: skip


def _topic_errors(method: str, response: Any) -> dict[str, set[int]]:
    """topic -> the error codes the response gives it (per partition or per topic)."""
    if method == "Produce":
        return {t.name: {p.error_code for p in t.partition_responses} for t in response.responses}
    if method == "Fetch":
        return {t.topic: {p.error_code for p in t.partitions} for t in response.responses}
    if method in ("ListOffsets", "OffsetCommit"):
        return {t.name: {p.error_code for p in t.partitions} for t in response.topics}
    return {t.name: {t.error_code} for t in response.topics}


@pytest.mark.parametrize("name", list(PER_TOPIC_CALLS))
def test_a_request_naming_a_refused_topic_and_allowed_ones_is_answered_per_topic(
    setup: Setup, name: str
) -> None:
    """As Kafka: TOPIC_AUTHORIZATION_FAILED for the refused topic, a normal answer (whatever
    the operation says: NONE, TOPIC_ALREADY_EXISTS, UNKNOWN_TOPIC_OR_PARTITION, ...) for the
    allowed one."""
    cluster = setup.cluster
    service, method, request = PER_TOPIC_CALLS[name]
    dave = client_tls(**cluster.client_security_of("dave"))
    address = cluster.bootstrap.split(",")[0]
    stubs: dict[str, Any] = {
        "broker": broker_pb2_grpc.BrokerStub,
        "controller": controller_pb2_grpc.ControllerStub,
    }

    def answer() -> dict[str, set[int]]:
        channel = client_channel(address, dave)
        try:
            response = getattr(stubs[service](channel), method)(request, timeout=15)
        except grpc.RpcError as e:  # refused whole: the ACLs are not applied yet
            raise translate_rpc_error(e, address, "broker", dave) from None
        finally:
            channel.close()
        return _topic_errors(method, response)

    errors, _ = _until(answer, "dave's ACLs")  # applied on the broker within the bound
    failed = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    assert errors.pop("secret") == {failed}, errors
    (allowed,) = errors.values()
    assert failed not in allowed and allowed, errors


# -- grants, denies and revocations with real clients --------------------------------------------

BOB = "User:CN=bob"


def _admin(setup: Setup) -> AdminClient:
    cluster = setup.cluster
    return AdminClient(cluster.bootstrap, timeout=30, **cluster.client_security)


def _exactly(binding: AclBinding) -> AclBindingFilter:
    return AclBindingFilter(
        resource_type=binding.resource_type,
        resource_name=binding.resource_name,
        pattern_type=binding.pattern_type,
        principal=binding.principal,
        host=binding.host,
        operation=binding.operation,
        permission_type=binding.permission_type,
    )


def _until(check: Callable[[], T], what: str) -> tuple[T, float]:
    """Retry ``check`` until it returns without raising; its value and the time taken."""
    start = time.monotonic()
    while True:
        try:
            return check(), time.monotonic() - start
        except (KraftError, AssertionError) as e:
            if time.monotonic() - start > ACL_BOUND_S:
                raise AssertionError(f"{what} not within {ACL_BOUND_S}s: {e}") from e
            time.sleep(0.02)


def _produce(setup: Setup, value: bytes, *, idempotent: bool = True) -> int:
    cluster = setup.cluster
    with Producer(
        cluster.bootstrap,
        max_block_ms=2_000,
        delivery_timeout_ms=3_000,
        request_timeout_ms=2_000,
        enable_idempotence=idempotent,
        **cluster.client_security_of("bob"),
    ) as producer:
        return producer.send("orders", value).result(timeout=10).offset


def _refusal(call: Callable[[], object]) -> KraftError:
    """The error ``call`` raised; AssertionError when it succeeded."""
    try:
        call()
    except KraftError as e:
        return e
    raise AssertionError("the call was not refused")


def test_a_grant_a_deny_and_a_revocation_take_effect_within_the_bound(setup: Setup) -> None:
    write = _acl(ResourceType.TOPIC, "orders", BOB, AclOperation.WRITE)
    read = _acl(ResourceType.TOPIC, "orders", BOB, AclOperation.READ)
    deny = _acl(ResourceType.TOPIC, "orders", BOB, AclOperation.WRITE, AclPermissionType.DENY)
    assert isinstance(_refusal(lambda: _produce(setup, b"no")), TopicAuthorizationFailedError)
    with _admin(setup) as admin:
        admin.create_acls([write, read])
        offset, granted_s = _until(lambda: _produce(setup, b"yes"), "the grant")
        security = setup.cluster.client_security_of("bob")
        with Consumer(setup.cluster.bootstrap, request_timeout_ms=2_000, **security) as consumer:
            consumer.assign([TopicPartition("orders", 0)])
            consumer.seek(TopicPartition("orders", 0), offset)
            records, _ = _until(lambda: _non_empty(consumer.poll(1.0)), "the READ grant")
            assert records[0].value == b"yes"

        admin.create_acls([deny])
        _, denied_s = _until(lambda: _refusal(lambda: _produce(setup, b"x")), "the deny")
        # KIP-679: no topic left that bob may write, so not even a producer id; without
        # idempotence, the produce itself is refused.
        assert isinstance(_refusal(lambda: _produce(setup, b"x")), ClusterAuthorizationFailedError)
        refused = _refusal(lambda: _produce(setup, b"x", idempotent=False))
        assert isinstance(refused, TopicAuthorizationFailedError)

        admin.delete_acls([_exactly(deny)])
        _until(lambda: _produce(setup, b"again"), "the removal of the deny")
        admin.delete_acls([_exactly(write)])
        _, revoked_s = _until(
            lambda: _topic_refused(lambda: _produce(setup, b"x", idempotent=False)),
            "the revocation",
        )
    print(f"ACL applied after: grant {granted_s:.3f}s deny {denied_s:.3f}s revoke {revoked_s:.3f}s")


def _topic_refused(call: Callable[[], object]) -> None:
    assert isinstance(_refusal(call), TopicAuthorizationFailedError)


def _non_empty(records: list[T]) -> list[T]:
    assert records, "no record yet"
    return records


def test_kraft_acls_adds_lists_and_removes_over_tls(
    setup: Setup, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kraft.cli import main

    for key, value in setup.cluster.client_security.items():
        monkeypatch.setenv(f"KRAFT_{key.upper()}", value)
    monkeypatch.setenv("KRAFT_BOOTSTRAP", setup.cluster.bootstrap)
    acl = ["--allow-principal", "User:CN=carol", "--topic", "audit-", "--host", "10.0.0.1"]
    add = ["acls", "add", *acl, "--operation", "Read", "--operation", "describe_configs"]
    assert main([*add, "--resource-pattern-type", "prefixed", "--json"]) == 0
    capsys.readouterr()
    match = ["--topic", "audit-x", "--resource-pattern-type", "match", "--json"]
    assert main(["acls", "list", *match]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {(a["principal"], a["operation"], a["pattern_type"], a["host"]) for a in listed} == {
        ("User:CN=carol", "READ", "PREFIXED", "10.0.0.1"),
        ("User:CN=carol", "DESCRIBE_CONFIGS", "PREFIXED", "10.0.0.1"),
        # alice's and mallory's topic ACLs name "*", which applies to audit-x too
        *((p, "ALL", "LITERAL", "*") for p in ("User:CN=alice", "User:CN=mallory")),
    }
    remove = ["acls", "remove", "--allow-principal", "User:CN=carol", "--topic", "audit-"]
    assert main([*remove, "--resource-pattern-type", "prefixed", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 2
    assert main(["acls", "list", "--principal", "User:CN=carol", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
