"""Random operation sequences against ControllerCore, checking the KIP-841 invariants.

After every step, in both the committed and the pending image:

- a partition with a leader has the leader in its ISR, and every ISR member is an active
  broker (unfenced, not shutting down): fencing and shutdowns clean ISRs atomically (KIP-841);
- a partition without a leader keeps exactly one ISR member (the last one);
- leader epochs and partition epochs never go backwards;
- a standby that replays the committed log (through the codec) has the same image, and the
  image survives a snapshot round-trip;
- the partition index the deltas keep (`kraft.metadata.partition_index`) equals one built
  from scratch.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TypeVar

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kraft.controller import (
    AlterableConfig,
    AlterConfigsResource,
    BrokerHeartbeatRequest,
    ControllerCore,
    ControllerResult,
    CreatableTopic,
    CreateTopicsRequest,
    ElectionType,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    RegisterBrokerRequest,
    UnregisterBrokerRequest,
)
from kraft.metadata import (
    NO_LEADER,
    ConfigResourceType,
    MetadataImage,
    decode_record,
    encode_record,
)
from kraft.metadata.partition_index import PartitionIndex
from storage.errors import ErrorCode
from tests.controller.harness import ControllerHarness

BROKERS = st.integers(1, 4)
R = TypeVar("R")
Req = TypeVar("Req")


class ControllerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = ControllerHarness(session_timeout_ms=1000)
        self.standby = ControllerCore(rng=random.Random(1))
        self.epochs: dict[tuple[str, int], tuple[int, int]] = {}
        self.topic_counter = 0
        self.incarnation = 0
        self.holding = False

    # -- helpers -------------------------------------------------------------------------------

    def _propose(
        self, handler: Callable[[Req, int], ControllerResult[R]], request: Req
    ) -> ControllerResult[R]:
        """Propose; commit at once unless holding (records then stay in flight)."""
        result = self.h.propose(handler, request)
        if not self.holding:
            self._ship_and_commit()
        return result

    def _ship_and_commit(self) -> None:
        for base, records in self.h.uncommitted:
            for i, record in enumerate(records):
                self.standby.replay(decode_record(encode_record(record)), base + i, self.h.epoch)
        self.h.commit()

    # -- rules ---------------------------------------------------------------------------------

    @rule(broker=BROKERS, new_incarnation=st.booleans())
    def register(self, broker: int, new_incarnation: bool) -> None:
        if new_incarnation:
            self.incarnation += 1
        self._propose(
            self.h.core.handle_register_broker_request,
            RegisterBrokerRequest(broker_id=broker, incarnation_id=f"{broker}-{self.incarnation}"),
        )

    @rule(
        broker=BROKERS,
        lag=st.sampled_from([0, 0, 0, 5]),
        fence=st.sampled_from([False] * 4 + [True]),
        shutdown=st.sampled_from([False] * 6 + [True]),
    )
    def heartbeat(self, broker: int, lag: int, fence: bool, shutdown: bool) -> None:
        registration = self.h.core.pending_image.broker(broker)
        if registration is None:
            return
        self._propose(
            self.h.core.handle_broker_heartbeat_request,
            BrokerHeartbeatRequest(
                broker_id=broker,
                broker_epoch=registration.broker_epoch,
                current_metadata_offset=self.h.core.committed_image.last_offset - lag,
                want_fence=fence,
                want_shutdown=shutdown,
            ),
        )

    @rule(elapsed=st.sampled_from([100, 300, 300, 1200]))
    def tick(self, elapsed: int) -> None:
        self.h.now_ms += elapsed
        base = self.h.core.next_offset
        records = self.h.core.tick(self.h.now_ms)
        if records:
            self.h.uncommitted.append((base, records))
            if not self.holding:
                self._ship_and_commit()

    @rule(partitions=st.integers(1, 3), rf=st.integers(1, 3), unclean=st.booleans())
    def create_topic(self, partitions: int, rf: int, unclean: bool) -> None:
        self.topic_counter += 1
        configs = {"unclean.leader.election.enable": "true"} if unclean else {}
        self._propose(
            self.h.core.handle_create_topics_request,
            CreateTopicsRequest(
                topics=(
                    CreatableTopic(
                        name=f"t{self.topic_counter}",
                        num_partitions=partitions,
                        replication_factor=rf,
                        configs=configs,
                    ),
                )
            ),
        )

    @rule(data=st.data())
    def alter_isr(self, data: st.DataObject) -> None:
        image = self.h.core.pending_image
        candidates = [(t, i, p) for t, i, p in image.iter_partitions() if p.leader != NO_LEADER]
        if not candidates:
            return
        topic, index, p = data.draw(st.sampled_from(candidates))
        others = data.draw(st.lists(st.sampled_from(p.replicas), unique=True, max_size=3))
        isr = (p.leader, *[r for r in others if r != p.leader and image.broker(r) is not None])
        request = self.h.alter_isr_request(topic.name, index, isr)
        first = self._propose(self.h.core.handle_alter_partition_request, request)
        event(f"alter_isr: {first.response.topics[0].partitions[0].error_code.name}")
        # A retry of a request that changed something is stale now: refused, never applied.
        retry = self._propose(self.h.core.handle_alter_partition_request, request)
        if first.records:
            code = retry.response.topics[0].partitions[0].error_code
            assert code is ErrorCode.INVALID_UPDATE_VERSION and retry.records == ()

    @rule(unclean=st.booleans())
    def elect(self, unclean: bool) -> None:
        election = ElectionType.UNCLEAN if unclean else ElectionType.PREFERRED
        self._propose(
            self.h.core.handle_elect_leaders_request, ElectLeadersRequest(election_type=election)
        )

    @rule(broker=BROKERS)
    def unregister(self, broker: int) -> None:
        self._propose(
            self.h.core.handle_unregister_broker_request, UnregisterBrokerRequest(broker_id=broker)
        )

    @precondition(lambda self: self.topic_counter > 0)
    @rule(data=st.data())
    def toggle_unclean(self, data: st.DataObject) -> None:
        name = f"t{data.draw(st.integers(1, self.topic_counter))}"
        value = data.draw(st.sampled_from(["true", "false"]))
        self._propose(
            self.h.core.handle_incremental_alter_configs_request,
            IncrementalAlterConfigsRequest(
                resources=(
                    AlterConfigsResource(
                        resource_type=ConfigResourceType.TOPIC,
                        resource_name=name,
                        configs=(
                            AlterableConfig(name="unclean.leader.election.enable", value=value),
                        ),
                    ),
                )
            ),
        )

    @initialize(brokers=st.integers(1, 4), topics=st.integers(0, 2))
    def start_cluster(self, brokers: int, topics: int) -> None:
        for broker in range(1, brokers + 1):
            self.register(broker, new_incarnation=False)
            self.heartbeat(broker, lag=0, fence=False, shutdown=False)
        for _ in range(topics):
            self.create_topic(partitions=3, rf=min(brokers, 2), unclean=False)

    @rule()
    def heartbeat_all(self) -> None:
        for broker in sorted(self.h.core.pending_image.brokers):
            self.heartbeat(broker, lag=0, fence=False, shutdown=False)

    @rule()
    def hold(self) -> None:
        """Leave the next records in flight (uncommitted) until `commit` or a leader change."""
        self.holding = True

    @rule()
    def commit(self) -> None:
        self.holding = False
        self._ship_and_commit()

    @rule(commit_first=st.booleans())
    def leader_change(self, commit_first: bool) -> None:
        if commit_first:
            self._ship_and_commit()
        self.h.uncommitted.clear()
        self.holding = False
        self.h.core.resign()
        self.h.epoch += 1
        # The new Raft leader's epoch-start entry takes an offset the core never sees.
        next_offset = self.h.core.committed_image.last_offset + 2
        self.h.core.become_active(epoch=self.h.epoch, next_offset=next_offset, now_ms=self.h.now_ms)

    def teardown(self) -> None:
        image = self.h.core.committed_image
        event(f"partitions at the end: {min(3, sum(1 for _ in image.iter_partitions()))}+")
        event(f"offline partitions at the end: {bool(image.offline_partitions())}")
        event(f"active brokers at the end: {len(image.active_broker_ids())}")

    # -- invariants ----------------------------------------------------------------------------

    def _check_image(self, image: MetadataImage) -> None:
        for topic, index, p in image.iter_partitions():
            where = f"{topic.name}-{index}: {p}"
            assert not set(p.elr) & set(p.isr), where
            if p.leader == NO_LEADER:
                # KIP-841 keeps the last ISR member; ELR (KIP-966) moves it to the ELR.
                assert len(p.isr) <= 1, where
            else:
                assert p.leader in p.isr, where
                assert all(image.is_active_broker(b) for b in p.isr), where

    @invariant()
    def isr_holds_only_active_brokers(self) -> None:
        self._check_image(self.h.core.committed_image)
        self._check_image(self.h.core.pending_image)

    @invariant()
    def the_partition_index_kept_by_the_deltas_equals_a_fresh_build(self) -> None:
        for image in (self.h.core.committed_image, self.h.core.pending_image):
            assert image.partition_index == PartitionIndex.of(image.topics_by_id)

    @invariant()
    def epochs_never_go_backwards(self) -> None:
        for topic, index, p in self.h.core.committed_image.iter_partitions():
            key = (topic.topic_id, index)
            before = self.epochs.get(key, (0, 0))
            assert (p.leader_epoch, p.partition_epoch) >= before and p.partition_epoch >= before[1]
            self.epochs[key] = (p.leader_epoch, p.partition_epoch)

    @invariant()
    def standby_and_snapshot_agree_with_the_active_committed_image(self) -> None:
        committed = self.h.core.committed_image
        assert self.standby.committed_image.topics_by_id == committed.topics_by_id
        assert self.standby.committed_image.brokers == committed.brokers
        assert MetadataImage.from_snapshot(committed.to_snapshot()) == committed


ControllerMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=50, deadline=None
)
test_controller_invariants_hold_under_random_operations = ControllerMachine.TestCase
