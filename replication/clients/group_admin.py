"""The consumer-group half of `replication.clients.admin.AdminClient` (Kafka's
``Admin.listConsumerGroups``, ``describeConsumerGroups``, ``listConsumerGroupOffsets``,
``alterConsumerGroupOffsets``, ``deleteConsumerGroups``): a mixin over a `BrokerNetwork`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kraft.types import TopicPartition
from replication.clients.config import ConsumerConfig
from replication.clients.group_membership import COORDINATOR_ERRORS, GroupClient
from replication.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedGroupMember,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from storage.errors import (
    ErrorCode,
    error_for,
)

if TYPE_CHECKING:
    from kraft.metadata.image import BrokerRegistration
    from replication.clients.network import BrokerNetwork


_LIST_RETRIABLE = frozenset(
    {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE}
)
"""ListGroups errors the admin asks the same broker again for (Kafka's ListGroups handler)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupListing:
    group_id: str
    state: str
    coordinator: int


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupDescription:
    """A consumer group as its coordinator describes it (KIP-848's ConsumerGroupDescribe)."""

    group_id: str
    state: str
    coordinator: int
    coordinator_address: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[DescribedGroupMember, ...]

    def assignment(self) -> dict[TopicPartition, str]:
        """Partition -> the member id that owns it now."""
        return {
            TopicPartition(t.topic, p): m.member_id
            for m in self.members
            for t in m.assignment
            for p in t.partitions
        }


class GroupAdmin:
    """The group calls of `AdminClient` (which owns one and delegates to it): each goes to
    the group's coordinator, found with FindCoordinator, or (``list_groups``) to every
    broker that ``brokers`` lists."""

    def __init__(
        self,
        broker_network: BrokerNetwork,
        timeout: float,
        brokers: Callable[[], Iterable[BrokerRegistration]],
    ) -> None:
        self._broker_network = broker_network
        self._timeout = timeout
        self._brokers = brokers

    def _group_client(self, group_id: str) -> GroupClient:
        return GroupClient(self._broker_network, group_id, ConsumerConfig())

    def list_groups(self) -> list[GroupListing]:
        """Every consumer group, from every broker's loaded coordinators (Kafka's admin asks
        every broker too). A broker still loading an offsets partition (just elected its
        leader) is asked again until it has loaded, as Kafka's admin retries
        COORDINATOR_LOAD_IN_PROGRESS, so the list does not miss the groups being loaded.

        Raises:
            CoordinatorLoadInProgressError, CoordinatorNotAvailableError: still so after the
                admin's timeout.
        """
        out: dict[str, GroupListing] = {}
        for broker in self._brokers():
            if broker.fenced or not broker.listeners:
                continue
            response = self._list_groups_of(broker.listeners[0].address)
            for group in response.groups:
                out[group.group_id] = GroupListing(
                    group_id=group.group_id, state=group.group_state, coordinator=broker.broker_id
                )
        return [out[k] for k in sorted(out)]

    def _list_groups_of(self, address: str) -> ListGroupsResponse:
        deadline = time.monotonic() + self._timeout
        backoff_s = 0.05
        while True:
            response = self._broker_network.call(
                address, "ListGroups", ListGroupsRequest(), ListGroupsResponse
            )
            if response.error_code is ErrorCode.NONE:
                return response
            if response.error_code not in _LIST_RETRIABLE or time.monotonic() >= deadline:
                raise error_for(response.error_code, response.error_message)
            time.sleep(min(backoff_s, max(0.0, deadline - time.monotonic())))
            backoff_s = min(backoff_s * 2, 0.5)

    def describe_group(self, group_id: str) -> GroupDescription:
        """State, members and their assignments, and the coordinator.

        Raises:
            GroupIdNotFoundError: no such group.
        """
        client = self._group_client(group_id)
        found: list[GroupDescription] = []

        def attempt(address: str) -> ErrorCode | None:
            response = self._broker_network.call(
                address,
                "ConsumerGroupDescribe",
                ConsumerGroupDescribeRequest(group_ids=(group_id,)),
                ConsumerGroupDescribeResponse,
            )
            (group,) = response.groups
            if group.error_code in COORDINATOR_ERRORS:
                return group.error_code
            if group.error_code is not ErrorCode.NONE:
                raise error_for(group.error_code, group.error_message or f"group {group_id!r}")
            found.append(
                GroupDescription(
                    group_id=group.group_id,
                    state=group.group_state,
                    coordinator=client.coordinator_id,
                    coordinator_address=address,
                    group_epoch=group.group_epoch,
                    assignment_epoch=group.assignment_epoch,
                    assignor=group.assignor_name,
                    members=group.members,
                )
            )
            return None

        client.retrying(self._timeout, attempt)
        return found[-1]

    def list_group_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        """Every committed offset of the group (the next offset to read)."""
        client = self._group_client(group_id)
        out: dict[TopicPartition, int] = {}

        def attempt(address: str) -> ErrorCode | None:
            response = self._broker_network.call(
                address, "OffsetFetch", OffsetFetchRequest(group_id=group_id), OffsetFetchResponse
            )
            if response.error_code in COORDINATOR_ERRORS:
                return response.error_code
            if response.error_code is not ErrorCode.NONE:
                raise error_for(response.error_code, response.error_message)
            for t in response.topics:
                for p in t.partitions:
                    if p.error_code is ErrorCode.NONE and p.committed_offset >= 0:
                        out[TopicPartition(t.name, p.partition_index)] = p.committed_offset
            return None

        client.retrying(self._timeout, attempt)
        return out

    def alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` for an empty group (an admin commit, as ``reset-offsets``).

        Raises:
            UnknownMemberIdError / NonEmptyGroupError: the group has members.
        """
        self._group_client(group_id).commit(offsets, timeout_s=self._timeout)

    def delete_group(self, group_id: str) -> None:
        """Delete an empty group and its committed offsets.

        Raises:
            GroupIdNotFoundError: no such group. NonEmptyGroupError: it has members.
        """
        client = self._group_client(group_id)

        def attempt(address: str) -> ErrorCode | None:
            response = self._broker_network.call(
                address,
                "DeleteGroups",
                DeleteGroupsRequest(groups_names=(group_id,)),
                DeleteGroupsResponse,
            )
            (result,) = response.results
            if result.error_code in COORDINATOR_ERRORS:
                return result.error_code
            if result.error_code is not ErrorCode.NONE:
                raise error_for(result.error_code, result.error_message or f"group {group_id!r}")
            return None

        client.retrying(self._timeout, attempt)


__all__ = ["GroupAdmin", "GroupDescription", "GroupListing"]
