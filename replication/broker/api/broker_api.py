"""`BrokerApi`: one async handler per Kafka API, the one entry every transport calls.

Each handler is ``async def <api>(self, request, ctx: RequestContext) -> response`` on the
dataclasses of `replication.messages` (Kafka's ``KafkaApis``):
it bounds the request (`replication.broker.limits`), authorizes it
(`replication.broker.api.authorization`), calls the partition APIs
(`replication.broker.service.BrokerService`) or the group coordinator's
(`replication.broker.coordinators.group_service.GroupService`), and counts and times it
(`kraft.metrics.registry.RequestStats`, by Kafka API name). A refusal is Kafka's error code
inside the response. Admin requests for the controller go through `forward`.

Two ways in, one behaviour:

- the named handlers (`produce`, `fetch`, ...) answer a refusal in the response, as Kafka does;
  the Kafka listener calls these;
- `call(api, request, ctx)` answers `Refused` instead of the refused response, for a transport
  whose clients expect a refusal as their own status (the gRPC adapter answers it
  PERMISSION_DENIED, as kraft's clients have always been told).

A request over a limit raises `InvalidRequestError` (code INVALID_REQUEST): the request is
malformed for the broker, and each transport answers that its own way.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Generic, Protocol, TypeVar

import structlog

from kraft.controller.messages import (
    AllocateProducerIdsRequest,
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    CreateAclsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteTopicsRequest,
    DescribeAclsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    ListPartitionReassignmentsRequest,
    RegisterBrokerRequest,
    UnregisterBrokerRequest,
    UpdateFeaturesRequest,
)
from kraft.metrics.registry import RequestStats
from kraft.raft.messages import DescribeQuorumRequest
from kraft.security.guard import AccessGuard
from replication.broker.api.authorization import (
    FILTERED,
    PER_TOPIC,
    Refused,
    answer_refused,
    caller_of,
    filter_listing,
    refused_response,
    without_topics,
)
from replication.broker.api.context import RequestContext
from replication.broker.coordinators.classic_service import (
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
)
from replication.broker.coordinators.group_service import GroupService
from replication.broker.limits import too_many_partitions
from replication.broker.replicas.read_replica import client_metadata
from replication.broker.service import BrokerService
from replication.core.fetch_session import FetchSessionCache
from replication.group.classic import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from replication.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnBatchResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    BrokerFetchRequest,
    BrokerFetchResponse,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    EndTxnRequest,
    EndTxnResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
    MetadataRequest,
    MetadataResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    ProduceRequest,
    ProduceResponse,
    TxnErrorResponse,
    TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from storage.errors import (
    ClusterAuthorizationFailedError,
    ErrorCode,
    GroupAuthorizationFailedError,
    InvalidRequestError,
    KraftError,
    TopicAuthorizationFailedError,
)

Req = TypeVar("Req")
Resp = TypeVar("Resp")
T = TypeVar("T")

_log = structlog.get_logger("replication.broker.api")
_QUOTE_MAX: Final = 80

FORWARD_TIMEOUT_S: Final = 10.0
"""How long one forwarded request may take at the broker (the admin client retries after)."""


@dataclass(frozen=True, slots=True)
class Api(Generic[Req, Resp]):
    """One API: its Kafka name, its handler (without the checks), and its empty response."""

    name: str
    handle: Callable[[Req, RequestContext], Awaitable[Resp]]
    empty: Callable[[], Resp]


@dataclass(frozen=True, slots=True)
class Forwarded:
    """An admin API the broker forwards to the active controller (KIP-590)."""

    name: str
    require_active: bool = False
    """A read any controller could answer, which must come from the active one."""


FORWARDED: Final[dict[type, Forwarded]] = {
    RegisterBrokerRequest: Forwarded("BrokerRegistration"),
    BrokerHeartbeatRequest: Forwarded("BrokerHeartbeat"),
    UnregisterBrokerRequest: Forwarded("UnregisterBroker"),
    CreateTopicsRequest: Forwarded("CreateTopics"),
    DeleteTopicsRequest: Forwarded("DeleteTopics"),
    CreatePartitionsRequest: Forwarded("CreatePartitions"),
    AlterPartitionRequest: Forwarded("AlterPartition"),
    ElectLeadersRequest: Forwarded("ElectLeaders"),
    AlterPartitionReassignmentsRequest: Forwarded("AlterPartitionReassignments"),
    ListPartitionReassignmentsRequest: Forwarded("ListPartitionReassignments"),
    IncrementalAlterConfigsRequest: Forwarded("IncrementalAlterConfigs"),
    AllocateProducerIdsRequest: Forwarded("AllocateProducerIds"),
    DescribeClusterRequest: Forwarded("DescribeCluster", require_active=True),
    DescribeQuorumRequest: Forwarded("DescribeQuorum"),
    DescribeConfigsRequest: Forwarded("DescribeConfigs", require_active=True),
    CreateAclsRequest: Forwarded("CreateAcls"),
    DeleteAclsRequest: Forwarded("DeleteAcls"),
    DescribeAclsRequest: Forwarded("DescribeAcls", require_active=True),
    UpdateFeaturesRequest: Forwarded("UpdateFeatures"),
}
"""The controller APIs a broker forwards, by request dataclass (the others are not served)."""

_REFUSALS: Final[dict[ErrorCode, type[KraftError]]] = {
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: TopicAuthorizationFailedError,
    ErrorCode.GROUP_AUTHORIZATION_FAILED: GroupAuthorizationFailedError,
}


class ControllerChannel(Protocol):
    """The broker's channel to the active controller (`kraft.controller.ControllerClient`):
    blocking, it finds the active controller and follows NOT_CONTROLLER hints itself."""

    def send(
        self, request: Any, *, timeout: float | None = None, require_active: bool = False
    ) -> Any: ...


class BrokerApi:
    """The broker's APIs (see the module docstring).

    Args:
        broker: Produce, Fetch, ListOffsets, Metadata and InitProducerId.
        groups: the group APIs.
        guard: the broker's `AccessGuard` (its authorizer off: every request allowed).
        controllers: the channel forwarded admin requests go through.
        fetch_session_slots: ``max.incremental.fetch.session.cache.slots``.
    """

    def __init__(
        self,
        broker: BrokerService,
        groups: GroupService,
        guard: AccessGuard,
        controllers: ControllerChannel,
        *,
        fetch_session_slots: int,
    ) -> None:
        self._guard = guard
        self.fetch_sessions = FetchSessionCache(fetch_session_slots, random.Random())
        """Kafka clients' fetch sessions (KIP-227), served by the Kafka listeners."""
        self._controllers = controllers
        self._stats = RequestStats()
        self.finalized_features = broker.finalized_features
        """(epoch, feature -> level) the controller finalized (ApiVersions, KIP-584)."""
        self.produce_api: Api[ProduceRequest, ProduceResponse] = Api(
            "Produce", lambda r, ctx: broker.produce(r, ctx.api_version), ProduceResponse
        )
        self.fetch_api: Api[BrokerFetchRequest, BrokerFetchResponse] = Api(
            "Fetch",
            lambda r, ctx: broker.fetch(
                r,
                client_metadata(r.rack_id, ctx.listener, ctx.api_version),
                file_regions=ctx.file_regions,
            ),
            BrokerFetchResponse,
        )
        self.list_offsets_api = Api(
            "ListOffsets", _ignore_ctx(broker.list_offsets), ListOffsetsResponse
        )
        self.metadata_api: Api[MetadataRequest, MetadataResponse] = Api(
            "Metadata", lambda r, ctx: broker.metadata(r, ctx.listener), MetadataResponse
        )
        transactions = groups.transactions
        self.init_producer_id_api: Api[InitProducerIdRequest, InitProducerIdResponse] = Api(
            "InitProducerId",
            lambda r, _: (
                transactions.init_producer_id(r)
                if r.transactional_id
                else broker.init_producer_id(r)
            ),
            InitProducerIdResponse,
        )
        self.write_txn_markers_api: Api[WriteTxnMarkersRequest, WriteTxnMarkersResponse] = Api(
            "WriteTxnMarkers",
            lambda r, _: broker.write_txn_markers(r, groups.complete_txn_offsets),
            WriteTxnMarkersResponse,
        )
        self.add_partitions_to_txn_api = Api(
            "AddPartitionsToTxn",
            _ignore_ctx(transactions.add_partitions_to_txn),
            AddPartitionsToTxnResponse,
        )
        self.add_partitions_to_txn_batch_api = Api(
            "AddPartitionsToTxnBatch",
            _ignore_ctx(transactions.add_partitions_to_txn_batch),
            AddPartitionsToTxnBatchResponse,
        )
        self.add_offsets_to_txn_api = Api(
            "AddOffsetsToTxn", _ignore_ctx(transactions.add_offsets_to_txn), TxnErrorResponse
        )
        self.end_txn_api = Api("EndTxn", _ignore_ctx(transactions.end_txn), EndTxnResponse)
        self.describe_transactions_api = Api(
            "DescribeTransactions",
            _ignore_ctx(transactions.describe_transactions),
            DescribeTransactionsResponse,
        )
        self.list_transactions_api = Api(
            "ListTransactions",
            _ignore_ctx(transactions.list_transactions),
            ListTransactionsResponse,
        )
        self.txn_offset_commit_api: Api[TxnOffsetCommitRequest, OffsetCommitResponse] = Api(
            "TxnOffsetCommit",
            _ignore_ctx(groups.txn_offset_commit),
            OffsetCommitResponse,
        )
        self.find_coordinator_api: Api[FindCoordinatorRequest, FindCoordinatorResponse] = Api(
            "FindCoordinator",
            lambda r, ctx: groups.find_coordinator(r, ctx.listener),
            FindCoordinatorResponse,
        )
        self.consumer_group_heartbeat_api: Api[
            ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
        ] = Api(
            "ConsumerGroupHeartbeat",
            lambda r, ctx: groups.consumer_group_heartbeat(_with_client(r, ctx)),
            ConsumerGroupHeartbeatResponse,
        )
        self.offset_commit_api: Api[OffsetCommitRequest, OffsetCommitResponse] = Api(
            "OffsetCommit",
            # A KIP-848 member must send v9+ (-1: gRPC, which has no versions).
            lambda r, ctx: groups.offset_commit(r, before_v9=0 <= ctx.api_version < 9),
            OffsetCommitResponse,
        )
        self.offset_fetch_api = Api(
            "OffsetFetch", _ignore_ctx(groups.offset_fetch), OffsetFetchResponse
        )
        self.list_groups_api = Api(
            "ListGroups", _ignore_ctx(groups.list_groups), ListGroupsResponse
        )
        self.consumer_group_describe_api = Api(
            "ConsumerGroupDescribe",
            _ignore_ctx(groups.consumer_group_describe),
            ConsumerGroupDescribeResponse,
        )
        self.delete_groups_api = Api(
            "DeleteGroups", _ignore_ctx(groups.delete_groups), DeleteGroupsResponse
        )
        self.describe_log_dirs_api = Api(
            "DescribeLogDirs", _ignore_ctx(broker.describe_log_dirs), DescribeLogDirsResponse
        )
        self.describe_producers_api = Api(
            "DescribeProducers", _ignore_ctx(broker.describe_producers), DescribeProducersResponse
        )
        classic = groups.classic
        self.join_group_api: Api[JoinGroupRequest, JoinGroupResponse] = Api(
            "JoinGroup",
            lambda r, ctx: classic.join_group(_joining_client(r, ctx)),
            JoinGroupResponse,
        )
        self.sync_group_api = Api("SyncGroup", _ignore_ctx(classic.sync_group), SyncGroupResponse)
        self.heartbeat_api = Api("Heartbeat", _ignore_ctx(classic.heartbeat), HeartbeatResponse)
        self.leave_group_api = Api(
            "LeaveGroup", _ignore_ctx(classic.leave_group), LeaveGroupResponse
        )
        self.describe_groups_api = Api(
            "DescribeGroups", _ignore_ctx(classic.describe_groups), DescribeGroupsResponse
        )
        self.offset_delete_api = Api(
            "OffsetDelete", _ignore_ctx(classic.offset_delete), OffsetDeleteResponse
        )

    def topic_name(self, topic_id: str) -> str | None:
        """The name of topic ``topic_id`` in the broker's metadata image (None: unknown)."""
        return self._guard.topic_name(topic_id)

    # --- the handlers -------------------------------------------------------------------------

    async def produce(self, request: ProduceRequest, ctx: RequestContext) -> ProduceResponse:
        return await self._answer(self.produce_api, request, ctx)

    async def fetch(self, request: BrokerFetchRequest, ctx: RequestContext) -> BrokerFetchResponse:
        return await self._answer(self.fetch_api, request, ctx)

    async def list_offsets(
        self, request: ListOffsetsRequest, ctx: RequestContext
    ) -> ListOffsetsResponse:
        return await self._answer(self.list_offsets_api, request, ctx)

    async def metadata(self, request: MetadataRequest, ctx: RequestContext) -> MetadataResponse:
        return await self._answer(self.metadata_api, request, ctx)

    async def init_producer_id(
        self, request: InitProducerIdRequest, ctx: RequestContext
    ) -> InitProducerIdResponse:
        return await self._answer(self.init_producer_id_api, request, ctx)

    async def write_txn_markers(
        self, request: WriteTxnMarkersRequest, ctx: RequestContext
    ) -> WriteTxnMarkersResponse:
        return await self._answer(self.write_txn_markers_api, request, ctx)

    async def add_partitions_to_txn(
        self, request: AddPartitionsToTxnRequest, ctx: RequestContext
    ) -> AddPartitionsToTxnResponse:
        return await self._answer(self.add_partitions_to_txn_api, request, ctx)

    async def add_offsets_to_txn(
        self, request: AddOffsetsToTxnRequest, ctx: RequestContext
    ) -> TxnErrorResponse:
        return await self._answer(self.add_offsets_to_txn_api, request, ctx)

    async def end_txn(self, request: EndTxnRequest, ctx: RequestContext) -> EndTxnResponse:
        return await self._answer(self.end_txn_api, request, ctx)

    async def describe_transactions(
        self, request: DescribeTransactionsRequest, ctx: RequestContext
    ) -> DescribeTransactionsResponse:
        return await self._answer(self.describe_transactions_api, request, ctx)

    async def list_transactions(
        self, request: ListTransactionsRequest, ctx: RequestContext
    ) -> ListTransactionsResponse:
        return await self._answer(self.list_transactions_api, request, ctx)

    async def txn_offset_commit(
        self, request: TxnOffsetCommitRequest, ctx: RequestContext
    ) -> OffsetCommitResponse:
        return await self._answer(self.txn_offset_commit_api, request, ctx)

    async def find_coordinator(
        self, request: FindCoordinatorRequest, ctx: RequestContext
    ) -> FindCoordinatorResponse:
        return await self._answer(self.find_coordinator_api, request, ctx)

    async def consumer_group_heartbeat(
        self, request: ConsumerGroupHeartbeatRequest, ctx: RequestContext
    ) -> ConsumerGroupHeartbeatResponse:
        return await self._answer(self.consumer_group_heartbeat_api, request, ctx)

    async def offset_commit(
        self, request: OffsetCommitRequest, ctx: RequestContext
    ) -> OffsetCommitResponse:
        return await self._answer(self.offset_commit_api, request, ctx)

    async def offset_fetch(
        self, request: OffsetFetchRequest, ctx: RequestContext
    ) -> OffsetFetchResponse:
        return await self._answer(self.offset_fetch_api, request, ctx)

    async def list_groups(
        self, request: ListGroupsRequest, ctx: RequestContext
    ) -> ListGroupsResponse:
        return await self._answer(self.list_groups_api, request, ctx)

    async def consumer_group_describe(
        self, request: ConsumerGroupDescribeRequest, ctx: RequestContext
    ) -> ConsumerGroupDescribeResponse:
        return await self._answer(self.consumer_group_describe_api, request, ctx)

    async def delete_groups(
        self, request: DeleteGroupsRequest, ctx: RequestContext
    ) -> DeleteGroupsResponse:
        return await self._answer(self.delete_groups_api, request, ctx)

    async def describe_log_dirs(
        self, request: DescribeLogDirsRequest, ctx: RequestContext
    ) -> DescribeLogDirsResponse:
        return await self._answer(self.describe_log_dirs_api, request, ctx)

    async def describe_producers(
        self, request: DescribeProducersRequest, ctx: RequestContext
    ) -> DescribeProducersResponse:
        return await self._answer(self.describe_producers_api, request, ctx)

    # classic groups (the Kafka listener only: kraft's own clients use KIP-848)

    async def join_group(self, request: JoinGroupRequest, ctx: RequestContext) -> JoinGroupResponse:
        return await self._answer(self.join_group_api, request, ctx)

    async def sync_group(self, request: SyncGroupRequest, ctx: RequestContext) -> SyncGroupResponse:
        return await self._answer(self.sync_group_api, request, ctx)

    async def heartbeat(self, request: HeartbeatRequest, ctx: RequestContext) -> HeartbeatResponse:
        return await self._answer(self.heartbeat_api, request, ctx)

    async def leave_group(
        self, request: LeaveGroupRequest, ctx: RequestContext
    ) -> LeaveGroupResponse:
        return await self._answer(self.leave_group_api, request, ctx)

    async def describe_groups(
        self, request: DescribeGroupsRequest, ctx: RequestContext
    ) -> DescribeGroupsResponse:
        return await self._answer(self.describe_groups_api, request, ctx)

    async def offset_delete(
        self, request: OffsetDeleteRequest, ctx: RequestContext
    ) -> OffsetDeleteResponse:
        return await self._answer(self.offset_delete_api, request, ctx)

    # --- the checks ---------------------------------------------------------------------------

    async def _answer(self, api: Api[Req, Resp], request: Req, ctx: RequestContext) -> Resp:
        outcome = await self.call(api, request, ctx)
        if isinstance(outcome, Refused):
            answer: Resp = refused_response(api.name, request, api.empty(), outcome)
            return answer
        return outcome

    async def call(self, api: Api[Req, Resp], request: Req, ctx: RequestContext) -> Resp | Refused:
        """``request`` to ``api``, bounded, authorized, counted and timed; `Refused` when the
        caller may not send it at all.

        Raises:
            InvalidRequestError: the request names more partitions than a request may.
        """
        metric = api.name
        if api.name == "Fetch":  # Kafka's RequestMetrics splits Fetch by who asks
            fetch = request
            assert isinstance(fetch, BrokerFetchRequest)
            metric = "FetchFollower" if fetch.replica_id >= 0 else "FetchConsumer"
        checked = self._checked(api, request, ctx)
        return await self._measured(metric, checked)

    async def _measured(self, name: str, run: Awaitable[T]) -> T:
        observe, ok, failed = self._stats.series(name)
        started = time.perf_counter()
        try:
            outcome = await run
        except BaseException:
            observe(time.perf_counter() - started)
            failed()
            raise
        observe(time.perf_counter() - started)
        (failed if isinstance(outcome, Refused) else ok)()
        return outcome

    async def _checked(
        self, api: Api[Req, Resp], request: Req, ctx: RequestContext
    ) -> Resp | Refused:
        problem = too_many_partitions(request)
        if problem is not None:
            raise InvalidRequestError(problem)
        return await self._authorized(api.name, request, ctx, api.handle)

    async def _authorized(
        self,
        name: str,
        request: Req,
        ctx: RequestContext,
        handle: Callable[[Req, RequestContext], Awaitable[Resp]],
    ) -> Resp | Refused:
        guard = self._guard
        if not guard.enabled:
            return await handle(request, ctx)
        caller = caller_of(ctx)
        decision = guard.decide_api(name, request, caller)
        if decision.refusal is not None:
            _log.info(
                "call_refused",
                api=name,
                principal=caller.principal[:_QUOTE_MAX],
                host=caller.host,
                error=decision.refusal.code.name,
            )
            return Refused(decision.refusal.code, decision.refusal.message)
        refused = decision.refused_topics
        if refused and name in PER_TOPIC:
            _log.info(
                "topics_refused",
                api=name,
                principal=caller.principal[:_QUOTE_MAX],
                host=caller.host,
                topics=sorted(t[:_QUOTE_MAX] for t in refused)[:10],
            )
            reduced = without_topics(name, request, refused, guard.topic_name)
            answered: Resp = answer_refused(
                name,
                request,
                refused,
                await handle(reduced, ctx),
                lambda topic: f"{decision.why} {topic[:_QUOTE_MAX]!r}",
                guard.topic_name,
                decision.code,
            )
        else:
            answered = await handle(request, ctx)
        if name in FILTERED:
            filtered: Resp = filter_listing(
                name, request, answered, lambda need: guard.may(caller, need)
            )
            return filtered
        return answered

    # --- forwarded to the controller ----------------------------------------------------------

    async def forward(self, request: object, ctx: RequestContext) -> object:
        """Forward an admin request (a `kraft.controller.messages` dataclass, ...) to the active
        controller, authorized here first with this broker's ACLs (KIP-590 forwarding); the
        blocking controller client runs in a worker thread, never on the event loop.

        Raises:
            TopicAuthorizationFailedError, GroupAuthorizationFailedError,
                ClusterAuthorizationFailedError: the caller may not send it at all (the code
                is Kafka's; some topics refused are answered per topic in the response).
            InvalidRequestError: not an API a broker forwards.
            KraftError: the controller could not be reached in time (retriable), or refused.
        """
        forwarded = FORWARDED.get(type(request))
        if forwarded is None:
            raise InvalidRequestError(f"{type(request).__name__} is not forwarded by a broker")

        async def send(r: object, _: RequestContext) -> object:
            try:
                return await asyncio.to_thread(
                    self._controllers.send,
                    r,
                    timeout=FORWARD_TIMEOUT_S,
                    require_active=forwarded.require_active,
                )
            except KraftError as e:
                _log.info("forward_failed", api=forwarded.name, error=e.code.name)
                raise

        outcome = await self._measured(
            forwarded.name, self._authorized(forwarded.name, request, ctx, send)
        )
        if isinstance(outcome, Refused):
            raise _REFUSALS.get(outcome.code, ClusterAuthorizationFailedError)(outcome.message)
        return outcome


def _ignore_ctx(
    handle: Callable[[Req], Awaitable[Resp]],
) -> Callable[[Req, RequestContext], Awaitable[Resp]]:
    return lambda request, _ctx: handle(request)


def _with_client(
    request: ConsumerGroupHeartbeatRequest, ctx: RequestContext
) -> ConsumerGroupHeartbeatRequest:
    """The member's client id and host from the context when the request has none (Kafka
    takes both from the request header and the connection): host as ``/1.2.3.4``."""
    host = request.client_host or (f"/{ctx.client_host}" if ctx.client_host else "")
    client_id = request.client_id or ctx.client_id
    if host == request.client_host and client_id == request.client_id:
        return request
    return dataclasses.replace(request, client_host=host, client_id=client_id)


def _joining_client(request: JoinGroupRequest, ctx: RequestContext) -> JoinGroupRequest:
    """The member's client id and host (``/1.2.3.4``) from the context, as Kafka takes them."""
    host = request.client_host or (f"/{ctx.client_host}" if ctx.client_host else "")
    client_id = request.client_id or ctx.client_id
    return dataclasses.replace(request, client_host=host[:255], client_id=client_id[:255])


__all__ = ["FORWARDED", "FORWARD_TIMEOUT_S", "Api", "BrokerApi", "ControllerChannel", "Forwarded"]
