"""The Kafka adapter's ACL handlers: DescribeAcls, CreateAcls, DeleteAcls (forwarded).

Kafka's numbers of resource types, pattern types, operations and permissions are kraft's
(`kraft.security.acls`) for the ones kraft keeps. A creation naming another one (USER or
DELEGATION_TOKEN resources, the token operations) gets INVALID_REQUEST; a filter naming one
matches nothing, since no such ACL can exist; UNKNOWN (0) anywhere is INVALID_REQUEST, as in
Kafka.

NB: Kafka answers SECURITY_DISABLED when no authorizer is configured. kraft's controller keeps
ACLs whether or not the brokers enforce them, and its gRPC path serves them either way (an
operator can stage ACLs before turning the authorizer on); this listener answers the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kraft.controller.messages import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from kraft.security.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from replication.broker.api import RequestContext
from replication.broker.kafka.api import ApiSpec, KafkaBrokerApi, Response
from replication.broker.kafka.apis.forwarding import error, forward
from replication.broker.kafka.frames import Request
from storage.errors import ErrorCode

UNKNOWN: Final = 0
"""Kafka's UNKNOWN value of every ACL enum: never valid in a request."""


class Unmatched(Exception):
    """A filter naming a value kraft keeps no ACL of: it matches nothing."""


def _enum(kind: Any, value: int) -> Any:
    if value == UNKNOWN:
        raise ValueError(f"{kind.__name__} UNKNOWN (0)")
    try:
        return kind(value)
    except ValueError:
        raise Unmatched(f"{kind.__name__} {value} is not kept by kraft") from None


def acl_filter(f: Any) -> AclBindingFilter:
    """kraft's filter of a kio DescribeAcls request or DeleteAcls filter (same fields).

    Raises:
        ValueError: an UNKNOWN value (INVALID_REQUEST).
        Unmatched: a value of no kraft ACL.
    """
    return AclBindingFilter(
        resource_type=_enum(ResourceType, int(f.resource_type_filter)),
        resource_name=f.resource_name_filter,
        pattern_type=_enum(PatternType, int(f.pattern_type_filter)),
        principal=f.principal_filter,
        host=f.host_filter,
        operation=_enum(AclOperation, int(f.operation)),
        permission_type=_enum(AclPermissionType, int(f.permission_type)),
    )


def binding(c: Any) -> AclBinding:
    """kraft's binding of a kio AclCreation.

    Raises:
        ValueError, Unmatched: a value kraft cannot store (INVALID_REQUEST).
    """
    return AclBinding(
        resource_type=_enum(ResourceType, int(c.resource_type)),
        resource_name=c.resource_name,
        pattern_type=_enum(PatternType, int(c.resource_pattern_type)),
        principal=c.principal,
        host=c.host,
        operation=_enum(AclOperation, int(c.operation)),
        permission_type=_enum(AclPermissionType, int(c.permission_type)),
    )


def _described(b: AclBinding) -> dict[str, Any]:
    return {
        "principal": b.principal,
        "host": b.host,
        "operation": int(b.operation),
        "permission_type": int(b.permission_type),
    }


async def handle_describe_acls(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    try:
        wanted = acl_filter(request.body)
    except ValueError as e:
        return {**error(ErrorCode.INVALID_REQUEST, str(e)), "resources": []}
    except Unmatched:
        return {**error(ErrorCode.NONE, None), "resources": []}
    outcome = await forward(api, DescribeAclsRequest(filter=wanted), ctx)
    answer: DescribeAclsResponse | None = outcome.response
    if answer is None:
        return {**error(outcome.code, outcome.message), "resources": []}
    resources: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for b in answer.acls:
        key = (int(b.resource_type), b.resource_name, int(b.pattern_type))
        resources.setdefault(key, []).append(_described(b))
    return {
        **error(answer.error_code, answer.error_message),
        "resources": [
            {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
            for (t, n, p), acls in resources.items()
        ],
    }


async def handle_create_acls(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    results: list[dict[str, Any]] = []
    valid: list[tuple[int, AclBinding]] = []
    for i, c in enumerate(request.body.creations):
        try:
            valid.append((i, binding(c)))
            results.append(error(ErrorCode.NONE, None))
        except (ValueError, Unmatched) as e:
            results.append(error(ErrorCode.INVALID_REQUEST, str(e)))
    if valid:
        outcome = await forward(api, CreateAclsRequest(creations=tuple(b for _, b in valid)), ctx)
        answer: CreateAclsResponse | None = outcome.response
        if answer is None or answer.error_code != ErrorCode.NONE:
            code = outcome.code if answer is None else answer.error_code
            message = outcome.message if answer is None else answer.error_message
            for i, _ in valid:
                results[i] = error(code, message)
        else:
            for (i, _), r in zip(valid, answer.results, strict=True):
                results[i] = error(r.error_code, r.error_message)
    return {"results": results}


def _matching(b: AclBinding) -> dict[str, Any]:
    return {
        **error(ErrorCode.NONE, None),
        "resource_type": int(b.resource_type),
        "resource_name": b.resource_name,
        "pattern_type": int(b.pattern_type),
        **_described(b),
    }


async def handle_delete_acls(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    results: list[dict[str, Any]] = []
    valid: list[tuple[int, AclBindingFilter]] = []
    for i, f in enumerate(request.body.filters):
        try:
            valid.append((i, acl_filter(f)))
            results.append({**error(ErrorCode.NONE, None), "matching_acls": []})
        except ValueError as e:
            results.append({**error(ErrorCode.INVALID_REQUEST, str(e)), "matching_acls": []})
        except Unmatched:
            results.append({**error(ErrorCode.NONE, None), "matching_acls": []})
    if valid:
        outcome = await forward(api, DeleteAclsRequest(filters=tuple(f for _, f in valid)), ctx)
        answer: DeleteAclsResponse | None = outcome.response
        if answer is None or answer.error_code != ErrorCode.NONE:
            code = outcome.code if answer is None else answer.error_code
            message = outcome.message if answer is None else answer.error_message
            for i, _ in valid:
                results[i] = {**error(code, message), "matching_acls": []}
        else:
            for (i, _), r in zip(valid, answer.filter_results, strict=True):
                results[i] = {
                    **error(r.error_code, r.error_message),
                    "matching_acls": [_matching(b) for b in r.matching_acls],
                }
    return {"filter_results": results}


ACL_HANDLERS: Final[Mapping[int, ApiSpec]] = {
    29: ApiSpec("DescribeAcls", 1, 3, handle_describe_acls),
    30: ApiSpec("CreateAcls", 1, 3, handle_create_acls),
    31: ApiSpec("DeleteAcls", 1, 3, handle_delete_acls),
}

__all__ = ["ACL_HANDLERS"]
