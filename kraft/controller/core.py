"""`ControllerCore`: the pure decision core of Kafka's QuorumController (no I/O, no clock).

Theory of operation
-------------------
The core holds two images:

- the **committed image**: the fold of every record the Raft layer reported committed, fed in
  by `ControllerCore.replay` on every controller (active or standby), in log order;
- the **pending image**: the committed image plus every record this core produced that has not
  committed yet. While active, *all decisions are made against the pending image*, because
  several requests may be in flight before their records commit (Kafka keeps the same "latest
  in-memory" view, with a snapshot registry to roll it back).

When a controller stops being active (`resign`), the pending image is dropped: the pending image
becomes the committed image again. That is the whole rollback story, and it is O(1) because
images are immutable and share structure (see `kraft.metadata.image`).

Offsets. A broker epoch is the offset of the broker's ``RegisterBrokerRecord``, so the core must
know which offsets its records will get. `become_active` takes the offset of the first entry
this controller will append (after the Raft leader's own epoch-start entry); from then on the
core assumes its batches are appended back to back, in the order it produced them, with
nothing else in between.

The shell's contract, per request::

    result = core.handle_create_topics_request(request, now_ms)   # or any handle_*_request
    if result.records:
        base = raft.propose([encode_record(r) for r in result.records], now_ms)  # ONE batch
        assert base == expected_base     # else: core.resign(), answer NOT_CONTROLLER
        wait until the batch commits, then send result.response
    else:
        send result.response now

    for each committed entry (offset, epoch, record), in order:  core.replay(record, offset, epoch)
    at core.next_deadline_ms(): records = core.tick(now_ms); propose them as one batch
    on losing leadership: core.resign()   # in-flight responses become NOT_CONTROLLER

`become_active` must only be called once the committed image covers every entry before
``next_offset`` (KIP-595: the new leader has committed an entry of its own epoch, so every
earlier entry is committed and has been replayed).

If the core is not active, every handler answers NOT_CONTROLLER and produces no records
(`is_active` lets the server check first and redirect).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar, final

import structlog
from structlog.typing import FilteringBoundLogger

from kraft.controller.acl_control import handle_create_acls, handle_delete_acls
from kraft.controller.cluster_control import (
    BrokerHeartbeatManager,
    handle_allocate_producer_ids,
    handle_broker_heartbeat,
    handle_register_broker,
    handle_unregister_broker,
)
from kraft.controller.config_control import handle_incremental_alter_configs
from kraft.controller.feature_control import handle_update_features
from kraft.controller.leader_balance import LeaderBalanceConfig, LeaderBalancer
from kraft.controller.messages import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterConfigsResourceResult,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    CreatableTopicResult,
    CreateAclsRequest,
    CreateAclsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    RegisterBrokerRequest,
    RegisterBrokerResponse,
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
    UpdateFeaturesRequest,
    UpdateFeaturesResponse,
)
from kraft.controller.partition_control import handle_alter_partition, handle_elect_leaders
from kraft.controller.periodic import count_partition_changes, periodic_work
from kraft.controller.reassignment import (
    handle_alter_partition_reassignments,
    handle_list_partition_reassignments,
    with_completed_reassignments,
)
from kraft.controller.result import ControllerResult
from kraft.controller.topic_control import (
    TopicDefaults,
    handle_create_partitions,
    handle_create_topics,
    handle_delete_topics,
)
from kraft.metadata.features import TRANSACTION_VERSION
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import MetadataRecord, PartitionChangeRecord
from storage.errors import ErrorCode

R = TypeVar("R")

_NOT_CONTROLLER = ErrorCode.NOT_CONTROLLER
_NOT_ACTIVE_MESSAGE = "this controller is not the active controller"


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerConfig:
    """The controller's settings (Kafka key in brackets)."""

    broker_session_timeout_ms: int = 3000
    """[broker.session.timeout.ms] Fence a broker after this long without a heartbeat. Kafka's
    default is 9000; kraft's 3000 suits loopback clusters."""
    default_num_partitions: int = 1
    """[num.partitions] Partitions of a topic created with num_partitions=-1."""
    default_replication_factor: int = 1
    """[default.replication.factor] Replication factor used when a request says -1."""
    auto_leader_rebalance_enable: bool = True
    """[auto.leader.rebalance.enable] Elect preferred leaders where leadership is imbalanced
    (`kraft.controller.leader_balance`)."""
    leader_imbalance_check_interval_seconds: int = 300
    """[leader.imbalance.check.interval.seconds] How often leader balance is checked."""
    leader_imbalance_per_broker_percentage: int = 10
    """[leader.imbalance.per.broker.percentage] A broker's tolerated share of preferred
    partitions it does not lead."""
    eligible_leader_replicas_enable: bool = True
    """[eligible.leader.replicas.enable] KIP-966: keep replicas that left the ISR below
    ``min.insync.replicas`` as eligible leaders (`kraft.controller.eligible_leaders`). Kafka
    4.0's default is off, 4.1 turns it on for new clusters; kraft's is on."""
    transaction_version: int = 2
    """[transaction.version] The level of the ``transaction.version`` feature the controller
    finalizes when the cluster has none yet (`kraft.metadata.features`)."""

    def leader_balance(self) -> LeaderBalanceConfig:
        return LeaderBalanceConfig(
            enabled=self.auto_leader_rebalance_enable,
            check_interval_ms=self.leader_imbalance_check_interval_seconds * 1000,
            imbalance_percentage=self.leader_imbalance_per_broker_percentage,
        )


@final
class ControllerCore:
    """Decides metadata changes; see the module docstring for the contract with the shell.

    Args:
        rng: the injected generator for topic ids and placement (the simulator's seed).
        config: timeouts and topic defaults.
        image: the committed image to start from (e.g. loaded from a snapshot).
        log: a structlog logger; bound with ``component="controller"``.
    """

    def __init__(
        self,
        *,
        rng: random.Random,
        config: ControllerConfig | None = None,
        image: MetadataImage | None = None,
        log: FilteringBoundLogger | None = None,
    ) -> None:
        self.config = config or ControllerConfig()
        self._rng = rng
        self._committed = image or MetadataImage.empty()
        self._pending = self._committed
        self._heartbeats = BrokerHeartbeatManager(self.config.broker_session_timeout_ms)
        self._elr = self.config.eligible_leader_replicas_enable
        self._balancer = LeaderBalancer(self.config.leader_balance(), elr_enabled=self._elr)
        self._topic_defaults = TopicDefaults(
            num_partitions=self.config.default_num_partitions,
            replication_factor=self.config.default_replication_factor,
        )
        self._active = False
        self._epoch = -1
        self._next_offset = -1
        # When an input changed the pending image (or made us active) after the last tick:
        # `tick` may have event-driven work then (an offline partition that can now have a
        # leader, e.g. after unclean.leader.election.enable was turned on).
        self._tick_wanted_at_ms: int | None = None
        # KIP-455: a new active controller completes the reassignments whose ISR became
        # complete under its predecessor (their completion record may have been lost).
        self._reassignment_scan_wanted = False
        # Records produced but not yet replayed as committed: (offset, record), in log order.
        self._inflight: deque[tuple[int, MetadataRecord]] = deque()
        # The in-flight batches: (base offset, record count, the pending image after them).
        self._inflight_batches: deque[tuple[int, int, MetadataImage]] = deque()
        self._heard_since_active: set[int] = set()
        """Brokers whose heartbeat this core answered since it became active."""
        self._base_log: FilteringBoundLogger = log if log is not None else structlog.get_logger()
        self._log = self._base_log.bind(component="controller", role="standby")

    # -- state ---------------------------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        """Whether this core is the active controller (else handlers answer NOT_CONTROLLER)."""
        return self._active

    @property
    def epoch(self) -> int:
        """The Raft epoch this core is active in (-1 when standby)."""
        return self._epoch

    @property
    def committed_image(self) -> MetadataImage:
        return self._committed

    @property
    def pending_image(self) -> MetadataImage:
        """Committed image + records produced but not committed (== committed when standby)."""
        return self._pending

    @property
    def next_offset(self) -> int:
        """The offset the next produced batch will start at (-1 when standby)."""
        return self._next_offset

    @property
    def inflight_count(self) -> int:
        return len(self._inflight)

    def skip_to(self, next_offset: int) -> None:
        """Raft appended entries the core did not make (a KIP-853 voter change's control
        batch): this controller's next batch lands at ``next_offset``, not where the core
        counted. Without it the next batch's records carried offsets one short of where Raft
        put them, and the replay's check killed the controller."""
        if self._active and next_offset > self._next_offset:
            self._next_offset = next_offset

    def broker_last_contact_ms(self, broker_id: int) -> int | None:
        return self._heartbeats.last_contact_ms(broker_id)

    # -- leadership and replay -----------------------------------------------------------------

    def become_active(self, *, epoch: int, next_offset: int, now_ms: int) -> None:
        """Start deciding, as the Raft leader of ``epoch``; ``next_offset`` is where this
        controller's first batch will land. Every unfenced broker gets a fresh session (soft
        state); a fenced one has none until it heartbeats."""
        assert not self._active, "already active"
        assert next_offset > self._committed.last_offset, (next_offset, self._committed.last_offset)
        self._active, self._epoch, self._next_offset = True, epoch, next_offset
        self._pending = self._committed
        self._inflight.clear()
        self._inflight_batches.clear()
        self._heard_since_active.clear()
        # NB: unfenced brokers only (Kafka's activation registers fenced ones without a
        # valid session): a fresh session for a fenced, dead broker made its restarted
        # incarnation wait out DUPLICATE_BROKER_REGISTRATION after every controller change
        # (61 s of a 63 s restart in `kraft bench metadata` at 10,000 partitions).
        self._heartbeats.reset(self._committed.unfenced_broker_ids(), now_ms)
        self._balancer.reset(now_ms)
        self._tick_wanted_at_ms = now_ms  # a predecessor may have left offline partitions
        self._reassignment_scan_wanted = True
        self._log = self._base_log.bind(component="controller", role="active", epoch=epoch)
        self._log.info("became_active", next_offset=next_offset)

    def resign(self) -> None:
        """Stop deciding and drop every uncommitted record (Kafka's ``renounce``)."""
        if not self._active:
            return
        dropped = len(self._inflight)
        self._active, self._epoch, self._next_offset = False, -1, -1
        self._pending = self._committed
        self._inflight.clear()
        self._inflight_batches.clear()
        self._tick_wanted_at_ms = None
        self._log.info("resigned", dropped_records=dropped)
        self._log = self._base_log.bind(component="controller", role="standby")

    def replay(self, record: MetadataRecord, offset: int, epoch: int | None = None) -> None:
        """Apply one committed record (``epoch``: the Raft epoch of its batch, if known).

        While active, it must be the oldest in-flight record: only this controller writes.
        """
        self.replay_batch((record,), offset, epoch)

    def replay_own_batch(self, base_offset: int, count: int, epoch: int) -> bool:
        """Commit this active controller's oldest in-flight batch without decoding or replaying
        it, if that is the batch at ``base_offset`` (``count`` records, our ``epoch``): the
        committed image becomes the pending image that batch left (the same fold; Kafka's
        active controller does not replay its own records either). False: not ours, or not
        active; the caller decodes and calls `replay_batch`.

        Before, the active controller decoded and replayed each of its own batches a second
        time on its event loop (~0.25 s for a 1,000-partition create under load), besides
        deciding it: the stall that cost the quorum its leader."""
        if not self._active or epoch != self._epoch or not self._inflight_batches:
            return False
        base, n, after = self._inflight_batches[0]
        if base != base_offset or n != count:
            return False
        self._inflight_batches.popleft()
        for _ in range(n):
            self._inflight.popleft()
        self._committed = after
        return True

    def replay_batch(
        self, records: Sequence[MetadataRecord], base_offset: int, epoch: int | None = None
    ) -> None:
        """Apply committed records at ``base_offset``, ``base_offset + 1``, ..."""
        self._committed = self._committed.apply_batch(records, base_offset, epoch)
        if not self._active:
            self._pending = self._committed
            return
        for i, record in enumerate(records):
            # Invariant: while active, only our own records commit, in the order we made them.
            assert self._inflight, f"committed record at {base_offset + i} was not produced here"
            expected = self._inflight.popleft()
            assert expected == (base_offset + i, record), (expected, base_offset + i, record)
        while self._inflight_batches and (
            self._inflight_batches[0][0] + self._inflight_batches[0][1]
            <= base_offset + len(records)
        ):
            self._inflight_batches.popleft()

    def load_snapshot(self, image: MetadataImage) -> None:
        """Replace the committed image (a standby catching up from a snapshot, KIP-630)."""
        assert not self._active, "an active controller does not load snapshots"
        self._committed = self._pending = image

    # -- requests ------------------------------------------------------------------------------

    def handle_register_broker_request(
        self, request: RegisterBrokerRequest, now_ms: int
    ) -> ControllerResult[RegisterBrokerResponse]:
        if not self._active:
            return _rejected(RegisterBrokerResponse(error_code=_NOT_CONTROLLER))
        result = handle_register_broker(
            self._pending,
            request,
            next_offset=self._next_offset,
            heartbeats=self._heartbeats,
            now_ms=now_ms,
            elr_enabled=self._elr,
        )
        response = result.response
        if response.error_code is ErrorCode.NONE:
            self._log.info(
                "broker_registered",
                broker_id=request.broker_id,
                broker_epoch=response.broker_epoch,
                # KIP-966: None after an unclean shutdown (it then leaves every ELR).
                previous_broker_epoch=request.previous_broker_epoch,
            )
        else:
            self._log.info(
                "broker_registration_rejected",
                broker_id=request.broker_id,
                error=response.error_code.name,
            )
        return self._append(result, now_ms)

    def handle_broker_heartbeat_request(
        self, request: BrokerHeartbeatRequest, now_ms: int
    ) -> ControllerResult[BrokerHeartbeatResponse]:
        if not self._active:
            return _rejected(BrokerHeartbeatResponse(error_code=_NOT_CONTROLLER))
        before = self._pending.broker(request.broker_id)
        if request.broker_id not in self._heard_since_active:
            # The first heartbeat this controller answers for the broker: `kraft bench
            # metadata` times a failover up to here (one event per broker and activation).
            self._heard_since_active.add(request.broker_id)
            self._log.info("broker_heartbeat_resumed", broker_id=request.broker_id)
        result = handle_broker_heartbeat(
            self._pending,
            request,
            heartbeats=self._heartbeats,
            now_ms=now_ms,
            elr_enabled=self._elr,
        )
        self._append(result, now_ms)
        for record in result.records:
            if isinstance(record, PartitionChangeRecord) and record.offline_replicas is not None:
                self._log.warning(
                    "offline_replicas_changed",
                    broker_id=request.broker_id,
                    topic_id=record.topic_id,
                    partition=record.partition,
                    offline_replicas=list(record.offline_replicas),
                    leader=record.leader,
                )
        after = self._pending.broker(request.broker_id)
        if before is not None and after is not None and after.state is not before.state:
            self._log.info(
                "broker_state_changed",
                broker_id=request.broker_id,
                from_state=before.state.value,
                to_state=after.state.value,
                partition_changes=count_partition_changes(result.records),
            )
        return result

    def handle_unregister_broker_request(
        self, request: UnregisterBrokerRequest, now_ms: int
    ) -> ControllerResult[UnregisterBrokerResponse]:
        if not self._active:
            return _rejected(UnregisterBrokerResponse(error_code=_NOT_CONTROLLER))
        result = handle_unregister_broker(
            self._pending, request, heartbeats=self._heartbeats, elr_enabled=self._elr
        )
        if result.records:
            self._log.info("broker_unregistered", broker_id=request.broker_id)
        return self._append(result, now_ms)

    def handle_create_topics_request(
        self, request: CreateTopicsRequest, now_ms: int
    ) -> ControllerResult[CreateTopicsResponse]:
        if not self._active:
            results = tuple(
                CreatableTopicResult(
                    name=t.name, error_code=_NOT_CONTROLLER, error_message=_NOT_ACTIVE_MESSAGE
                )
                for t in request.topics
            )
            return _rejected(CreateTopicsResponse(topics=results))
        result = handle_create_topics(
            self._pending, request, rng=self._rng, defaults=self._topic_defaults
        )
        for topic in result.response.topics:
            if topic.error_code is ErrorCode.NONE and not request.validate_only:
                self._log.info(
                    "topic_created",
                    topic=topic.name,
                    topic_id=topic.topic_id,
                    partitions=topic.num_partitions,
                    replication_factor=topic.replication_factor,
                )
        return self._append(result, now_ms)

    def handle_delete_topics_request(
        self, request: DeleteTopicsRequest, now_ms: int
    ) -> ControllerResult[DeleteTopicsResponse]:
        if not self._active:
            results = tuple(
                DeletableTopicResult(name=n, topic_id="", error_code=_NOT_CONTROLLER)
                for n in request.topic_names
            ) + tuple(
                DeletableTopicResult(name=None, topic_id=i, error_code=_NOT_CONTROLLER)
                for i in request.topic_ids
            )
            return _rejected(DeleteTopicsResponse(topics=results))
        result = handle_delete_topics(self._pending, request)
        if result.records:
            self._log.info("topics_deleted", count=len(result.records))
        return self._append(result, now_ms)

    def handle_create_partitions_request(
        self, request: CreatePartitionsRequest, now_ms: int
    ) -> ControllerResult[CreatePartitionsResponse]:
        if not self._active:
            results = tuple(
                CreatePartitionsTopicResult(name=t.name, error_code=_NOT_CONTROLLER)
                for t in request.topics
            )
            return _rejected(CreatePartitionsResponse(results=results))
        result = handle_create_partitions(self._pending, request, rng=self._rng)
        if result.records:
            self._log.info("partitions_created", count=len(result.records))
        return self._append(result, now_ms)

    def handle_incremental_alter_configs_request(
        self, request: IncrementalAlterConfigsRequest, now_ms: int
    ) -> ControllerResult[IncrementalAlterConfigsResponse]:
        if not self._active:
            results = tuple(
                AlterConfigsResourceResult(
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                    error_code=_NOT_CONTROLLER,
                )
                for r in request.resources
            )
            return _rejected(IncrementalAlterConfigsResponse(responses=results))
        result = handle_incremental_alter_configs(self._pending, request)
        if result.records:
            self._log.info("configs_altered", count=len(result.records))
            self._reassignment_scan_wanted = True  # a lowered min.insync.replicas may unblock
        return self._append(result, now_ms)

    def handle_alter_partition_request(
        self, request: AlterPartitionRequest, now_ms: int
    ) -> ControllerResult[AlterPartitionResponse]:
        if not self._active:
            return _rejected(AlterPartitionResponse(error_code=_NOT_CONTROLLER))
        result = with_completed_reassignments(
            self._pending,
            self._next_offset,
            handle_alter_partition(self._pending, request, elr_enabled=self._elr),
            self._log,
        )
        for topic in result.response.topics:
            for p in topic.partitions:
                if p.error_code is ErrorCode.NONE:
                    self._log.debug(
                        "partition_isr_changed",
                        topic_id=topic.topic_id,
                        partition=p.partition,
                        isr=list(p.isr),
                        partition_epoch=p.partition_epoch,
                    )
                else:
                    self._log.info(
                        "alter_partition_rejected",
                        broker_id=request.broker_id,
                        topic_id=topic.topic_id,
                        partition=p.partition,
                        error=p.error_code.name,
                        reason=p.error_message,
                    )
        return self._append(result, now_ms)

    def handle_elect_leaders_request(
        self, request: ElectLeadersRequest, now_ms: int
    ) -> ControllerResult[ElectLeadersResponse]:
        if not self._active:
            return _rejected(ElectLeadersResponse(error_code=_NOT_CONTROLLER))
        result = handle_elect_leaders(self._pending, request, elr_enabled=self._elr)
        if result.records:
            self._log.info(
                "leaders_elected",
                election_type=request.election_type.name,
                partitions=len(result.records),
            )
        return self._append(result, now_ms)

    def handle_alter_partition_reassignments_request(
        self, request: AlterPartitionReassignmentsRequest, now_ms: int
    ) -> ControllerResult[AlterPartitionReassignmentsResponse]:
        """KIP-455: start, replace or cancel reassignments (`kraft.controller.reassignment`)."""
        if not self._active:
            return _rejected(AlterPartitionReassignmentsResponse(error_code=_NOT_CONTROLLER))
        result = handle_alter_partition_reassignments(self._pending, request)
        for record in result.records:
            assert isinstance(record, PartitionChangeRecord)
            self._log.info(
                "partition_reassignment_changed",
                topic_id=record.topic_id,
                partition=record.partition,
                replicas=None if record.replicas is None else list(record.replicas),
                adding_replicas=record.adding_replicas,
                removing_replicas=record.removing_replicas,
                leader=record.leader,
            )
        return self._append(result, now_ms)

    def handle_list_partition_reassignments_request(
        self, request: ListPartitionReassignmentsRequest, now_ms: int
    ) -> ControllerResult[ListPartitionReassignmentsResponse]:
        """KIP-455: the reassignments in progress, from the committed image (no records)."""
        if not self._active:
            return _rejected(ListPartitionReassignmentsResponse(error_code=_NOT_CONTROLLER))
        return _rejected(handle_list_partition_reassignments(self._committed, request))

    def handle_allocate_producer_ids_request(
        self, request: AllocateProducerIdsRequest, now_ms: int
    ) -> ControllerResult[AllocateProducerIdsResponse]:
        if not self._active:
            return _rejected(AllocateProducerIdsResponse(error_code=_NOT_CONTROLLER))
        return self._append(handle_allocate_producer_ids(self._pending, request), now_ms)

    def handle_create_acls_request(
        self, request: CreateAclsRequest, now_ms: int
    ) -> ControllerResult[CreateAclsResponse]:
        if not self._active:
            return _rejected(CreateAclsResponse(error_code=_NOT_CONTROLLER))
        result = handle_create_acls(self._pending, request, self._rng)
        if result.records:
            self._log.info("acls_created", count=len(result.records))
        return self._append(result, now_ms)

    def handle_delete_acls_request(
        self, request: DeleteAclsRequest, now_ms: int
    ) -> ControllerResult[DeleteAclsResponse]:
        if not self._active:
            return _rejected(DeleteAclsResponse(error_code=_NOT_CONTROLLER))
        result = handle_delete_acls(self._pending, request)
        if result.records:
            self._log.info("acls_deleted", count=len(result.records))
        return self._append(result, now_ms)

    def handle_update_features_request(
        self, request: UpdateFeaturesRequest, now_ms: int
    ) -> ControllerResult[UpdateFeaturesResponse]:
        if not self._active:
            return _rejected(UpdateFeaturesResponse(error_code=_NOT_CONTROLLER))
        result = handle_update_features(self._pending, request)
        if result.records:
            self._log.info(
                "features_updated", **{u.feature: u.max_version_level for u in request.updates}
            )
        return self._append(result, now_ms)

    # -- time ----------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> tuple[MetadataRecord, ...]:
        """Periodic work, as one atomic batch (possibly empty; no response attached): fencing
        expired brokers, controlled shutdowns, offline elections, leader balance, completed
        reassignments and the features to finalize (`kraft.controller.periodic`)."""
        if not self._active:
            return ()
        self._tick_wanted_at_ms = None
        scan, self._reassignment_scan_wanted = self._reassignment_scan_wanted, False
        work = periodic_work(
            self._pending,
            self._heartbeats,
            self._balancer,
            now_ms=now_ms,
            base_offset=self._next_offset,
            epoch=self._epoch,
            elr_enabled=self._elr,
            scan_reassignments=scan,
            features={TRANSACTION_VERSION: self.config.transaction_version},
            log=self._log,
        )
        # NB: no tick wanted for the tick's own records: it elected on the image they make,
        # unless it left work for the next batch.
        result = ControllerResult(records=work.records, response=None)
        records_out = self._append(result, None, after=work.after).records
        if work.more:
            self._tick_wanted_at_ms = now_ms
        return records_out

    def next_deadline_ms(self) -> int | None:
        """When `tick` next has work (absolute, in the ``now_ms`` clock of the inputs; at or
        before now: at once): the earliest session expiry of an unfenced broker, the next
        leader-balance check, or the time of an input that changed the pending image since the
        last tick. None when standby."""
        if not self._active:
            return None
        deadlines = [
            d
            for b in self._pending.unfenced_broker_ids()
            if (d := self._heartbeats.session_deadline_ms(b)) is not None
        ]
        if (balance_due := self._balancer.next_deadline_ms()) is not None:
            deadlines.append(balance_due)
        if self._tick_wanted_at_ms is not None:
            deadlines.append(self._tick_wanted_at_ms)
        return min(deadlines, default=None)

    # -- internals -----------------------------------------------------------------------------

    def _append(
        self,
        result: ControllerResult[R],
        now_ms: int | None,
        *,
        after: MetadataImage | None = None,
    ) -> ControllerResult[R]:
        """Fold the result's records into the pending image at the next offsets (``after``: the
        image they make, if the caller already built it); a change made at ``now_ms`` (None:
        by `tick`) asks for a tick (see `next_deadline_ms`)."""
        records = result.records
        if records:
            assert self._active
            if now_ms is not None and self._tick_wanted_at_ms is None:
                self._tick_wanted_at_ms = now_ms
            if after is None:
                after = self._pending.apply_batch(records, self._next_offset, self._epoch)
            assert after.last_offset == self._next_offset + len(records) - 1
            self._pending = after
            self._inflight.extend(enumerate(records, start=self._next_offset))
            self._inflight_batches.append((self._next_offset, len(records), after))
            self._next_offset += len(records)
        return result


def _rejected(response: R) -> ControllerResult[R]:
    return ControllerResult(records=(), response=response)


__all__ = ["ControllerConfig", "ControllerCore"]
