"""`GroupCoordinator`: API stub; the implementation follows in the next commits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import final

from .types import (
    DeleteGroupsResponse,
    GroupConfig,
    GroupDescription,
    GroupListing,
    HeartbeatRequest,
    HeartbeatResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    Record,
    Result,
    TopicInfo,
)


@final
class GroupCoordinator:
    def __init__(self, config: GroupConfig) -> None:
        self._config = config

    def replay(self, key: bytes, value: bytes | None) -> None:
        raise NotImplementedError

    def heartbeat(
        self, req: HeartbeatRequest, topics: Mapping[str, TopicInfo], now_ms: int
    ) -> Result[HeartbeatResponse]:
        raise NotImplementedError

    def commit_offsets(self, req: OffsetCommitRequest, now_ms: int) -> Result[OffsetCommitResponse]:
        raise NotImplementedError

    def fetch_offsets(self, req: OffsetFetchRequest) -> OffsetFetchResponse:
        raise NotImplementedError

    def delete_groups(self, group_ids: Sequence[str], now_ms: int) -> Result[DeleteGroupsResponse]:
        raise NotImplementedError

    def list_groups(self) -> list[GroupListing]:
        raise NotImplementedError

    def describe_groups(self, group_ids: Sequence[str]) -> list[GroupDescription]:
        raise NotImplementedError

    def tick(self, now_ms: int, topics: Mapping[str, TopicInfo]) -> list[Record]:
        raise NotImplementedError

    def next_deadline_ms(self) -> int | None:
        raise NotImplementedError

    def snapshot_records(self) -> list[Record]:
        raise NotImplementedError
