"""The consumer-group handlers of the Broker service (KIP-848): FindCoordinator,
ConsumerGroupHeartbeat, OffsetCommit, OffsetFetch, ListGroups, ConsumerGroupDescribe and
DeleteGroups; the classic group APIs are `classic`
(`replication.broker.coordinators.classic_service`).

Each shard holds both kinds of group (`replication.broker.coordinators.group_shard.GroupShard`); the
APIs they share follow Kafka 4.x: an OffsetCommit to a classic group is checked by its generation
and then committed as an admin commit of the offsets path; OffsetFetch skips the KIP-848 member
check for it; ListGroups lists both; DeleteGroups deletes an Empty classic group and its offsets; a
ConsumerGroupHeartbeat for a classic group with members gets GROUP_ID_NOT_FOUND (an Empty one is
taken over).

The wire dataclasses (`replication.messages.groups`, topics by name) are converted here to and
from the coordinator's (`replication.group`, assignments by topic id), and every request goes to
the `GroupRuntime` shard of its group's ``__consumer_offsets`` partition.

*The offsets topic.* The first FindCoordinator that finds no ``__consumer_offsets`` asks the
controller to create it (``offsets.topic.num.partitions``, ``offsets.topic.replication.factor``
capped at the live brokers, ``retention.ms=-1`` and ``retention.bytes=-1``: only the
coordinators' snapshots move its start, see `replication.broker.coordinators.group_runtime`) and
answers COORDINATOR_NOT_AVAILABLE, as Kafka does, until the partition has a leader."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

import structlog

from kraft.metadata.features import TRANSACTION_VERSION_2
from kraft.types import OFFSETS_TOPIC, TopicPartition
from replication.broker.coordinators.classic_service import ClassicGroupService
from replication.broker.coordinators.coordinator_lookup import OFFSETS_TOPIC_CONFIGS, InternalTopic
from replication.broker.coordinators.group_lag import GroupLag
from replication.broker.coordinators.group_runtime import Coordinator, GroupRuntime, ResultLike
from replication.broker.coordinators.group_shard import GroupShard
from replication.broker.coordinators.producer_ids import ProducerIds
from replication.broker.coordinators.txn_service import TxnService
from replication.group import (
    GroupConfig,
    GroupCoordinator,
    TopicInfo,
    TopicPartitions,
    partition_for_group,
)
from replication.group import types as g
from replication.group.classic import ClassicGroupConfig
from replication.group.txn_offsets import pending_record
from replication.messages import (
    COORDINATOR_KEY_TYPE_GROUP,
    COORDINATOR_KEY_TYPE_TRANSACTION,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribedGroupMember,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    GroupTopicPartitions,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
    TxnOffsetCommitRequest,
)
from replication.messages import Coordinator as WireCoordinator
from replication.txn.verification import txn_offset_commit_error
from storage.errors import (
    CoordinatorNotAvailableError,
    ErrorCode,
    InvalidGroupIdError,
    KraftError,
)

if TYPE_CHECKING:
    from replication.broker.host import GroupHost

AddToTransaction = Callable[
    [str, int, int, frozenset[TopicPartition], bool], Awaitable[Mapping[TopicPartition, ErrorCode]]
]
"""(transactional id, producer id, producer epoch, partitions, add) -> the errors of those that
failed: added to the transaction at its coordinator (``add``, KIP-890 part 2), else verified to
be in it (KIP-890 part 1; nothing asked, no error, with the verification off)."""

R = TypeVar("R")

GROUP_ID_MAX_CHARS = 255
"""Longer group ids are refused (INVALID_GROUP_ID); Kafka has no limit but a request size."""

_log = structlog.get_logger("replication.broker.coordinators.group_service")


class GroupService:
    """The group APIs of one broker, over what they need of it (`GroupHost`)."""

    def __init__(self, server: GroupHost) -> None:
        self._server = server
        config = server.config
        self._group_config = GroupConfig(
            session_timeout_ms=config.group_consumer_session_timeout_ms,
            heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
            max_size=config.group_consumer_max_size,
            assignors=tuple(config.group_consumer_assignors.split(",")),
            offsets_retention_ms=config.offsets_retention_minutes * 60_000,
        )
        self._classic_config = ClassicGroupConfig(
            min_session_timeout_ms=config.group_min_session_timeout_ms,
            max_session_timeout_ms=config.group_max_session_timeout_ms,
            initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            max_size=config.group_max_size,
        )
        self.runtime = GroupRuntime(
            replicas=lambda: server.replicas,
            new_coordinator=lambda: GroupShard(self._group_config, self._classic_config),
            topics=self._topics,
            snapshot_interval_records=config.group_coordinator_snapshot_interval_records,
            node_id=server.node_id,
        )
        self.lag = GroupLag(
            committed=self.committed_offsets,
            local_high_watermark=self._local_high_watermark,
            leader_of=self._leader_of,
            list_latest=lambda leader, tps: server.list_latest_offsets(leader, tps),
        )
        """The lag metrics of the groups coordinated here (its `run` is a broker task)."""
        self.transactions = TxnService(
            server,
            ProducerIds(lambda: server.allocate_producer_ids()).next,
            lambda address: server.broker_stub(address),
            self.complete_txn_offsets,
        )
        """The transaction coordinators (KIP-98) on ``__transaction_state``."""
        self.add_to_transaction: AddToTransaction | None = None
        """KIP-890: adds partitions to a transaction at its coordinator, or verifies they are in
        it (the broker's `TxnVerifier.add_partitions`, set once it exists: it calls
        `transactions`)."""
        self.classic = ClassicGroupService(
            self.runtime,
            self._partition_of,
            lambda topic: None if (t := self._topics().get(topic)) is None else t.partitions,
        )
        """JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups, OffsetDelete."""
        self.offsets_topic = InternalTopic(
            server,
            OFFSETS_TOPIC,
            lambda: (config.offsets_topic_num_partitions, config.offsets_topic_replication_factor),
            OFFSETS_TOPIC_CONFIGS,
        )
        self._topics_cache: tuple[object, dict[str, TopicInfo]] | None = None
        self._logger = _log.bind(node_id=server.node_id)

    def start_tasks(self) -> list[asyncio.Task[None]]:
        """The coordinators' loops (groups, their lag, transactions and their markers)."""
        return [
            asyncio.create_task(self.runtime.run(), name="broker-group-coordinators"),
            asyncio.create_task(self.lag.run(), name="broker-group-lag"),
            asyncio.create_task(self.transactions.runtime.run(), name="broker-txn-coordinators"),
            asyncio.create_task(self.transactions.run_markers(), name="broker-txn-markers"),
        ]

    def close(self) -> None:
        self.runtime.close()
        self.transactions.close()

    # --- the image, by name and by id ---------------------------------------------------------

    def _topics(self) -> dict[str, TopicInfo]:
        """Every topic as the coordinator's assignors see it, keyed by name (cached per
        metadata image: the runtime asks on every poll)."""
        image = self._server.image
        cached = self._topics_cache
        if cached is not None and cached[0] is image:
            return cached[1]
        out = {}
        for name, topic_id in image.topic_ids_by_name.items():
            description = image.describe_topic(name)
            if description is None:
                continue
            out[name] = TopicInfo(
                topic_id=topic_id, name=name, partitions=len(description.partitions)
            )
        self._topics_cache = (image, out)
        return out

    def _to_ids(
        self, parts: tuple[GroupTopicPartitions, ...] | None
    ) -> tuple[TopicPartitions, ...] | None:
        if parts is None:
            return None
        ids = self._server.image.topic_ids_by_name
        return tuple(
            TopicPartitions(topic_id=ids[p.topic], partitions=tuple(p.partitions))
            for p in parts
            if p.topic in ids
        )

    def _to_names(self, parts: tuple[TopicPartitions, ...]) -> tuple[GroupTopicPartitions, ...]:
        names = {v: k for k, v in self._server.image.topic_ids_by_name.items()}
        return tuple(
            GroupTopicPartitions(topic=names[p.topic_id], partitions=tuple(sorted(p.partitions)))
            for p in parts
            if p.topic_id in names
        )

    def _partition_of(self, group_id: str) -> int:
        """The offsets partition of ``group_id``.

        Raises:
            NotCoordinatorError-like KraftError: no offsets topic yet (COORDINATOR_NOT_AVAILABLE).
        """
        description = self._server.image.describe_topic(OFFSETS_TOPIC)
        if description is None or not description.partitions:
            raise CoordinatorNotAvailableError(f"{OFFSETS_TOPIC} does not exist yet")
        return partition_for_group(group_id, len(description.partitions))

    # --- FindCoordinator ----------------------------------------------------------------------

    async def find_coordinator(
        self, request: FindCoordinatorRequest, listener: str = ""
    ) -> FindCoordinatorResponse:
        """Each key's coordinator, at its endpoint on ``listener`` (as `BrokerService.metadata`)."""
        out = []
        for key in request.coordinator_keys:
            out.append(self._find_one(request.key_type, key, listener))
        return FindCoordinatorResponse(coordinators=tuple(out))

    def _find_one(self, key_type: int, key: str, listener: str = "") -> WireCoordinator:
        if key_type == COORDINATOR_KEY_TYPE_TRANSACTION:
            return self.transactions.find(key, listener)
        if key_type != COORDINATOR_KEY_TYPE_GROUP:
            return WireCoordinator(
                key=key[:GROUP_ID_MAX_CHARS],
                error_code=ErrorCode.INVALID_REQUEST,
                error_message=f"unknown coordinator key type {key_type} (0 group, 1 transaction)",
            )
        if len(key) > GROUP_ID_MAX_CHARS:  # "" has a coordinator, as in Kafka
            return WireCoordinator(
                key=key,
                error_code=ErrorCode.INVALID_GROUP_ID,
                error_message="a group id is 1 to 255 characters",
            )
        return self.offsets_topic.find(key, listener)

    # --- requests to the coordinator ----------------------------------------------------------

    async def consumer_group_heartbeat(
        self, request: ConsumerGroupHeartbeatRequest
    ) -> ConsumerGroupHeartbeatResponse:
        if not request.group_id or len(request.group_id) > GROUP_ID_MAX_CHARS:
            return ConsumerGroupHeartbeatResponse(
                error_code=ErrorCode.INVALID_GROUP_ID,
                error_message="a group id is 1 to 255 characters",
            )
        inner = g.HeartbeatRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            subscribed_topic_names=request.subscribed_topic_names,
            server_assignor=request.server_assignor or None,
            topic_partitions=self._to_ids(request.owned_partitions),
            client_id=request.client_id[:255],
            client_host=request.client_host[:255],
        )
        topics = self._topics()

        def run(shard: GroupShard, now: int) -> ResultLike[g.HeartbeatResponse]:
            released = shard.classic.take_over_empty_group(inner.group_id)
            if shard.classic.has_group(inner.group_id):  # Kafka 4.x: no upgrade of it here
                return g.Result(
                    records=[],
                    response=g.HeartbeatResponse(
                        error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                        error_message=f"{inner.group_id!r} is a classic group with members",
                    ),
                )
            result = shard.kip848.heartbeat(inner, topics, now)
            return g.Result(records=[*released.records, *result.records], response=result.response)

        try:
            partition = self._partition_of(request.group_id)
            response = await self.runtime.write(partition, lambda c, now: run(_shard(c), now))
        except KraftError as e:
            return ConsumerGroupHeartbeatResponse(error_code=e.code, error_message=e.message)
        return ConsumerGroupHeartbeatResponse(
            error_code=response.error_code,
            error_message=response.error_message,
            member_id=response.member_id,
            member_epoch=response.member_epoch,
            heartbeat_interval_ms=response.heartbeat_interval_ms,
            assignment=None if response.assignment is None else self._to_names(response.assignment),
        )

    async def offset_commit(
        self,
        request: OffsetCommitRequest,
        *,
        producer_id: int = -1,
        still_open: Callable[[], bool] | None = None,
        before_v9: bool = False,
    ) -> OffsetCommitResponse:
        """OffsetCommit; with ``producer_id``, TxnOffsetCommit (KIP-98, KIP-447): validated the
        same way, its offsets pending until the producer's transaction ends
        (`replication.group.txn_offsets`), and written only while ``still_open()`` (the
        verification guard: else INVALID_TXN_STATE). ``before_v9``: a Kafka OffsetCommit older
        than v9, which a consumer group's member (KIP-848) may not send."""
        inner = g.OffsetCommitRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=request.generation_id_or_member_epoch,
            before_v9=before_v9,
            partitions=tuple(
                g.OffsetCommitPartition(
                    topic=t.name,
                    partition=p.partition_index,
                    offset=p.committed_offset,
                    leader_epoch=p.committed_leader_epoch,
                    metadata=p.committed_metadata,
                )
                for t in request.topics
                for p in t.partitions
            ),
        )

        def validated(shard: GroupShard, now: int) -> ResultLike[g.OffsetCommitResponse]:
            code = shard.classic.validate_offset_commit(
                inner.group_id, inner.member_id, inner.member_epoch
            )
            if code is None:  # not a classic group: the KIP-848 rules
                return shard.kip848.commit_offsets(inner, now)
            if code != ErrorCode.NONE:
                return g.Result(
                    records=[], response=g.OffsetCommitResponse(error_code=ErrorCode(code))
                )
            admin = dataclasses.replace(inner, member_id="", member_epoch=-1)
            return shard.kip848.commit_offsets(admin, now)

        def run(shard: GroupShard, now: int) -> ResultLike[g.OffsetCommitResponse]:
            if still_open is not None and not still_open():  # a marker of the producer since
                refused = g.OffsetCommitResponse(error_code=ErrorCode.INVALID_TXN_STATE)
                return g.Result(records=[], response=refused)
            result = validated(shard, now)
            if producer_id < 0:
                return result
            pending = [pending_record(producer_id, r) for r in result.records]
            return g.Result(records=pending, response=result.response)

        try:
            partition = self._partition_of(request.group_id)
            response = await self.runtime.write(partition, lambda c, now: run(_shard(c), now))
        except KraftError as e:
            return OffsetCommitResponse(error_code=e.code, error_message=e.message)
        by_topic: dict[str, list[OffsetCommitResponsePartition]] = {}
        for p in response.partitions:
            by_topic.setdefault(p.topic, []).append(
                OffsetCommitResponsePartition(partition_index=p.partition, error_code=p.error_code)
            )
        return OffsetCommitResponse(
            error_code=response.error_code,
            error_message=response.error_message,
            topics=tuple(
                OffsetCommitResponseTopic(name=name, partitions=tuple(parts))
                for name, parts in by_topic.items()
            ),
        )

    async def txn_offset_commit(self, request: TxnOffsetCommitRequest) -> OffsetCommitResponse:
        """TxnOffsetCommit (KIP-98, KIP-447), as Kafka's ``scheduleTransactionalWriteOperation``
        runs it: first the group's ``__consumer_offsets`` partition joins the producer's
        transaction at its coordinator (version 2, v5+, KIP-890 part 2: the client sent no
        AddOffsetsToTxn), or is verified to be in it (older clients, KIP-890 part 1); then the
        offsets are written only if no marker of the producer reached the partition since the
        coordinator was asked (the guard). A late TxnOffsetCommit of a transaction that ended
        (held up by a paused coordinator, then retried) is refused so: written, its offsets
        would stay pending with no marker to end them, and every OffsetFetch with
        ``require_stable`` would answer UNSTABLE_OFFSET_COMMIT for ever."""
        add = request.transaction_version >= TRANSACTION_VERSION_2
        ask = self.add_to_transaction
        if ask is None and not add:  # no verifier (a harness without one)
            return await self.offset_commit(request.commit, producer_id=request.producer_id)
        offsets = self._server.image.describe_topic(OFFSETS_TOPIC)
        if ask is None or offsets is None or not offsets.partitions:
            return OffsetCommitResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        tp = TopicPartition(
            OFFSETS_TOPIC, partition_for_group(request.commit.group_id, len(offsets.partitions))
        )
        replica = self._server.replicas.get(tp)
        if replica is None:
            return OffsetCommitResponse(error_code=ErrorCode.NOT_COORDINATOR)
        producer_id = request.producer_id
        seen = replica.producer_state.markers_seen(producer_id)
        errors = await ask(
            request.transactional_id, producer_id, request.producer_epoch, frozenset({tp}), add
        )
        if (code := errors.get(tp, ErrorCode.NONE)) is not ErrorCode.NONE:
            return OffsetCommitResponse(error_code=txn_offset_commit_error(code, add=add))
        return await self.offset_commit(
            request.commit,
            producer_id=producer_id,
            still_open=lambda: replica.producer_state.markers_seen(producer_id) == seen,
        )

    async def complete_txn_offsets(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction's marker is in ``__consumer_offsets``-``partition``: commit or drop
        its pending offsets (a shard not loaded here applies the marker when it loads)."""
        with contextlib.suppress(KraftError):
            await self.runtime.write(
                partition, lambda c, now: _shard(c).complete_txn(producer_id, commit)
            )

    async def offset_fetch(self, request: OffsetFetchRequest) -> OffsetFetchResponse:
        inner = g.OffsetFetchRequest(
            group_id=request.group_id,
            partitions=tuple((t.name, p) for t in request.topics for p in t.partition_indexes)
            if request.topics
            else None,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
        )
        stable = request.require_stable
        try:
            partition = self._partition_of(request.group_id)
            response, pending = await self.runtime.read(
                partition, lambda c: _fetch_offsets(c, inner, stable=stable)
            )
        except KraftError as e:
            return OffsetFetchResponse(error_code=e.code, error_message=e.message)
        by_topic: dict[str, list[OffsetFetchResponsePartition]] = {}
        for o in response.offsets:
            by_topic.setdefault(o.topic, []).append(
                # KIP-447: pending in an open transaction, no offset until it ends
                OffsetFetchResponsePartition(
                    partition_index=o.partition, error_code=ErrorCode.UNSTABLE_OFFSET_COMMIT
                )
                if (o.topic, o.partition) in pending
                else OffsetFetchResponsePartition(
                    partition_index=o.partition,
                    committed_offset=o.offset,
                    committed_leader_epoch=o.leader_epoch,
                    metadata=o.metadata,
                    error_code=o.error_code,
                )
            )
        return OffsetFetchResponse(
            error_code=response.error_code,
            error_message=response.error_message,
            topics=tuple(
                OffsetFetchResponseTopic(name=name, partitions=tuple(parts))
                for name, parts in sorted(by_topic.items())
            ),
        )

    def _local_high_watermark(self, tp: TopicPartition) -> int | None:
        replica = self._server.replicas.get(tp)
        return None if replica is None else replica.high_watermark

    def _leader_of(self, tp: TopicPartition) -> int | None:
        topic = self._server.image.topic(tp.topic)
        registration = None if topic is None else topic.partitions.get(tp.partition)
        return None if registration is None or registration.leader < 0 else registration.leader

    def committed_offsets(self) -> list[tuple[str, str, int, int]]:
        """``(group, topic, partition, committed offset)`` of every group coordinated here.

        Raises:
            RuntimeError: the event loop changed the groups during the copy (when called from
                another thread, as the metrics endpoint does).
        """
        out = []
        for coordinator in self.runtime.loaded_coordinators():
            for group_id, group in list(_coordinator(coordinator).groups().items()):
                for (topic, partition), value in list(group.offsets.items()):
                    out.append((group_id, topic, partition, value.offset))
        return out

    async def list_groups(self, request: ListGroupsRequest) -> ListGroupsResponse:
        """The groups of the coordinators loaded on this broker (Kafka's ListGroups goes to
        every broker; the admin client merges).

        While an offsets partition led here is still loading, its groups are not known yet:
        the answer is COORDINATOR_LOAD_IN_PROGRESS (and no groups) rather than a list that
        silently misses them, as Kafka's GroupCoordinatorService does (a read on a loading
        shard fails the whole ListGroups); the admin client retries until the load is done.
        """
        loading = self.runtime.loading_partitions()
        if loading:
            return ListGroupsResponse(
                error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                error_message=f"loading the groups of {OFFSETS_TOPIC} partitions {loading[:10]}",
            )
        wanted = {s.lower() for s in request.states_filter}
        groups = []
        for coordinator in self.runtime.loaded_coordinators():
            for listing in _shard(coordinator).list_groups():
                state = listing.state.value
                if wanted and state.lower() not in wanted:
                    continue
                groups.append(
                    ListedGroup(
                        group_id=listing.group_id,
                        protocol_type=listing.protocol_type,
                        group_state=state,
                        group_type=listing.group_type,
                    )
                )
        return ListGroupsResponse(groups=tuple(sorted(groups, key=lambda x: x.group_id)))

    async def consumer_group_describe(
        self, request: ConsumerGroupDescribeRequest
    ) -> ConsumerGroupDescribeResponse:
        """Each group on its own (Kafka's GroupCoordinatorService.consumerGroupDescribe): the
        empty id INVALID_GROUP_ID, a group of another coordinator NOT_COORDINATOR, one not
        here, or a classic one, GROUP_ID_NOT_FOUND."""
        out = []
        for group_id in request.group_ids:
            try:
                if not group_id:
                    raise InvalidGroupIdError("the group id is empty")
                description = await self._describe_one(group_id)
            except KraftError as e:
                out.append(
                    DescribedGroup(
                        group_id=group_id[:GROUP_ID_MAX_CHARS],
                        error_code=e.code,
                        error_message=e.message,
                    )
                )
                continue
            if description.error_code != ErrorCode.NONE:
                out.append(
                    DescribedGroup(
                        group_id=group_id,
                        error_code=description.error_code,
                        error_message=f"group {group_id[:GROUP_ID_MAX_CHARS]!r} not found"
                        if description.error_code == ErrorCode.GROUP_ID_NOT_FOUND
                        else "",
                    )
                )
                continue
            out.append(
                DescribedGroup(
                    group_id=description.group_id,
                    error_code=description.error_code,
                    group_state=description.state.value,
                    group_epoch=description.group_epoch,
                    assignment_epoch=description.assignment_epoch,
                    assignor_name=description.assignor_name,
                    members=tuple(
                        DescribedGroupMember(
                            member_id=m.member_id,
                            member_epoch=m.member_epoch,
                            client_id=m.client_id,
                            client_host=m.client_host,
                            subscribed_topic_names=m.subscribed_topic_names,
                            assignment=self._to_names(m.assignment),
                            target_assignment=self._to_names(m.target_assignment),
                        )
                        for m in description.members
                    ),
                )
            )
        return ConsumerGroupDescribeResponse(groups=tuple(out))

    async def _describe_one(self, group_id: str) -> g.GroupDescription:
        partition = self._partition_of(group_id)

        def run(c: Coordinator) -> list[g.GroupDescription]:
            if _shard(c).is_classic(group_id):  # Kafka: "not a consumer group"
                return [
                    g.GroupDescription(
                        group_id=group_id,
                        error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                        state=g.GroupState.DEAD,
                    )
                ]
            return _coordinator(c).describe_groups([group_id])

        (description,) = await self.runtime.read(partition, run)
        return description

    async def _delete_one(self, group_id: str) -> g.DeleteGroupsResponse:
        def run(shard: GroupShard, now: int) -> ResultLike[g.DeleteGroupsResponse]:
            if not shard.classic.has_group(group_id):
                return shard.kip848.delete_groups([group_id], now)
            code, released = shard.classic.delete_group(group_id)
            if code != ErrorCode.NONE:
                return g.Result(
                    records=[], response=g.DeleteGroupsResponse(results={group_id: ErrorCode(code)})
                )
            offsets = shard.kip848.delete_groups([group_id], now)  # its offsets, if any
            return g.Result(
                records=[*released.records, *offsets.records],
                response=g.DeleteGroupsResponse(results={group_id: ErrorCode.NONE}),
            )

        partition = self._partition_of(group_id)
        return await self.runtime.write(partition, lambda c, now: run(_shard(c), now))

    async def delete_groups(self, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
        out = []
        for group_id in dict.fromkeys(request.groups_names):  # each once, as Kafka
            try:
                response = await self._delete_one(group_id)
            except KraftError as e:
                out.append(
                    DeletableGroupResult(
                        group_id=group_id[:GROUP_ID_MAX_CHARS],
                        error_code=e.code,
                        error_message=e.message,
                    )
                )
                continue
            out.append(
                DeletableGroupResult(
                    group_id=group_id,
                    error_code=response.results.get(group_id, ErrorCode.NONE),
                )
            )
        return DeleteGroupsResponse(results=tuple(out))


def _shard(c: Coordinator) -> GroupShard:
    assert isinstance(c, GroupShard)
    return c


def _coordinator(c: Coordinator) -> GroupCoordinator:
    return _shard(c).kip848


def _fetch_offsets(
    c: Coordinator, request: g.OffsetFetchRequest, *, stable: bool
) -> tuple[g.OffsetFetchResponse, set[tuple[str, int]]]:
    """The committed offsets, and (with ``stable``) the partitions whose offset is pending in
    an open transaction."""
    shard = _shard(c)
    if shard.classic.has_group(request.group_id):  # no KIP-848 member to check
        request = dataclasses.replace(request, member_id="", member_epoch=-1)
    pending = shard.txn_offsets.pending_partitions(request.group_id) if stable else set()
    return shard.kip848.fetch_offsets(request), pending


__all__ = ["OFFSETS_TOPIC_CONFIGS", "GroupService"]
