"""Authorization on a real (plaintext) cluster: the brokers run the authorizer, every client
is ``User:ANONYMOUS``, and ACLs for it are created and removed through the controllers (which
run without the authorizer here: they stand for the super user that bootstraps the ACLs, see
docs/operations.md "Authorization").

A created, denied or revoked ACL takes effect on a broker once the broker has replayed the
record from the metadata log: the tests allow `ACL_BOUND_S` for it (measured: well under a
second on an idle machine)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

from kraft.cluster.local import LocalCluster
from kraft.security.acls import (
    ANONYMOUS,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kraft.security.settings import STANDARD_AUTHORIZER
from kraft.types import TopicPartition
from replication.clients import acl_admin
from replication.clients.admin import AdminClient
from replication.clients.consumer import Consumer
from replication.clients.producer import Producer
from storage.errors import (
    ClusterAuthorizationFailedError,
    KraftError,
    TopicAuthorizationFailedError,
)

pytestmark = pytest.mark.process

ACL_BOUND_S = 5.0
"""How long a broker may take to apply a created or removed ACL (the time to fetch and replay
one metadata record; the tests wait on the condition, this is only the deadline)."""

T = TypeVar("T")


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(
        controllers=1, brokers=1, broker_config={"authorizer.class.name": STANDARD_AUTHORIZER}
    ) as c:
        c.start()
        c.wait_until_healthy(60)
        c.create_topic("orders", partitions=1, replication_factor=1)
        yield c


def _acl(
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    resource_type: ResourceType = ResourceType.TOPIC,
) -> AclBinding:
    return AclBinding(
        resource_type=resource_type,
        resource_name=name,
        pattern_type=PatternType.LITERAL,
        principal=ANONYMOUS,
        host="*",
        operation=operation,
        permission_type=permission,
    )


def _grant(cluster: LocalCluster, *bindings: AclBinding) -> None:
    acl_admin.create_acls(cluster.controller_client(), bindings, timeout=10)


def _revoke(cluster: LocalCluster, *bindings: AclBinding) -> None:
    filters = [
        AclBindingFilter(
            resource_type=b.resource_type,
            resource_name=b.resource_name,
            pattern_type=b.pattern_type,
            principal=b.principal,
            host=b.host,
            operation=b.operation,
            permission_type=b.permission_type,
        )
        for b in bindings
    ]
    acl_admin.delete_acls(cluster.controller_client(), filters, timeout=10)


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


def _produce(cluster: LocalCluster, value: bytes, *, idempotent: bool = True) -> int:
    with Producer(
        cluster.bootstrap,
        max_block_ms=2_000,
        delivery_timeout_ms=3_000,
        request_timeout_ms=2_000,
        enable_idempotence=idempotent,
    ) as producer:
        return producer.send("orders", value).result(timeout=10).offset


def _refusal(call: Callable[[], object]) -> KraftError:
    """The error ``call`` raised; AssertionError when it succeeded."""
    try:
        call()
    except KraftError as e:
        return e
    raise AssertionError("the call was not refused")


def _refused(call: Callable[[], object], error: type[KraftError]) -> None:
    assert isinstance(_refusal(call), error)


def test_without_an_acl_a_plaintext_client_is_refused_and_sees_no_topic(
    cluster: LocalCluster,
) -> None:
    with AdminClient(cluster.bootstrap, timeout=5, request_timeout=2) as admin:
        assert admin.list_topics() == []  # Metadata/DescribeCluster hide what it may not see
        _refused(lambda: admin.create_topic("other", 1, 1), TopicAuthorizationFailedError)
        _refused(admin.describe_acls, ClusterAuthorizationFailedError)
    _refused(lambda: _produce(cluster, b"no"), TopicAuthorizationFailedError)


def test_an_acl_for_anonymous_allows_a_deny_refuses_and_a_revocation_applies_in_bound(
    cluster: LocalCluster,
) -> None:
    write, read = _acl("orders", AclOperation.WRITE), _acl("orders", AclOperation.READ)
    _grant(cluster, write, read)
    offset, granted_s = _until(lambda: _produce(cluster, b"yes"), "the WRITE grant")
    with Consumer(cluster.bootstrap, request_timeout_ms=2_000) as consumer:
        consumer.assign([TopicPartition("orders", 0)])
        consumer.seek(TopicPartition("orders", 0), offset)
        records, _ = _until(lambda: _non_empty(consumer.poll(1.0)), "the READ grant")
        assert records[0].value == b"yes"

    deny = _acl("orders", AclOperation.WRITE, AclPermissionType.DENY)
    _grant(cluster, deny)
    _, denied_s = _until(lambda: _refusal(lambda: _produce(cluster, b"x")), "the deny")
    # KIP-679: no topic left that it may write, so not even a producer id (InitProducerId);
    # without idempotence, the produce itself is refused.
    _refused(lambda: _produce(cluster, b"x"), ClusterAuthorizationFailedError)
    _refused(lambda: _produce(cluster, b"x", idempotent=False), TopicAuthorizationFailedError)

    _revoke(cluster, deny)
    _until(lambda: _produce(cluster, b"again"), "the removal of the deny")
    _revoke(cluster, write)
    _, revoked_s = _until(
        lambda: _refused(
            lambda: _produce(cluster, b"x", idempotent=False), TopicAuthorizationFailedError
        ),
        "the revocation",
    )
    print(f"ACL applied after: grant {granted_s:.3f}s deny {denied_s:.3f}s revoke {revoked_s:.3f}s")


def _non_empty(records: list[T]) -> list[T]:
    assert records, "no record yet"
    return records


def test_kraft_acls_adds_lists_and_removes(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    from kraft.cli import main

    where = ["--bootstrap-controller", cluster.controller_bootstrap, "--json"]
    acl = ["--allow-principal", "User:carol", "--topic", "audit-", "--host", "10.0.0.1"]
    add = ["acls", "add", *acl, "--operation", "Read", "--operation", "describe_configs"]
    assert main([*add, "--resource-pattern-type", "prefixed", *where]) == 0
    capsys.readouterr()
    match = ["--topic", "audit-x", "--resource-pattern-type", "match"]
    assert main(["acls", "list", *match, *where]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {(a["operation"], a["pattern_type"], a["host"]) for a in listed} == {
        ("READ", "PREFIXED", "10.0.0.1"),
        ("DESCRIBE_CONFIGS", "PREFIXED", "10.0.0.1"),
    }
    remove = ["acls", "remove", "--allow-principal", "User:carol", "--topic", "audit-"]
    assert main([*remove, "--resource-pattern-type", "prefixed", *where]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 2
    assert main(["acls", "list", "--principal", "User:carol", *where]) == 0
    assert json.loads(capsys.readouterr().out) == []
