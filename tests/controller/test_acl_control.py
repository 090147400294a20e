"""CreateAcls / DeleteAcls / DescribeAcls on the controller core: ACLs become metadata records,
a bad binding is refused alone, duplicates are stored once, filters delete what they match."""

from __future__ import annotations

import random

from kraft.controller.acl_control import (
    ACLS_PER_REQUEST_MAX,
    describe_acls,
    handle_create_acls,
    handle_delete_acls,
)
from kraft.controller.messages import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest
from kraft.metadata.image import MetadataImage
from kraft.security.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from storage.errors import ErrorCode


def binding(
    name: str, principal: str = "User:alice", op: AclOperation = AclOperation.READ
) -> AclBinding:
    return AclBinding(
        resource_type=ResourceType.TOPIC,
        resource_name=name,
        pattern_type=PatternType.LITERAL,
        principal=principal,
        host="*",
        operation=op,
        permission_type=AclPermissionType.ALLOW,
    )


def create(image: MetadataImage, *bindings: AclBinding) -> MetadataImage:
    result = handle_create_acls(image, CreateAclsRequest(creations=bindings), random.Random(1))
    return image.apply_batch(result.records, image.last_offset + 1) if result.records else image


def test_created_acls_land_in_the_image_once_and_a_bad_one_is_refused_alone() -> None:
    bad = binding("t", principal="alice")
    result = handle_create_acls(
        MetadataImage.empty(),
        CreateAclsRequest(creations=(binding("t"), bad, binding("t"))),
        random.Random(1),
    )
    codes = [r.error_code for r in result.response.results]
    assert codes == [ErrorCode.NONE, ErrorCode.INVALID_REQUEST, ErrorCode.NONE]
    assert "TYPE:NAME" in result.response.results[1].error_message
    assert len(result.records) == 1
    image = MetadataImage.empty().apply_batch(result.records, 0)
    assert list(image.acls.values()) == [binding("t")]
    assert create(image, binding("t")) is image  # an existing binding is not stored again


def test_delete_removes_what_each_filter_matches_and_lists_it() -> None:
    image = create(MetadataImage.empty(), binding("a"), binding("b"), binding("a", "User:bob"))
    request = DeleteAclsRequest(
        filters=(
            AclBindingFilter(resource_name="a"),
            AclBindingFilter(principal="User:alice"),
            AclBindingFilter(resource_name="nothing"),
        )
    )
    result = handle_delete_acls(image, request)
    matched = [set(r.matching_acls) for r in result.response.filter_results]
    assert matched == [
        {binding("a"), binding("a", "User:bob")},
        {binding("a"), binding("b")},
        set(),
    ]
    assert len(result.records) == 3  # binding("a") matched twice, removed once
    after = image.apply_batch(result.records, image.last_offset + 1)
    assert after.acls == {}


def test_describe_returns_what_the_filter_matches() -> None:
    image = create(MetadataImage.empty(), binding("a"), binding("b", op=AclOperation.WRITE))
    response = describe_acls(
        image, DescribeAclsRequest(filter=AclBindingFilter(operation=AclOperation.WRITE))
    )
    assert response.acls == (binding("b", op=AclOperation.WRITE),)
    assert len(describe_acls(image, DescribeAclsRequest()).acls) == 2


def test_a_request_over_the_bound_is_refused_whole() -> None:
    many = tuple(binding(f"t{i}") for i in range(ACLS_PER_REQUEST_MAX + 1))
    result = handle_create_acls(
        MetadataImage.empty(), CreateAclsRequest(creations=many), random.Random(1)
    )
    assert result.records == () and result.response.error_code is ErrorCode.POLICY_VIOLATION
