"""Kafka's StandardAuthorizer rules over a set of ACLs (KIP-801), as a pure function of them.

`Authorizer.authorize(principal, host, operation, resource_type, name)` answers as Kafka does:

1. a super user (``super.users``) may do everything;
2. the ACLs that apply are those whose pattern covers the resource (the literal name, the
   literal ``*``, or a prefix of the name), whose principal is the caller or ``User:*``, and
   whose host is the caller's or ``*``;
3. a DENY that applies to the operation (the operation itself, or ALL) refuses, whatever ALLOWs
   say;
4. else an ALLOW that applies to the operation permits. ALLOW for READ, WRITE, DELETE or ALTER
   implies DESCRIBE, and ALLOW for ALTER_CONFIGS implies DESCRIBE_CONFIGS (Kafka's implied
   operations);
5. else, when no ACL at all applies to the resource, ``allow.everyone.if.no.acl.found``
   decides (false by default); otherwise the answer is no.

The ACLs come from the metadata image (`kraft.metadata.image.MetadataImage.acls`): every
controller and broker builds the same `Authorizer` from the same log, so a change applies
everywhere as soon as a node has replayed it. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, final

from kraft.security.acls import (
    WILDCARD,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

IMPLIED_BY: Final[dict[AclOperation, frozenset[AclOperation]]] = {
    AclOperation.DESCRIBE: frozenset(
        {AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.ALTER_CONFIGS}),
}
"""The ALLOWed operations that also allow a key operation (Kafka's implied operations)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthorizerConfig:
    """The broker/controller keys that shape authorization (Kafka's names)."""

    enabled: bool = False
    """``authorizer.class.name`` is set: without it every call is allowed, as in Kafka."""
    super_users: frozenset[str] = frozenset()
    """``super.users``: principals that may do everything (the nodes' own principals)."""
    allow_everyone_if_no_acl_found: bool = False
    """``allow.everyone.if.no.acl.found``."""


def parse_super_users(value: str) -> frozenset[str]:
    """``super.users`` (``User:a;User:b``, Kafka's separator) -> the principals."""
    return frozenset(p.strip() for p in value.split(";") if p.strip())


@final
class Authorizer:
    """Decides calls against ``acls`` under ``config``; build a new one when the ACLs change."""

    def __init__(self, acls: Iterable[AclBinding], config: AuthorizerConfig) -> None:
        self._config = config
        # Per resource type: literal bindings by name (``*`` included), prefixed ones in a list.
        self._literal: dict[ResourceType, dict[str, list[AclBinding]]] = defaultdict(
            lambda: defaultdict(list)
        )
        self._prefixed: dict[ResourceType, list[AclBinding]] = defaultdict(list)
        for binding in acls:
            if binding.pattern_type == PatternType.PREFIXED:
                self._prefixed[binding.resource_type].append(binding)
            else:
                self._literal[binding.resource_type][binding.resource_name].append(binding)

    @property
    def enabled(self) -> bool:
        return self._config.enabled

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        """Whether ``principal`` connecting from ``host`` may do ``operation`` on the resource."""
        if not self._config.enabled or principal in self._config.super_users:
            return True
        applying = self._bindings_for(resource_type, name)
        if not applying:
            return self._config.allow_everyone_if_no_acl_found
        allowed = False
        for binding in applying:
            if binding.principal not in (principal, "User:" + WILDCARD):
                continue
            if binding.host not in (host, WILDCARD):
                continue
            if binding.permission_type == AclPermissionType.DENY:
                if binding.operation in (operation, AclOperation.ALL):
                    return False
            elif binding.operation in (operation, AclOperation.ALL) or (
                binding.operation in IMPLIED_BY.get(operation, frozenset())
            ):
                allowed = True
        return allowed

    def authorize_any(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether ``principal`` may do ``operation`` on at least one resource of the type
        (Kafka's ``authorizeByResourceType``, KIP-679: WRITE on any topic allows an idempotent
        producer): some ALLOW names a resource on which `authorize` says yes."""
        if not self._config.enabled or principal in self._config.super_users:
            return True
        literal = self._literal.get(resource_type, {})
        candidates = [b for bs in literal.values() for b in bs]
        candidates.extend(self._prefixed.get(resource_type, ()))
        if not candidates:
            return self._config.allow_everyone_if_no_acl_found
        return any(
            b.permission_type == AclPermissionType.ALLOW
            and self.authorize(principal, host, operation, resource_type, b.resource_name)
            for b in candidates
        )

    def _bindings_for(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        literal = self._literal.get(resource_type, {})
        found = [*literal.get(name, ()), *(literal.get(WILDCARD, ()) if name != WILDCARD else ())]
        found.extend(
            b for b in self._prefixed.get(resource_type, ()) if name.startswith(b.resource_name)
        )
        return found


__all__ = ["IMPLIED_BY", "Authorizer", "AuthorizerConfig", "parse_super_users"]
