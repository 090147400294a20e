"""Kafka's StandardAuthorizer rules, as a table: super users, literal / wildcard / prefixed
patterns, principal and host wildcards, deny wins, implied operations, and the no-ACL default."""

from __future__ import annotations

import pytest

from kraft.security.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    binding_problem,
)
from kraft.security.authorizer import Authorizer, AuthorizerConfig, parse_super_users

Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER


def acl(
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = ALLOW,
    *,
    principal: str = "User:alice",
    resource_type: ResourceType = TOPIC,
    pattern: PatternType = PatternType.LITERAL,
    host: str = "*",
) -> AclBinding:
    return AclBinding(
        resource_type=resource_type,
        resource_name=name,
        pattern_type=pattern,
        principal=principal,
        host=host,
        operation=operation,
        permission_type=permission,
    )


ON = AuthorizerConfig(enabled=True, super_users=frozenset({"User:admin"}))

CASES = [
    # (acls, principal, host, operation, resource type, name, expected, why)
    ([], "User:alice", "1.2.3.4", Op.READ, TOPIC, "t", False, "no ACL, default deny"),
    ([], "User:admin", "1.2.3.4", Op.DELETE, TOPIC, "t", True, "super user"),
    ([acl("t", Op.READ)], "User:alice", "h", Op.READ, TOPIC, "t", True, "literal allow"),
    ([acl("t", Op.READ)], "User:bob", "h", Op.READ, TOPIC, "t", False, "other principal"),
    ([acl("t", Op.READ)], "User:alice", "h", Op.WRITE, TOPIC, "t", False, "other operation"),
    ([acl("t", Op.READ)], "User:alice", "h", Op.READ, TOPIC, "u", False, "other topic"),
    ([acl("t", Op.READ)], "User:alice", "h", Op.READ, GROUP, "t", False, "other type"),
    ([acl("*", Op.READ)], "User:alice", "h", Op.READ, TOPIC, "any", True, "literal wildcard"),
    (
        [acl("pay", Op.WRITE, pattern=PatternType.PREFIXED)],
        "User:alice",
        "h",
        Op.WRITE,
        TOPIC,
        "payments",
        True,
        "prefix",
    ),
    (
        [acl("pay", Op.WRITE, pattern=PatternType.PREFIXED)],
        "User:alice",
        "h",
        Op.WRITE,
        TOPIC,
        "pa",
        False,
        "shorter than the prefix",
    ),
    (
        [acl("t", Op.READ, principal="User:*")],
        "User:bob",
        "h",
        Op.READ,
        TOPIC,
        "t",
        True,
        "principal wildcard",
    ),
    (
        [acl("t", Op.READ, host="10.0.0.1")],
        "User:alice",
        "10.0.0.2",
        Op.READ,
        TOPIC,
        "t",
        False,
        "other host",
    ),
    (
        [acl("t", Op.READ, host="10.0.0.1")],
        "User:alice",
        "10.0.0.1",
        Op.READ,
        TOPIC,
        "t",
        True,
        "that host",
    ),
    ([acl("t", Op.ALL)], "User:alice", "h", Op.ALTER_CONFIGS, TOPIC, "t", True, "ALL allows"),
    (
        [acl("t", Op.ALL), acl("t", Op.WRITE, DENY)],
        "User:alice",
        "h",
        Op.WRITE,
        TOPIC,
        "t",
        False,
        "deny wins",
    ),
    (
        [acl("t", Op.ALL), acl("t", Op.WRITE, DENY)],
        "User:alice",
        "h",
        Op.READ,
        TOPIC,
        "t",
        True,
        "a deny of one operation leaves the others",
    ),
    (
        [acl("t", Op.READ), acl("*", Op.ALL, DENY, principal="User:*")],
        "User:alice",
        "h",
        Op.READ,
        TOPIC,
        "t",
        False,
        "a wildcard deny wins over a literal allow",
    ),
    (
        [acl("t", Op.READ)],
        "User:alice",
        "h",
        Op.DESCRIBE,
        TOPIC,
        "t",
        True,
        "READ implies DESCRIBE",
    ),
    (
        [acl("t", Op.WRITE)],
        "User:alice",
        "h",
        Op.DESCRIBE,
        TOPIC,
        "t",
        True,
        "WRITE implies DESCRIBE",
    ),
    (
        [acl("t", Op.DESCRIBE)],
        "User:alice",
        "h",
        Op.READ,
        TOPIC,
        "t",
        False,
        "DESCRIBE implies nothing",
    ),
    (
        [acl("t", Op.ALTER_CONFIGS)],
        "User:alice",
        "h",
        Op.DESCRIBE_CONFIGS,
        TOPIC,
        "t",
        True,
        "ALTER_CONFIGS implies DESCRIBE_CONFIGS",
    ),
    (
        [acl("t", Op.READ), acl("t", Op.DESCRIBE, DENY)],
        "User:alice",
        "h",
        Op.DESCRIBE,
        TOPIC,
        "t",
        False,
        "an implied allow loses to a deny",
    ),
    (
        [acl(CLUSTER_NAME, Op.CREATE, resource_type=CLUSTER)],
        "User:alice",
        "h",
        Op.CREATE,
        CLUSTER,
        CLUSTER_NAME,
        True,
        "cluster create",
    ),
]


@pytest.mark.parametrize(
    ("acls", "principal", "host", "operation", "resource_type", "name", "expected", "why"),
    CASES,
    ids=[c[-1] for c in CASES],
)
def test_the_authorizer_answers_as_kafkas_standard_authorizer(
    acls: list[AclBinding],
    principal: str,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
    expected: bool,
    why: str,
) -> None:
    authorizer = Authorizer(acls, ON)
    assert authorizer.authorize(principal, host, operation, resource_type, name) is expected, why


def test_without_an_acl_on_the_resource_allow_everyone_decides_but_any_acl_there_overrides() -> (
    None
):
    config = AuthorizerConfig(enabled=True, allow_everyone_if_no_acl_found=True)
    authorizer = Authorizer([acl("guarded", Op.READ)], config)
    assert authorizer.authorize("User:bob", "h", Op.WRITE, TOPIC, "open")
    assert not authorizer.authorize("User:bob", "h", Op.READ, TOPIC, "guarded")


def test_a_disabled_authorizer_allows_everything() -> None:
    authorizer = Authorizer([acl("t", Op.ALL, DENY, principal="User:*")], AuthorizerConfig())
    assert authorizer.authorize("User:ANONYMOUS", "h", Op.DELETE, TOPIC, "t")


def test_super_users_parse_with_kafkas_semicolons() -> None:
    assert parse_super_users(" User:a;User:b ;; ") == frozenset({"User:a", "User:b"})


def test_filters_select_as_kafkas_binding_filters() -> None:
    literal = acl("payments", Op.READ)
    prefixed = acl("pay", Op.WRITE, pattern=PatternType.PREFIXED, principal="User:bob")
    wildcard = acl("*", Op.DESCRIBE)
    every = [literal, prefixed, wildcard]

    def select(f: AclBindingFilter) -> list[AclBinding]:
        return [b for b in every if f.matches(b)]

    assert select(AclBindingFilter()) == every
    assert select(AclBindingFilter(principal="User:bob")) == [prefixed]
    assert select(AclBindingFilter(resource_name="payments")) == [literal]
    assert (
        select(AclBindingFilter(resource_name="payments", pattern_type=PatternType.MATCH)) == every
    )
    assert select(AclBindingFilter(pattern_type=PatternType.PREFIXED)) == [prefixed]
    assert select(AclBindingFilter(operation=Op.DESCRIBE, permission_type=ALLOW)) == [wildcard]


@pytest.mark.parametrize(
    ("binding", "problem"),
    [
        (acl("t", Op.ANY), "operation"),
        (acl("t", Op.READ, AclPermissionType.ANY), "ALLOW or DENY"),
        (acl("t", Op.READ, pattern=PatternType.MATCH), "pattern type"),
        (acl("t", Op.READ, resource_type=ResourceType.ANY), "resource type"),
        (acl("", Op.READ), "empty"),
        (acl("other", Op.CREATE, resource_type=CLUSTER), "kafka-cluster"),
        (acl("t", Op.READ, principal="alice"), "TYPE:NAME"),
        (acl("t", Op.READ, host=""), "host"),
    ],
)
def test_a_binding_that_cannot_be_stored_is_named(binding: AclBinding, problem: str) -> None:
    found = binding_problem(binding)
    assert found is not None and problem in found


def test_a_valid_binding_has_no_problem() -> None:
    assert binding_problem(acl("t", Op.READ)) is None
