"""The classic group handlers' version conversions (`replication.broker.kafka.apis.classic_groups`),
against a stand-in broker API: every version served decodes into the machine's request and
its answer encodes; LeaveGroup v0-v2 answer the member's error as the request's; DescribeGroups
answers an unknown group NONE before v6 and GROUP_ID_NOT_FOUND from it (KIP-1043)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kio.index import load_request_schema

from replication.broker.api import RequestContext
from replication.broker.coordinators.classic_service import (
    DescribeGroupsResponse,
    OffsetDeleteResponse,
)
from replication.broker.kafka.apis.classic_groups import CLASSIC_HANDLERS
from replication.broker.kafka.entities import build, to_chunks
from replication.broker.kafka.frames import Request, response_class
from replication.group.classic import (
    DescribedGroup,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupMemberResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
)
from storage.errors import ErrorCode


class StandIn:
    def __init__(self) -> None:
        self.seen: list[Any] = []

    async def join_group(self, request: JoinGroupRequest, ctx: RequestContext) -> JoinGroupResponse:
        self.seen.append(request)
        return JoinGroupResponse(
            generation_id=3,
            protocol_type="consumer",
            protocol_name="range",
            leader="m-1",
            member_id="m-1",
            members=(JoinGroupMember(member_id="m-1", group_instance_id=None, metadata=b"sub"),),
        )

    async def leave_group(
        self, request: LeaveGroupRequest, ctx: RequestContext
    ) -> LeaveGroupResponse:
        self.seen.append(request)
        return LeaveGroupResponse(
            members=(
                LeaveGroupMemberResponse(
                    member_id=request.members[0].member_id,
                    error_code=ErrorCode.UNKNOWN_MEMBER_ID,
                ),
            )
        )

    async def describe_groups(self, request: Any, ctx: RequestContext) -> DescribeGroupsResponse:
        return DescribeGroupsResponse(
            groups=tuple(
                DescribedGroup(group_id=g, error_code=ErrorCode.GROUP_ID_NOT_FOUND)
                for g in request.group_ids
            )
        )

    async def offset_delete(self, request: Any, ctx: RequestContext) -> OffsetDeleteResponse:
        return OffsetDeleteResponse(error_code=ErrorCode.GROUP_ID_NOT_FOUND)


def call(api_key: int, version: int, body: dict[str, Any], api: StandIn) -> Any:
    """Run the handler on ``body`` (built for ``version``); its answer built and encoded."""
    entity = build(load_request_schema(api_key, version), body)
    request = Request(
        sequence=0,
        api_key=api_key,
        api_version=version,
        correlation_id=1,
        client_id="c",
        body=entity,
    )
    handler = CLASSIC_HANDLERS[api_key].handle
    answer = asyncio.run(handler(api, request, RequestContext()))  # type: ignore[arg-type]
    assert answer is not None
    response = build(response_class(api_key, version), answer)
    assert to_chunks(response).size > 0
    return response


@pytest.mark.parametrize("version", range(2, 10))
def test_join_group_every_version_served(version: int) -> None:
    api = StandIn()
    response = call(
        11,
        version,
        {
            "group_id": "g",
            "session_timeout": 10_000,
            "rebalance_timeout": 20_000,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"sub"}],
        },
        api,
    )
    (seen,) = api.seen
    assert seen.session_timeout_ms == 10_000 and seen.rebalance_timeout_ms == 20_000
    assert seen.api_version == version and seen.protocols[0].name == "range"
    assert response.generation_id == 3 and response.leader == "m-1"
    assert [m.member_id for m in response.members] == ["m-1"]


@pytest.mark.parametrize("version", range(0, 6))
def test_leave_group_answers_a_single_members_error_before_v3(version: int) -> None:
    api = StandIn()
    body: dict[str, Any] = {"group_id": "g", "member_id": "m-1", "members": [{"member_id": "m-1"}]}
    response = call(13, version, body, api)
    (seen,) = api.seen
    assert [m.member_id for m in seen.members] == ["m-1"]
    if version < 3:
        assert response.error_code.value == ErrorCode.UNKNOWN_MEMBER_ID
    else:
        assert response.error_code.value == ErrorCode.NONE
        assert response.members[0].error_code.value == ErrorCode.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("version", range(0, 7))
def test_describe_groups_answers_an_unknown_group_as_the_version_expects(version: int) -> None:
    response = call(15, version, {"groups": ["nope"]}, StandIn())
    (group,) = response.groups
    assert group.group_state == "Dead"
    want = ErrorCode.GROUP_ID_NOT_FOUND if version >= 6 else ErrorCode.NONE
    assert group.error_code.value == want


def test_offset_delete_answers_the_group_error_at_the_top() -> None:
    body = {"group_id": "g", "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]}
    response = call(47, 0, body, StandIn())
    assert response.error_code.value == ErrorCode.GROUP_ID_NOT_FOUND
    assert response.topics == ()
