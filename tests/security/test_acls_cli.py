"""``kraft acls`` argument handling, without a cluster: operations by Kafka's names, one ACL
per principal x resource x operation, and one-line refusals of incomplete commands."""

from __future__ import annotations

import pytest

from kraft.cli import build_parser, main
from kraft.cli.acls import bindings_to_add, filters_of, parse_operation
from kraft.security.acls import (
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)


@pytest.mark.parametrize(
    ("text", "operation"),
    [
        ("Read", AclOperation.READ),
        ("DescribeConfigs", AclOperation.DESCRIBE_CONFIGS),
        ("idempotent-write", AclOperation.IDEMPOTENT_WRITE),
        ("CLUSTER_ACTION", AclOperation.CLUSTER_ACTION),
        ("all", AclOperation.ALL),
    ],
)
def test_operations_take_kafkas_names_in_any_case(text: str, operation: AclOperation) -> None:
    assert parse_operation(text) is operation


def test_an_unknown_operation_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="one of All, Read, Write"):
        parse_operation("Steal")


def test_add_makes_one_acl_per_principal_resource_and_operation() -> None:
    args = build_parser().parse_args(
        [
            *("acls", "add", "--allow-principal", "User:a", "--deny-principal", "User:b"),
            *("--operation", "Read", "--operation", "Write", "--topic", "t", "--cluster"),
        ]
    )
    bindings = bindings_to_add(args)
    assert len(bindings) == 2 * 2 * 2
    assert {(b.resource_type, b.resource_name) for b in bindings} == {
        (ResourceType.TOPIC, "t"),
        (ResourceType.CLUSTER, CLUSTER_NAME),
    }
    deny = [b for b in bindings if b.principal == "User:b"]
    assert {b.permission_type for b in deny} == {AclPermissionType.DENY}
    assert {b.host for b in bindings} == {"*"}
    assert {b.pattern_type for b in bindings} == {PatternType.LITERAL}


def test_list_without_selectors_matches_every_acl() -> None:
    (only,) = filters_of(build_parser().parse_args(["acls", "list"]))
    assert only.resource_type is ResourceType.ANY and only.principal is None
    assert only.host is None and only.operation is AclOperation.ANY


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ("acls add --topic t", "--allow-principal or --deny-principal"),
        ("acls add --allow-principal User:a", "give a resource"),
        ("acls add --allow-principal User:a --topic t --resource-pattern-type any", "literal"),
    ],
)
def test_an_incomplete_add_is_one_line(
    argv: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv.split(), "--bootstrap", "127.0.0.1:1"]) != 0
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
