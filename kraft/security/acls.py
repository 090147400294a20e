"""Access control entries, as Kafka's ``org.apache.kafka.common.acl`` models them.

An ACL binds a *resource pattern* (a resource type, a name, literal or prefixed) to an *access
control entry* (a principal, a host, an operation, allow or deny). The enums keep Kafka's names
and wire numbers (``ResourceType``, ``PatternType``, ``AclOperation``, ``AclPermissionType``),
so an ACL listed by kraft reads as one listed by ``kafka-acls.sh``.

`AclBindingFilter` selects bindings the way Kafka's filters do (describe and delete take
filters): ``None`` fields and the ANY values match everything, and the MATCH pattern type
selects every pattern that would apply to a given name.

Pure: no I/O. `kraft.security.authorizer` decides with these; the metadata image holds them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

WILDCARD: Final = "*"
"""A literal resource name, principal (``User:*``) or host that matches every one."""

ANONYMOUS: Final = "User:ANONYMOUS"
"""The principal of a connection without a client certificate (Kafka's
``KafkaPrincipal.ANONYMOUS``)."""


class ResourceType(enum.IntEnum):
    """Kafka's ``ResourceType`` codes (the ones kraft authorizes)."""

    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5


class PatternType(enum.IntEnum):
    """Kafka's ``PatternType``: LITERAL names one resource (or ``*`` all), PREFIXED every
    resource whose name starts with it. ANY and MATCH exist only in filters."""

    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    """Kafka's ``AclOperation`` codes."""

    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class AclPermissionType(enum.IntEnum):
    """Kafka's ``AclPermissionType``: a DENY that matches wins over every ALLOW."""

    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME: Final = "kafka-cluster"
"""The one name of the CLUSTER resource (Kafka's ``Resource.CLUSTER_NAME``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AclBinding:
    """One ACL: who (``principal`` from ``host``) may or may not do ``operation`` on the
    resources the pattern names. A request's bindings are checked with `binding_problem`
    before they are stored."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def matches_resource(self, resource_type: ResourceType, name: str) -> bool:
        """Whether the pattern applies to the resource ``name`` of ``resource_type``."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name in (name, WILDCARD)


def format_acl(binding: AclBinding) -> str:
    """One line naming an ACL, as ``kraft acls`` prints it:
    ``TOPIC:events (LITERAL)  User:CN=alice  host=*  WRITE  ALLOW``."""
    b = binding
    return (
        f"{b.resource_type.name}:{b.resource_name} ({b.pattern_type.name})  {b.principal}  "
        f"host={b.host}  {b.operation.name}  {b.permission_type.name}"
    )


def binding_problem(binding: AclBinding) -> str | None:
    """Why ``binding`` cannot be stored (Kafka's ``AclControlManager.validateNewAcl``), or None."""
    if binding.resource_type == ResourceType.ANY:
        return "an ACL names one resource type, not ANY"
    if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return "an ACL's pattern type is LITERAL or PREFIXED"
    if binding.operation == AclOperation.ANY:
        return "an ACL names one operation (or ALL), not ANY"
    if binding.permission_type == AclPermissionType.ANY:
        return "an ACL is ALLOW or DENY, not ANY"
    if not binding.resource_name:
        return "an ACL's resource name is empty"
    if binding.resource_type == ResourceType.CLUSTER and binding.resource_name != CLUSTER_NAME:
        return f"the cluster resource is named {CLUSTER_NAME!r}"
    kind, colon, name = binding.principal.partition(":")
    if not colon or not kind or not name:
        return f"a principal is TYPE:NAME (e.g. User:alice), got {binding.principal[:80]!r}"
    if not binding.host:
        return "an ACL's host is an address or '*'"
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class AclBindingFilter:
    """Selects ACLs (Kafka's ``AclBindingFilter``): a ``None`` field or an ANY value matches
    every binding; ``pattern_type=MATCH`` with a name selects the patterns that apply to it."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, binding: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, binding.resource_type):
            return False
        if not self._matches_pattern(binding):
            return False
        if self.principal is not None and self.principal != binding.principal:
            return False
        if self.host is not None and self.host != binding.host:
            return False
        if self.operation not in (AclOperation.ANY, binding.operation):
            return False
        return self.permission_type in (AclPermissionType.ANY, binding.permission_type)

    def _matches_pattern(self, binding: AclBinding) -> bool:
        if self.pattern_type == PatternType.MATCH:
            return self.resource_name is None or binding.matches_resource(
                binding.resource_type, self.resource_name
            )
        if self.pattern_type not in (PatternType.ANY, binding.pattern_type):
            return False
        return self.resource_name is None or self.resource_name == binding.resource_name


__all__ = [
    "ANONYMOUS",
    "CLUSTER_NAME",
    "WILDCARD",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourceType",
    "binding_problem",
    "format_acl",
]
