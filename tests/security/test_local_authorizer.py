"""``LocalCluster(tls=True, authorizer=True)``, ``kraft cluster up --tls --authorizer``,
``kraft cluster env`` and the demo's ACLs, without starting a node: what the nodes are
configured with, who the super users are, what cluster.json and the CLI give a client, and that
the ACLs the demo grants let its clients make exactly their calls (the walk-through and the demo
themselves run on real processes in tests/examples/test_readme.py and by
``python -m kraft.demo --tls --authorizer``)."""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kraft._generated import broker_pb2, controller_pb2
from kraft.cluster import LocalCluster
from kraft.demo.acl_step import demo_acls
from kraft.properties import load_properties
from kraft.security.guard import AccessGuard, Caller
from kraft.security.settings import STANDARD_AUTHORIZER, AuthorizationSettings
from storage.errors import ErrorCode
from tests.security.test_operations import FakeImage


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Configured (certificates made, properties written), never started."""
    data_dir = tmp_path_factory.mktemp("local-authorizer")
    cluster = LocalCluster(
        controllers=1,
        brokers=2,
        data_dir=data_dir,
        tls=True,
        authorizer=True,
        tls_clients=("alice",),
    )
    try:
        yield cluster
    finally:
        cluster.close()


def _properties(cluster: LocalCluster, node: str) -> dict[str, str]:
    return load_properties(cluster.data_dir / "config" / f"{node}.properties")


def test_every_node_authorizes_with_the_nodes_and_admin_as_the_only_super_users(
    cluster: LocalCluster,
) -> None:
    expected = "User:CN=controller-1;User:CN=broker-101;User:CN=broker-102;User:CN=admin"
    for node in ("controller-1", "broker-101", "broker-102"):
        props = _properties(cluster, node)
        assert props["authorizer.class.name"] == STANDARD_AUTHORIZER
        assert props["super.users"] == expected
        assert props["listeners"].startswith("SSL://")
        settings = AuthorizationSettings.from_properties(props)
        assert settings.enabled and not settings.allow_everyone_if_no_acl_found


def test_the_cluster_acts_as_admin_and_its_clients_are_no_super_users(
    cluster: LocalCluster,
) -> None:
    assert cluster.admin_security["ssl_certfile"].endswith("/admin.pem")
    assert cluster.client_security["ssl_certfile"].endswith("/client.pem")
    assert cluster.client_security_of("alice")["ssl_certfile"].endswith("/alice.pem")
    assert cluster.tls is not None and cluster.certs is not None
    admin_chain = Path(cluster.admin_security["ssl_certfile"]).read_bytes()
    assert cluster.tls.certificate_chain_pem == admin_chain  # controller_client, create_topic
    assert "User:CN=client" not in cluster.super_users
    assert "User:CN=alice" not in cluster.super_users


def test_the_authorizer_without_tls_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs tls=True") as refused:
        LocalCluster(controllers=1, brokers=0, data_dir=tmp_path, authorizer=True)
    assert "\n" not in str(refused.value)


def _kraft(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    from kraft.cli import main

    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cluster_up_authorizer_without_tls_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    up = ("cluster", "up", "--data-dir", str(tmp_path), "--detach")
    code, out, err = _kraft(capsys, *up, "--authorizer")
    assert code == 1 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "--authorizer needs --tls" in err and "User:ANONYMOUS" in err
    code, _, err = _kraft(capsys, *up, "--tls-clients", "alice")
    assert code == 1 and "--tls-clients needs --tls" in err
    assert not (tmp_path / "cluster.json").exists()


def test_the_detached_supervisor_gets_the_authorizer_and_the_client_names() -> None:
    import argparse

    from kraft.cli.cluster import _supervisor_argv

    args = argparse.Namespace(
        controllers=1,
        brokers=1,
        wait_timeout=5.0,
        node_log_level="info",
        base_port=None,
        tls=True,
        tls_clients="alice,bob",
        authorizer=True,
        metrics=True,
        broker_config=[],
        controller_config=[],
    )
    argv = _supervisor_argv(args, Path("/tmp/x"))
    assert "--authorizer" in argv and "--tls" in argv
    assert argv[argv.index("--tls-clients") + 1] == "alice,bob"


def test_cluster_env_exports_admin_by_default_and_a_named_client_on_request(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    from kraft.cli.cluster import CLUSTER_FILE, _cluster_info

    info = _cluster_info(cluster, cluster.data_dir)
    assert info["security"] == cluster.admin_security
    assert set(info["clients"]) == {"client", "admin", "alice"}
    assert info["super_users"] == cluster.super_users
    (cluster.data_dir / CLUSTER_FILE).write_text(json.dumps(info))
    try:

        def exports(*extra: str) -> dict[str, str]:
            code, out, err = _kraft(
                capsys, "cluster", "env", "--data-dir", str(cluster.data_dir), *extra
            )
            assert code == 0, err
            words = [w for w in shlex.split(out) if w != "export"]
            return dict(w.split("=", 1) for w in words)

        default = exports()
        assert default["KRAFT_BOOTSTRAP"] == cluster.bootstrap
        assert default["KRAFT_SECURITY_PROTOCOL"] == "SSL"
        assert default["KRAFT_SSL_CERTFILE"].endswith("/admin.pem")
        alice = exports("--client", "alice")
        assert alice["KRAFT_SSL_KEYFILE"].endswith("/alice-key.pem")
        # The same identity for a Kafka client on the (SSL) Kafka listeners, librdkafka's names.
        assert alice["KAFKA_BOOTSTRAP_SERVERS"] == cluster.kafka_bootstrap != ""
        assert alice["KAFKA_SECURITY_PROTOCOL"] == "SSL"
        assert alice["KAFKA_SSL_CA_LOCATION"] == alice["KRAFT_SSL_CAFILE"]
        assert alice["KAFKA_SSL_CERTIFICATE_LOCATION"].endswith("/alice.pem")
        assert alice["KAFKA_SSL_KEY_LOCATION"].endswith("/alice-key.pem")
        code, _, err = _kraft(
            capsys, "cluster", "env", "--data-dir", str(cluster.data_dir), "--client", "bob"
        )
        assert code == 1 and "no client certificate 'bob'" in err
        assert "admin, alice, client" in err
    finally:
        os.remove(cluster.data_dir / CLUSTER_FILE)


# -- the demo's ACLs ---------------------------------------------------------------------------

_T, _G = "demo", "demo-group"
DEMO_CALLS: dict[str, Any] = {  # what the demo's producer, consumers and group send
    "Broker/Metadata": broker_pb2.MetadataRequest(topics=[_T]),
    "Broker/InitProducerId": broker_pb2.InitProducerIdRequest(producer_id=-1, producer_epoch=-1),
    "Broker/Produce": broker_pb2.ProduceRequest(topic_data=[broker_pb2.ProduceTopicData(name=_T)]),
    "Broker/ListOffsets": broker_pb2.ListOffsetsRequest(
        replica_id=-1, topics=[broker_pb2.ListOffsetsTopic(name=_T)]
    ),
    "Broker/Fetch": broker_pb2.BrokerFetchRequest(
        replica_id=-1, topics=[broker_pb2.FetchTopic(topic=_T)]
    ),
    "Broker/FindCoordinator": broker_pb2.FindCoordinatorRequest(coordinator_keys=[_G]),
    "Broker/ConsumerGroupHeartbeat": broker_pb2.ConsumerGroupHeartbeatRequest(
        group_id=_G, subscribed_topic_names=broker_pb2.TopicNameList(items=[_T])
    ),
    "Broker/OffsetCommit": broker_pb2.OffsetCommitRequest(
        group_id=_G, topics=[broker_pb2.OffsetCommitRequestTopic(name=_T)]
    ),
    "Broker/OffsetFetch": broker_pb2.OffsetFetchRequest(group_id=_G),
}
NOT_GRANTED: dict[str, Any] = {
    "Controller/DeleteTopics": controller_pb2.DeleteTopicsRequest(topic_names=[_T]),
    "Controller/CreateTopics": controller_pb2.CreateTopicsRequest(
        topics=[controller_pb2.CreatableTopic(name="other")]
    ),
    "Broker/DeleteGroups": broker_pb2.DeleteGroupsRequest(groups_names=[_G]),
    "Controller/CreateAcls": controller_pb2.CreateAclsRequest(),
    "Broker/Fetch (another topic)": broker_pb2.BrokerFetchRequest(
        replica_id=-1, topics=[broker_pb2.FetchTopic(topic="other")]
    ),
}


def test_the_acls_the_demo_grants_allow_its_clients_calls_and_nothing_else() -> None:
    settings = AuthorizationSettings.from_properties(
        {"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:CN=admin"}
    )
    client = Caller("User:CN=client", "127.0.0.1", tls=True)
    acls = demo_acls(client.principal, _T, _G)
    granted = AccessGuard(settings, lambda: FakeImage(acls={str(i): b for i, b in enumerate(acls)}))
    bare = AccessGuard(settings, lambda: FakeImage())

    def method(key: str) -> str:
        return f"/kraft.v1.{key.split(' ')[0]}"

    for key, request in DEMO_CALLS.items():
        assert granted.check(method(key), request, client) is None, key
        if key not in ("Broker/Metadata", "Broker/OffsetFetch"):  # filtered, not refused
            assert bare.check(method(key), request, client) is not None, key
    for key, request in NOT_GRANTED.items():
        refusal = granted.check(method(key), request, client)
        assert refusal is not None, key
        assert refusal.code in (
            ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            ErrorCode.GROUP_AUTHORIZATION_FAILED,
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        )
