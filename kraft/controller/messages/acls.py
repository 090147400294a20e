"""CreateAcls, DeleteAcls and DescribeAcls (KIP-801): requests and responses.

The controller decides them (`kraft.controller.acl_control`); their bindings and filters are
`kraft.security.acls`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kraft.security.acls import AclBinding, AclBindingFilter
from storage.errors import ErrorCode


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateAclsRequest:
    creations: tuple[AclBinding, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AclCreationResult:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateAclsResponse:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    results: tuple[AclCreationResult, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteAclsRequest:
    filters: tuple[AclBindingFilter, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteAclsFilterResult:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    matching_acls: tuple[AclBinding, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteAclsResponse:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    filter_results: tuple[DeleteAclsFilterResult, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeAclsRequest:
    filter: AclBindingFilter = field(default_factory=AclBindingFilter)


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeAclsResponse:
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""
    acls: tuple[AclBinding, ...] = ()
    node_id: int = -1
    """The controller that answered (set by the server, as DescribeConfigs')."""
    controller_id: int = -1
    """The active controller it knows of: a client that must read its own writes
    (``require_active``) goes on until the two are the same."""


__all__ = [
    "AclCreationResult",
    "CreateAclsRequest",
    "CreateAclsResponse",
    "DeleteAclsFilterResult",
    "DeleteAclsRequest",
    "DeleteAclsResponse",
    "DescribeAclsRequest",
    "DescribeAclsResponse",
]
