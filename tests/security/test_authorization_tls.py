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
``client`` certificate too: it creates the ACLs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
from storage.errors import ErrorCode, SslAuthenticationFailedError

pytestmark = [pytest.mark.process, pytest.mark.timeout(240)]

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
        tls_clients=("alice", "mallory", "nobody"),
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
