"""The demo with ``--authorizer``: grant the demo's clients exactly the ACLs they need, the way
an operator does, through the admin path.

The cluster (`LocalCluster(tls=True, authorizer=True)`) authorizes every call; its super users
are the nodes and the ``admin`` certificate, and ``allow.everyone.if.no.acl.found`` is false.
The demo's producer, consumers and consumer group use the ``client`` certificate
(``User:CN=client``), which may do nothing until the ``admin`` identity grants it, with
`AdminClient.create_acls` (``kraft acls add`` does the same):

- the idempotent producer: WRITE and DESCRIBE on the topic, IDEMPOTENT_WRITE on the cluster
  (Kafka's classic grant; since KIP-679 WRITE on any topic would also do for InitProducerId);
- the read-back consumer: READ on the topic (ListOffsets' DESCRIBE is implied by it);
- the consumer group: READ on the group (FindCoordinator's and OffsetFetch's DESCRIBE are
  implied), READ on the topic (fetch, commit).

`grant` then waits until every broker applies them (a broker applies an ACL once it has
replayed its metadata record: tens of ms), so the first produce is not refused by a broker
that has not caught up yet.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

from kraft.demo.report import DemoError

if TYPE_CHECKING:
    from kraft.cluster import LocalCluster
    from kraft.demo.console import Console
    from kraft.security.acls import AclBinding

APPLIED_TIMEOUT_S: Final = 30.0
"""How long every broker may take to apply the ACLs (tens of ms measured)."""


def demo_acls(principal: str, topic: str, group: str) -> list[AclBinding]:
    """The ACLs the demo's clients need (see the module docstring)."""
    from kraft.security.acls import (
        CLUSTER_NAME,
        AclBinding,
        AclOperation,
        AclPermissionType,
        PatternType,
        ResourceType,
    )

    def allow(resource_type: ResourceType, name: str, operation: AclOperation) -> AclBinding:
        return AclBinding(
            resource_type=resource_type,
            resource_name=name,
            pattern_type=PatternType.LITERAL,
            principal=principal,
            host="*",
            operation=operation,
            permission_type=AclPermissionType.ALLOW,
        )

    return [
        allow(ResourceType.TOPIC, topic, AclOperation.WRITE),
        allow(ResourceType.TOPIC, topic, AclOperation.DESCRIBE),
        allow(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.IDEMPOTENT_WRITE),
        allow(ResourceType.TOPIC, topic, AclOperation.READ),
        allow(ResourceType.GROUP, group, AclOperation.READ),
    ]


def grant(cluster: LocalCluster, topic: str, group: str, console: Console) -> list[AclBinding]:
    """Grant `demo_acls` to the ``client`` certificate's principal with the ``admin`` one,
    print them, and wait until every broker applies them.

    Raises:
        DemoError: a broker did not apply them within `APPLIED_TIMEOUT_S`.
    """
    from kraft import AdminClient
    from kraft.cluster.local import TLS_CLIENT
    from kraft.security.acls import format_acl
    from storage.errors import KraftError, TopicAuthorizationFailedError

    principal = f"User:CN={TLS_CLIENT}"
    bindings = demo_acls(principal, topic, group)
    console.say(
        f"\n2b. the authorizer is on (super users: {', '.join(cluster.super_users)}); the "
        f"demo's clients are {principal}, which may do nothing yet. Granting it, as "
        f"User:CN=admin with AdminClient.create_acls (kraft acls add):"
    )
    with AdminClient(cluster.bootstrap, **cluster.admin_security) as admin:
        admin.create_acls(bindings)
    for b in bindings:
        console.say(f"   {format_acl(b)}")
    deadline = time.monotonic() + APPLIED_TIMEOUT_S
    started = time.monotonic()
    for broker_id, address in cluster.broker_addresses.items():
        with AdminClient(address, timeout=10, **cluster.client_security) as client:
            while True:
                try:
                    client.describe_topic(topic)
                    break
                except TopicAuthorizationFailedError:
                    pass
                except KraftError as e:
                    raise DemoError(f"broker {broker_id}: {e.message}") from None
                if time.monotonic() >= deadline:
                    raise DemoError(
                        f"broker {broker_id} did not apply the ACLs within {APPLIED_TIMEOUT_S:.0f}s"
                    )
                time.sleep(0.05)
    console.say(
        f"   every broker applies them ({(time.monotonic() - started) * 1000:.0f} ms after the "
        f"controller committed them)"
    )
    return bindings
