"""The Kafka listener over SSL with the authorizer (issue 25 items 1 and 5): kafka-python,
aiokafka and confluent-kafka (librdkafka) connect with the client certificates `kraft certs`
makes (through `LocalCluster(tls=True, authorizer=True)`); ``alice``, granted the topic and
her group, produces idempotently and consumes; ``nobody``, granted nothing, gets
TOPIC_AUTHORIZATION_FAILED as each client's own exception type. Her principal is her
certificate's subject through ``ssl.principal.mapping.rules`` (``User:CN=alice``), authorized
by the same ACLs as a gRPC call.

One cluster serves the module (1 controller, 2 brokers; the suite's time is tight). Its
brokers' KAFKA listeners serve a certificate of their own (Kafka's
``listener.name.kafka.ssl.keystore.location``), their gRPC listeners the broker's.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from typing import Any

import aiokafka
import aiokafka.errors
import aiokafka.helpers
import confluent_kafka
import kafka
import kafka.errors
import pytest
from confluent_kafka.admin import AdminClient as ConfluentAdmin

from kraft.cluster import LocalCluster
from kraft.cluster.local import LOCAL_OFFSETS_TOPIC_PARTITIONS
from kraft.security.acls import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from replication.clients import AdminClient
from replication.group.hashing import partition_for_group
from tests.kafka_wire.wire import decode_response, request_frame

pytestmark = [pytest.mark.process, pytest.mark.timeout(240)]

TOPIC = "secured"
PARTITIONS = 2
RECORDS = 10


def grant(
    resource: ResourceType, name: str, operation: AclOperation, pattern: PatternType
) -> AclBinding:
    return AclBinding(
        resource_type=resource,
        resource_name=name,
        pattern_type=pattern,
        principal="User:CN=alice",
        host="*",
        operation=operation,
        permission_type=AclPermissionType.ALLOW,
    )


KAFKA_LISTENER_CERTIFICATE = "controller-1"
"""The certificate every broker's KAFKA listener serves, by its own ssl.keystore.location
(Kafka's ``listener.name.kafka.`` prefix): one of the cluster's CA, not the broker's own,
which its SSL (gRPC) listener serves."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    data_dir = tmp_path_factory.mktemp("cluster")
    keystore = data_dir / "certs" / f"{KAFKA_LISTENER_CERTIFICATE}-keystore.pem"  # `kraft certs`
    with LocalCluster(
        controllers=1,
        brokers=2,
        data_dir=data_dir,
        tls=True,
        authorizer=True,
        tls_clients=("alice", "nobody"),
        broker_config={"listener.name.kafka.ssl.keystore.location": str(keystore)},
    ) as c:
        c.wait_until_healthy(timeout=60)
        with AdminClient(c.bootstrap, **c.admin_security) as admin:
            admin.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=2)
            admin.wait_for_leaders(TOPIC, timeout=30)
            admin.create_acls(
                [
                    grant(ResourceType.TOPIC, TOPIC, AclOperation.ALL, PatternType.LITERAL),
                    grant(ResourceType.GROUP, "alice-", AclOperation.ALL, PatternType.PREFIXED),
                ]
            )
        wait_until_every_broker_grants_alice(c)
        yield c


def wait_until_every_broker_grants_alice(cluster: LocalCluster, timeout_s: float = 15.0) -> None:
    """Each broker applies the ACLs when it replays their records: ask each one's Kafka
    listener for the topic as alice until none refuses it."""
    for address in cluster.kafka_addresses.values():
        admin = ConfluentAdmin({**librdkafka_ssl(cluster, "alice"), "bootstrap.servers": address})
        deadline = time.monotonic() + timeout_s
        while True:
            topic = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
            if topic.error is None:
                break
            assert time.monotonic() < deadline, f"{address} still refuses alice: {topic.error}"
            time.sleep(0.05)  # NB: polling a condition, with the deadline above


def kafka_python_ssl(cluster: LocalCluster, name: str) -> dict[str, Any]:
    """kafka-python's and aiokafka's settings for certificate ``name``: `client_security_of`
    as it is (kafka-python's names)."""
    return {"bootstrap_servers": cluster.kafka_bootstrap, **cluster.client_security_of(name)}


def librdkafka_ssl(cluster: LocalCluster, name: str) -> dict[str, Any]:
    security = cluster.client_security_of(name)
    return {
        "bootstrap.servers": cluster.kafka_bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": security["ssl_cafile"],
        "ssl.certificate.location": security["ssl_certfile"],
        "ssl.key.location": security["ssl_keyfile"],
        # NB: the leaf certificates name 127.0.0.1/localhost; librdkafka checks that too.
        "ssl.endpoint.identification.algorithm": "https",
    }


def read_frame(conn: ssl.SSLSocket) -> bytes:
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data[4:]


def values(prefix: str) -> list[bytes]:
    return sorted(f"{prefix}-{i}".encode() for i in range(RECORDS))


def test_the_kafka_listeners_are_ssl_and_advertised(cluster: LocalCluster) -> None:
    registered = cluster.controller_client().describe_cluster(topic_names=()).brokers
    assert {b.broker_id: [(e.name, e.address) for e in b.listeners] for b in registered} == {
        i: [("SSL", cluster.broker_addresses[i]), ("KAFKA", cluster.kafka_addresses[i])]
        for i in cluster.broker_ids
    }
    host, _, port = cluster.kafka_addresses[cluster.broker_ids[0]].rpartition(":")
    api_versions = request_frame(18, 0, {}, correlation_id=7)
    # With alice's certificate, ApiVersions is answered over TLS.
    alice = cluster.client_security_of("alice")
    context = ssl.create_default_context(cafile=alice["ssl_cafile"])
    context.load_cert_chain(alice["ssl_certfile"], alice["ssl_keyfile"])
    with (
        socket.create_connection((host, int(port)), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as conn,
    ):
        conn.sendall(api_versions)
        answer = read_frame(conn)
        assert decode_response(18, 0, answer)[0] == 7
    # Without a certificate (ssl.client.auth=required), the handshake's end is refused.
    bare = ssl.create_default_context(cafile=alice["ssl_cafile"])
    with (
        socket.create_connection((host, int(port)), timeout=10) as raw,
        bare.wrap_socket(raw, server_hostname=host) as conn,
        pytest.raises((ssl.SSLError, ConnectionError)),
    ):
        conn.sendall(api_versions)
        read_frame(conn)
    # A plaintext Kafka request gets no Kafka answer: a TLS alert, or the connection closed.
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(api_versions)
        reply = conn.recv(64)
        assert reply == b"" or reply[0] == 0x15  # 0x15: a TLS alert record


def served_certificate(address: str, context: ssl.SSLContext) -> str:
    """The common name of the certificate the listener at ``address`` serves."""
    host, _, port = address.rpartition(":")
    with (
        socket.create_connection((host, int(port)), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as conn,
    ):
        subject = conn.getpeercert()["subject"]
    return str(dict(field for rdn in subject for field in rdn)["commonName"])


def test_each_listener_serves_its_own_certificate(cluster: LocalCluster) -> None:
    """A broker's two listeners, two certificates: the SSL (gRPC) listener serves the broker's
    (the broker-wide ssl.keystore.location), the KAFKA listener its own
    (listener.name.kafka.ssl.keystore.location); the clients above connect through the latter."""
    alice = cluster.client_security_of("alice")
    context = ssl.create_default_context(cafile=alice["ssl_cafile"])
    context.load_cert_chain(alice["ssl_certfile"], alice["ssl_keyfile"])
    context.set_alpn_protocols(["h2"])  # gRPC's
    for broker in cluster.broker_ids:
        assert served_certificate(cluster.broker_addresses[broker], context) == f"broker-{broker}"
        kafka_listener = served_certificate(cluster.kafka_addresses[broker], context)
        assert kafka_listener == KAFKA_LISTENER_CERTIFICATE


# -- kafka-python -------------------------------------------------------------------------------


def test_kafka_python_over_ssl_alice_produces_and_consumes_nobody_is_refused(
    cluster: LocalCluster,
) -> None:
    producer = kafka.KafkaProducer(
        acks="all", enable_idempotence=True, **kafka_python_ssl(cluster, "alice")
    )
    try:
        futures = [producer.send(TOPIC, f"kp-{i}".encode()) for i in range(RECORDS)]
        assert all(f.get(timeout=30).offset >= 0 for f in futures)
    finally:
        producer.close()
    consumer = kafka.KafkaConsumer(
        group_id="alice-kp",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **kafka_python_ssl(cluster, "alice"),
    )
    try:
        consumer.assign([kafka.TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not set(values("kp")) <= set(got):
            got += [r.value for rs in consumer.poll(1000).values() for r in rs]
        assert set(values("kp")) <= set(got)
        consumer.commit()
    finally:
        consumer.close()

    refused = kafka.KafkaProducer(
        acks=1, enable_idempotence=False, max_block_ms=15_000, **kafka_python_ssl(cluster, "nobody")
    )
    try:
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            refused.send(TOPIC, b"never").get(timeout=30)
    finally:
        refused.close()


# -- aiokafka -----------------------------------------------------------------------------------


def aiokafka_ssl(cluster: LocalCluster, name: str) -> dict[str, Any]:
    security = cluster.client_security_of(name)
    context = aiokafka.helpers.create_ssl_context(
        cafile=security["ssl_cafile"],
        certfile=security["ssl_certfile"],
        keyfile=security["ssl_keyfile"],
    )
    return {
        "bootstrap_servers": cluster.kafka_bootstrap,
        "security_protocol": "SSL",
        "ssl_context": context,
    }


def test_aiokafka_over_ssl_alice_produces_and_consumes_nobody_is_refused(
    cluster: LocalCluster,
) -> None:
    async def run() -> None:
        producer = aiokafka.AIOKafkaProducer(
            acks="all", enable_idempotence=True, **aiokafka_ssl(cluster, "alice")
        )
        await producer.start()
        try:
            for i in range(RECORDS):
                await producer.send_and_wait(TOPIC, f"ak-{i}".encode())
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(
            group_id="alice-ak",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            **aiokafka_ssl(cluster, "alice"),
        )
        await consumer.start()
        try:
            consumer.assign([aiokafka.TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not set(values("ak")) <= set(got):
                batches = await consumer.getmany(timeout_ms=1000)
                got += [r.value for rs in batches.values() for r in rs if r.value]
            assert set(values("ak")) <= set(got)
            await consumer.commit()
        finally:
            await consumer.stop()

        refused = aiokafka.AIOKafkaProducer(
            acks=1, request_timeout_ms=15_000, **aiokafka_ssl(cluster, "nobody")
        )
        await refused.start()
        try:
            with pytest.raises(aiokafka.errors.TopicAuthorizationFailedError):
                await refused.send_and_wait(TOPIC, b"never")
        finally:
            await refused.stop()

    asyncio.run(run())


# -- confluent-kafka (librdkafka) ---------------------------------------------------------------


def test_librdkafka_over_ssl_alice_produces_and_consumes_nobody_is_refused(
    cluster: LocalCluster,
) -> None:
    producer = confluent_kafka.Producer(
        {**librdkafka_ssl(cluster, "alice"), "acks": "all", "enable.idempotence": True}
    )
    errors: list[Any] = []
    for i in range(RECORDS):
        producer.produce(
            TOPIC,
            value=f"ck-{i}".encode(),
            on_delivery=lambda error, _m: errors.append(error) if error else None,
        )
    assert producer.flush(30) == 0 and errors == []
    consumer = confluent_kafka.Consumer(
        {**librdkafka_ssl(cluster, "alice"), "group.id": "alice-ck", "enable.auto.commit": False}
    )
    try:
        consumer.assign(
            [
                confluent_kafka.TopicPartition(TOPIC, p, confluent_kafka.OFFSET_BEGINNING)
                for p in range(PARTITIONS)
            ]
        )
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not set(values("ck")) <= set(got):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                got.append(message.value() or b"")
        assert set(values("ck")) <= set(got)
    finally:
        consumer.close()

    # nobody: the delivery report carries the error; an application raises it as librdkafka's
    # KafkaException, as the admin client's futures do by themselves.
    refused = confluent_kafka.Producer(
        {
            **librdkafka_ssl(cluster, "nobody"),
            "acks": "1",
            "enable.idempotence": False,
            "message.timeout.ms": 15_000,
        }
    )
    failures: list[confluent_kafka.KafkaError] = []
    refused.produce(TOPIC, value=b"never", on_delivery=lambda error, _m: failures.append(error))
    refused.flush(30)
    assert [f.code() for f in failures] == [confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED]
    admin = ConfluentAdmin(librdkafka_ssl(cluster, "nobody"))
    request = confluent_kafka.TopicCollection([TOPIC])
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        admin.describe_topics(request, request_timeout=15)[TOPIC].result(timeout=20)
    assert raised.value.args[0].code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED


# -- OffsetDelete and DescribeGroups, per topic and per group ------------------------------------


def commit_as_alice(
    cluster: LocalCluster, group: str, tp: kafka.TopicPartition, offset: int
) -> None:
    """A kafka-python consumer of alice's that assign()s ``tp`` and commits ``offset``."""
    consumer = kafka.KafkaConsumer(
        group_id=group, enable_auto_commit=False, **kafka_python_ssl(cluster, "alice")
    )
    try:
        consumer.assign([tp])
        consumer.commit({tp: kafka.structs.OffsetAndMetadata(offset, "", -1)})
    finally:
        consumer.close()


def test_offset_delete_and_describe_groups_answer_each_partition_and_group(
    cluster: LocalCluster,
) -> None:
    """As Kafka's KafkaApis: alice's OffsetDelete of her group deletes the offset of her topic,
    answers a partition the topic lacks UNKNOWN_TOPIC_OR_PARTITION and a topic she may not
    READ TOPIC_AUTHORIZATION_FAILED (kafka-python's per-partition errors); her DescribeGroups
    of her group and of one she may not DESCRIBE describes hers and refuses the other."""
    group = "alice-offset-delete"
    # A group of the same offsets partition (so of the same coordinator) that alice may not see.
    refused_group = next(
        name
        for i in range(10_000)
        if partition_for_group(name := f"bob-{i}", LOCAL_OFFSETS_TOPIC_PARTITIONS)
        == partition_for_group(group, LOCAL_OFFSETS_TOPIC_PARTITIONS)
    )
    mine, missing, other = (
        kafka.TopicPartition(TOPIC, 0),
        kafka.TopicPartition(TOPIC, PARTITIONS + 5),
        kafka.TopicPartition("not-alices", 0),
    )
    commit_as_alice(cluster, group, mine, 3)
    admin = kafka.KafkaAdminClient(**kafka_python_ssl(cluster, "alice"))
    try:
        assert admin.list_group_offsets(group)[group][mine].offset == 3
        assert admin.delete_group_offsets(group, [mine, missing, other]) == {
            mine: kafka.errors.NoError,
            missing: kafka.errors.UnknownTopicOrPartitionError,
            other: kafka.errors.TopicAuthorizationFailedError,
        }
        assert mine not in admin.list_group_offsets(group)[group]
        # One DescribeGroups naming both, sent to each broker: the coordinator answers per group.
        answers = [
            admin.describe_groups([group, refused_group], group_coordinator_id=broker)
            for broker in cluster.broker_ids
        ]
        (described,) = [a for a in answers if "NotCoordinator" not in str(a[group]["error"])]
        # (her group, its offsets deleted, is described on its own terms)
        assert "GroupAuthorizationFailed" not in str(described[group]["error"])
        assert "GroupAuthorizationFailed" in str(described[refused_group]["error"])
    finally:
        admin.close()


def test_describe_and_delete_groups_answer_each_group(cluster: LocalCluster) -> None:
    """As Kafka's KafkaApis: alice's ConsumerGroupDescribe (librdkafka's admin) and DeleteGroups
    (kafka-python's) naming her group and one she may not see answer hers and refuse the other
    with GROUP_AUTHORIZATION_FAILED, instead of refusing both."""
    import confluent_kafka

    mine, refused = "alice-items", "bob-items"
    tp = kafka.TopicPartition(TOPIC, 0)
    commit_as_alice(cluster, mine, tp, 1)
    confluent = ConfluentAdmin(librdkafka_ssl(cluster, "alice"))
    futures = confluent.describe_consumer_groups([mine, refused])
    assert futures[mine].result(timeout=30).state == confluent_kafka.ConsumerGroupState.EMPTY
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        futures[refused].result(timeout=30)
    assert raised.value.args[0].code() == confluent_kafka.KafkaError.GROUP_AUTHORIZATION_FAILED
    admin = kafka.KafkaAdminClient(**kafka_python_ssl(cluster, "alice"))
    try:
        answers = [
            admin.delete_groups([mine, refused], group_coordinator_id=broker)
            for broker in cluster.broker_ids
        ]
    finally:
        admin.close()
    # (every broker refuses bob's group; only the coordinator of alice's deletes it)
    assert sorted(a[mine] for a in answers) == ["NotCoordinatorError", "OK"]
    assert {a[refused] for a in answers} == {"GroupAuthorizationFailedError"}
