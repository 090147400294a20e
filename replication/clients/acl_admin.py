"""The ACL calls of `replication.clients.admin.AdminClient` (Kafka's ``Admin.createAcls``,
``describeAcls``, ``deleteAcls``), through a broker's forwarding of the controller API."""

from __future__ import annotations

from collections.abc import Iterable

from kraft.controller.client import ControllerClient
from kraft.controller.messages import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from kraft.security.acls import AclBinding, AclBindingFilter, binding_problem
from storage.errors import ErrorCode, InvalidRequestError, error_for


def create_acls(
    client: ControllerClient, bindings: Iterable[AclBinding], *, timeout: float | None
) -> None:
    """Store ``bindings`` (one that exists already is kept once).

    Raises:
        InvalidRequestError: a malformed binding (checked here first; nothing is sent).
        ClusterAuthorizationFailedError: the caller may not ALTER the cluster.
    """
    creations = tuple(bindings)
    for binding in creations:
        problem = binding_problem(binding)
        if problem is not None:
            raise InvalidRequestError(problem)
    response: CreateAclsResponse = client.send(
        CreateAclsRequest(creations=creations), timeout=timeout
    )
    if response.error_code is not ErrorCode.NONE:
        raise error_for(response.error_code, response.error_message)
    for result in response.results:
        if result.error_code is not ErrorCode.NONE:
            raise error_for(result.error_code, result.error_message)


def describe_acls(
    client: ControllerClient, acl_filter: AclBindingFilter, *, timeout: float | None
) -> tuple[AclBinding, ...]:
    """The ACLs ``acl_filter`` matches, from the active controller's committed image."""
    response: DescribeAclsResponse = client.send(
        DescribeAclsRequest(filter=acl_filter), timeout=timeout, require_active=True
    )
    if response.error_code is not ErrorCode.NONE:
        raise error_for(response.error_code, response.error_message)
    return response.acls


def delete_acls(
    client: ControllerClient, filters: Iterable[AclBindingFilter], *, timeout: float | None
) -> tuple[AclBinding, ...]:
    """Remove every ACL a filter matches; returns the ACLs removed (each once)."""
    response: DeleteAclsResponse = client.send(
        DeleteAclsRequest(filters=tuple(filters)), timeout=timeout
    )
    if response.error_code is not ErrorCode.NONE:
        raise error_for(response.error_code, response.error_message)
    removed: dict[AclBinding, None] = {}
    for result in response.filter_results:
        if result.error_code is not ErrorCode.NONE:
            raise error_for(result.error_code, result.error_message)
        removed.update(dict.fromkeys(result.matching_acls))
    return tuple(removed)


__all__ = ["create_acls", "delete_acls", "describe_acls"]
