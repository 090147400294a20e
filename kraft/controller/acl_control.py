"""ACL decisions: CreateAcls, DeleteAcls and DescribeAcls (KIP-801's AclControlManager, pure).

- CreateAcls: each binding is checked (`binding_problem`: one resource type, LITERAL or
  PREFIXED, one operation, ALLOW or DENY, ``User:name``); a bad one is INVALID_REQUEST and the
  others go on (one result per creation, as Kafka). A binding that exists already is not
  stored twice and succeeds. A new one becomes an `AccessControlEntryRecord` with a fresh id
  drawn from the injected ``rng``.
- DeleteAcls: every ACL a filter matches becomes a `RemoveAccessControlEntryRecord`; the
  response lists them per filter. An ACL matched by two filters is removed once.
- DescribeAcls: the ACLs a filter matches, from a committed image (read-only, no record).

One request carries at most `ACLS_PER_REQUEST_MAX` creations or filters (POLICY_VIOLATION
beyond, as the controller bounds every user operation, `kraft.controller.limits`).
"""

from __future__ import annotations

import random
import uuid
from typing import Final

from kraft.controller.messages import (
    AclCreationResult,
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsFilterResult,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from kraft.controller.result import ControllerResult
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import (
    AccessControlEntryRecord,
    MetadataRecord,
    RemoveAccessControlEntryRecord,
)
from kraft.security.acls import binding_problem
from storage.errors import ErrorCode

ACLS_PER_REQUEST_MAX: Final = 1000
"""The most creations or filters one ACL request may carry."""


def _too_many(count: int) -> str | None:
    if count > ACLS_PER_REQUEST_MAX:
        return f"{count} ACL entries in one request; the most is {ACLS_PER_REQUEST_MAX}"
    return None


def handle_create_acls(
    image: MetadataImage, request: CreateAclsRequest, rng: random.Random
) -> ControllerResult[CreateAclsResponse]:
    """One result per creation; the valid new bindings become records."""
    too_many = _too_many(len(request.creations))
    if too_many is not None:
        return ControllerResult(
            records=(),
            response=CreateAclsResponse(
                error_code=ErrorCode.POLICY_VIOLATION, error_message=too_many
            ),
        )
    existing = set(image.acls.values())
    ids = set(image.acls)
    records: list[MetadataRecord] = []
    results: list[AclCreationResult] = []
    for binding in request.creations:
        problem = binding_problem(binding)
        if problem is not None:
            results.append(
                AclCreationResult(error_code=ErrorCode.INVALID_REQUEST, error_message=problem)
            )
            continue
        results.append(AclCreationResult())
        if binding in existing:
            continue
        acl_id = _new_acl_id(ids, rng)
        ids.add(acl_id)
        existing.add(binding)
        records.append(AccessControlEntryRecord.of(acl_id, binding))
    return ControllerResult(
        records=tuple(records), response=CreateAclsResponse(results=tuple(results))
    )


def handle_delete_acls(
    image: MetadataImage, request: DeleteAclsRequest
) -> ControllerResult[DeleteAclsResponse]:
    """Remove every ACL a filter matches; one result per filter, naming what it matched."""
    too_many = _too_many(len(request.filters))
    if too_many is not None:
        return ControllerResult(
            records=(),
            response=DeleteAclsResponse(
                error_code=ErrorCode.POLICY_VIOLATION, error_message=too_many
            ),
        )
    removed: set[str] = set()
    records: list[MetadataRecord] = []
    results: list[DeleteAclsFilterResult] = []
    for acl_filter in request.filters:
        matched = sorted((i, b) for i, b in image.acls.items() if acl_filter.matches(b))
        for acl_id, _binding in matched:
            if acl_id not in removed:
                removed.add(acl_id)
                records.append(RemoveAccessControlEntryRecord(acl_id=acl_id))
        results.append(DeleteAclsFilterResult(matching_acls=tuple(b for _, b in matched)))
    return ControllerResult(
        records=tuple(records), response=DeleteAclsResponse(filter_results=tuple(results))
    )


def describe_acls(image: MetadataImage, request: DescribeAclsRequest) -> DescribeAclsResponse:
    """The ACLs the filter matches, in a stable order (by id)."""
    return DescribeAclsResponse(
        acls=tuple(b for _, b in sorted(image.acls.items()) if request.filter.matches(b))
    )


def _new_acl_id(taken: set[str], rng: random.Random) -> str:
    """A fresh version-4 UUID from the injected ``rng`` (Kafka draws ACL ids as UUIDs too)."""
    while True:
        acl_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        if acl_id not in taken:
            return acl_id


__all__ = [
    "ACLS_PER_REQUEST_MAX",
    "describe_acls",
    "handle_create_acls",
    "handle_delete_acls",
]
