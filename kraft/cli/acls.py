"""``kraft acls add|list|remove``: like ``kafka-acls.sh``; the ACLs are records in the metadata
log, so every broker and controller applies them once it has replayed them."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from kraft.cli._connect import AdminSession, add_bootstrap_arguments, add_timeout_argument

if TYPE_CHECKING:
    from kraft.security.acls import AclBinding, AclBindingFilter, AclOperation, ResourceType

_EPILOG = """\
examples:
  export KRAFT_BOOTSTRAP=127.0.0.1:9192
  kraft acls add --allow-principal User:alice --operation Read --operation Describe \\
      --topic events --group billing
  kraft acls add --allow-principal User:bob --operation Write --topic logs- \\
      --resource-pattern-type prefixed
  kraft acls add --deny-principal User:mallory --operation All --topic events --host 10.0.0.9
  kraft acls list                                   # every ACL
  kraft acls list --topic events --resource-pattern-type match   # all that apply to it
  kraft acls remove --allow-principal User:alice --operation Read --topic events

Operations: Read, Write, Create, Delete, Alter, Describe, DescribeConfigs, AlterConfigs,
ClusterAction, IdempotentWrite, All. A DENY wins over every ALLOW. The cluster resource is
--cluster; principals are TYPE:NAME (User:alice; User:ANONYMOUS without a client certificate).
Authorization is on when the nodes set authorizer.class.name (docs/operations.md).
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "acls",
        help="add, list and remove ACLs",
        description="Manage access control lists (kafka-acls.sh).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    asub = p.add_subparsers(dest="acls_command", metavar="ACTION", required=True)
    for name, help_text, handler in (
        ("add", "add ACLs: each principal x resource x operation", add),
        ("list", "list the ACLs that match", list_acls),
        ("remove", "remove the ACLs that match", remove),
    ):
        a = asub.add_parser(
            name,
            help=help_text,
            description=help_text[0].upper() + help_text[1:] + ".",
            epilog=_EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        _arguments(a, name)
        a.set_defaults(handler=handler)


def _arguments(p: argparse.ArgumentParser, action: str) -> None:
    p.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME")
    p.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME")
    if action == "list":
        p.add_argument("--principal", metavar="TYPE:NAME", help="only this principal's ACLs")
    p.add_argument(
        "--operation",
        action="append",
        default=[],
        metavar="OP",
        help="repeatable (default: All for add, any for list and remove)",
    )
    p.add_argument("--topic", action="append", default=[], metavar="NAME")
    p.add_argument("--group", action="append", default=[], metavar="NAME")
    p.add_argument("--transactional-id", action="append", default=[], metavar="NAME")
    p.add_argument("--cluster", action="store_true", help="the cluster resource")
    p.add_argument(
        "--resource-pattern-type",
        type=str.lower,
        choices=("literal", "prefixed", "match", "any"),
        default="any" if action == "list" else "literal",
        help="literal or prefixed names; list and remove also take match (every pattern that "
        "applies to the name) and any (default: literal; any for list)",
    )
    p.add_argument(
        "--host",
        default="*" if action == "add" else None,
        metavar="IP",
        help="the client address (add: default *, every host; list and remove: any host)",
    )
    add_bootstrap_arguments(p)
    add_timeout_argument(p)
    p.add_argument("--json", action="store_true", help="print JSON")


def parse_operation(text: str) -> AclOperation:
    """``Read``, ``describe-configs``, ``IDEMPOTENT_WRITE`` ... -> the operation.

    Raises:
        ValueError: not an operation (the message lists them).
    """
    from kraft.security.acls import AclOperation

    key = text.replace("_", "").replace("-", "").lower()
    for op in AclOperation:
        if op is not AclOperation.ANY and op.name.replace("_", "").lower() == key:
            return op
    names = ", ".join(
        op.name.title().replace("_", "") for op in AclOperation if op is not AclOperation.ANY
    )
    raise ValueError(f"unknown operation {text[:40]!r}; one of {names}")


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    from kraft.security.acls import CLUSTER_NAME, ResourceType

    out = [(ResourceType.TOPIC, n) for n in args.topic]
    out += [(ResourceType.GROUP, n) for n in args.group]
    out += [(ResourceType.TRANSACTIONAL_ID, n) for n in args.transactional_id]
    if args.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def _principals(args: argparse.Namespace) -> list[tuple[str, bool]]:
    """(principal, allow) pairs."""
    return [(p, True) for p in args.allow_principal] + [(p, False) for p in args.deny_principal]


def bindings_to_add(args: argparse.Namespace) -> list[AclBinding]:
    """Every principal x resource x operation of an ``add``.

    Raises:
        ValueError: no principal, no resource, a match/any pattern type, or a bad operation.
    """
    from kraft.security.acls import AclBinding, AclOperation, AclPermissionType, PatternType

    resources, principals = _resources(args), _principals(args)
    if not principals:
        raise ValueError("give --allow-principal or --deny-principal TYPE:NAME")
    if not resources:
        raise ValueError("give a resource: --topic, --group, --transactional-id or --cluster")
    if args.resource_pattern_type not in ("literal", "prefixed"):
        raise ValueError("an ACL's --resource-pattern-type is literal or prefixed")
    operations = [parse_operation(o) for o in args.operation] or [AclOperation.ALL]
    return [
        AclBinding(
            resource_type=rtype,
            resource_name=name,
            pattern_type=PatternType[args.resource_pattern_type.upper()],
            principal=principal,
            host=args.host,
            operation=op,
            permission_type=AclPermissionType.ALLOW if allow else AclPermissionType.DENY,
        )
        for rtype, name in resources
        for principal, allow in principals
        for op in dict.fromkeys(operations)
    ]


def filters_of(args: argparse.Namespace) -> list[AclBindingFilter]:
    """The filters of a ``list`` or ``remove``: one per resource x principal x operation, a
    missing dimension matching everything."""
    from kraft.security.acls import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        PatternType,
        ResourceType,
    )

    pattern = PatternType[args.resource_pattern_type.upper()]
    resources: list[tuple[ResourceType, str | None]] = [*_resources(args)] or [
        (ResourceType.ANY, None)
    ]
    principals: list[tuple[str | None, AclPermissionType]] = [
        (p, AclPermissionType.ALLOW if allow else AclPermissionType.DENY)
        for p, allow in _principals(args)
    ]
    if getattr(args, "principal", None):
        principals.append((args.principal, AclPermissionType.ANY))
    if not principals:
        principals = [(None, AclPermissionType.ANY)]
    operations = [parse_operation(o) for o in args.operation] or [AclOperation.ANY]
    return [
        AclBindingFilter(
            resource_type=rtype,
            resource_name=name,
            pattern_type=pattern if name is not None else PatternType.ANY,
            principal=principal,
            host=args.host,
            operation=op,
            permission_type=permission,
        )
        for rtype, name in resources
        for principal, permission in principals
        for op in dict.fromkeys(operations)
    ]


def _doc(b: AclBinding) -> dict[str, str]:
    return {
        "resource_type": b.resource_type.name,
        "resource_name": b.resource_name,
        "pattern_type": b.pattern_type.name,
        "principal": b.principal,
        "host": b.host,
        "operation": b.operation.name,
        "permission_type": b.permission_type.name,
    }


def _print(args: argparse.Namespace, bindings: tuple[AclBinding, ...] | list[AclBinding]) -> None:
    if args.json:
        print(json.dumps([_doc(b) for b in bindings]))
        return
    from kraft.security.acls import format_acl

    for b in bindings:
        print(format_acl(b))


def add(args: argparse.Namespace) -> int:
    bindings = bindings_to_add(args)
    with AdminSession(args) as session, session.reachable():
        session.admin.create_acls(bindings)
    if not args.json:
        print(f"added {len(bindings)} ACL(s):", file=sys.stderr)
    _print(args, bindings)
    return 0


def list_acls(args: argparse.Namespace) -> int:
    found: dict[AclBinding, None] = {}
    with AdminSession(args) as session, session.reachable():
        for acl_filter in filters_of(args):
            found.update(dict.fromkeys(session.admin.describe_acls(acl_filter)))
    _print(args, list(found))
    return 0


def remove(args: argparse.Namespace) -> int:
    with AdminSession(args) as session, session.reachable():
        removed = session.admin.delete_acls(filters_of(args))
    if not args.json:
        print(f"removed {len(removed)} ACL(s):", file=sys.stderr)
    _print(args, removed)
    return 0
