"""`ControllerHarness`: an active `ControllerCore` whose records commit on demand.

Records travel through the real codec (encode -> bytes -> decode) before they are replayed,
as they would through the Raft log.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TypeVar

from kraft.controller import (
    AlterPartitionData,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopic,
    BrokerEpochState,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    ControllerConfig,
    ControllerCore,
    ControllerResult,
    RegisterBrokerRequest,
)
from kraft.metadata import (
    FeatureLevelRecord,
    MetadataImage,
    MetadataRecord,
    decode_record,
    encode_record,
)
from kraft.metadata.features import TRANSACTION_VERSION
from kraft.metadata.image import PartitionRegistration
from kraft.types import TopicPartition

R = TypeVar("R")
Req = TypeVar("Req")


class ControllerHarness:
    def __init__(
        self,
        image: MetadataImage | None = None,
        *,
        now_ms: int = 0,
        seed: int = 0,
        session_timeout_ms: int = 3000,
        epoch: int = 1,
        config: ControllerConfig | None = None,
        finalized: bool = True,
    ) -> None:
        image = image or MetadataImage.empty()
        if finalized and not image.features:
            # As a cluster's first active controller left it (`kraft.metadata.features`), so
            # a test's first tick has only the work the test made.
            level = (config or ControllerConfig()).transaction_version
            feature = FeatureLevelRecord(name=TRANSACTION_VERSION, feature_level=level)
            image = image.apply(feature, image.last_offset + 1)
        self.now_ms = now_ms
        self.core = ControllerCore(
            rng=random.Random(seed),
            config=config or ControllerConfig(broker_session_timeout_ms=session_timeout_ms),
            image=image,
        )
        self.core.become_active(epoch=epoch, next_offset=image.last_offset + 1, now_ms=now_ms)
        self.epoch = epoch
        # Produced, not yet committed: (base_offset, records).
        self.uncommitted: list[tuple[int, tuple[MetadataRecord, ...]]] = []

    @property
    def image(self) -> MetadataImage:
        return self.core.committed_image

    def propose(
        self, handler: Callable[[Req, int], ControllerResult[R]], request: Req
    ) -> ControllerResult[R]:
        """Run a handler; its records stay uncommitted until `commit`."""
        base = self.core.next_offset
        result = handler(request, self.now_ms)
        if result.records:
            self.uncommitted.append((base, result.records))
        return result

    def commit(self) -> None:
        """Commit what was proposed, as the server does: the active core takes its own batch's
        pending image (`ControllerCore.replay_own_batch`); checked here against a replay of the
        records through the codec, as a standby applies them."""
        for base, records in self.uncommitted:
            decoded = [decode_record(encode_record(r)) for r in records]
            before = self.core.committed_image
            if self.core.replay_own_batch(base, len(records), self.epoch):
                replayed = before.apply_batch(decoded, base, self.epoch)
                assert self.core.committed_image == replayed
                assert self.core.committed_image.partition_index == replayed.partition_index
            else:
                self.core.replay_batch(decoded, base, self.epoch)
        self.uncommitted.clear()

    def run(self, handler: Callable[[Req, int], ControllerResult[R]], request: Req) -> R:
        """Run a handler, commit its batch, return the response."""
        result = self.propose(handler, request)
        self.commit()
        return result.response

    def tick(self, now_ms: int) -> tuple[MetadataRecord, ...]:
        self.now_ms = now_ms
        base = self.core.next_offset
        records = self.core.tick(now_ms)
        if records:
            self.uncommitted.append((base, records))
        self.commit()
        return records

    def register(
        self, broker_id: int, *, incarnation: str | None = None, rack: str | None = None
    ) -> int:
        response = self.run(
            self.core.handle_register_broker_request,
            RegisterBrokerRequest(
                broker_id=broker_id, incarnation_id=incarnation or f"inc-{broker_id}", rack=rack
            ),
        )
        return response.broker_epoch

    def heartbeat(
        self,
        broker_id: int,
        *,
        metadata_offset: int | None = None,
        want_fence: bool = False,
        want_shutdown: bool = False,
        broker_epoch: int | None = None,
    ) -> BrokerHeartbeatResponse:
        registration = self.core.pending_image.broker(broker_id)
        epoch = (
            broker_epoch
            if broker_epoch is not None
            else (registration.broker_epoch if registration else 0)
        )
        return self.run(
            self.core.handle_broker_heartbeat_request,
            BrokerHeartbeatRequest(
                broker_id=broker_id,
                broker_epoch=epoch,
                current_metadata_offset=(
                    self.image.last_offset if metadata_offset is None else metadata_offset
                ),
                want_fence=want_fence,
                want_shutdown=want_shutdown,
            ),
        )

    def start_brokers(self, *broker_ids: int, racks: dict[int, str] | None = None) -> None:
        """Register and unfence brokers."""
        for b in broker_ids:
            self.register(b, rack=(racks or {}).get(b))
        for b in broker_ids:
            assert not self.heartbeat(b).is_fenced

    def partition(self, topic: str, index: int = 0) -> PartitionRegistration:
        """A partition as of the pending image."""
        p = self.core.pending_image.partition_by_name(TopicPartition(topic, index))
        assert p is not None
        return p

    def alter_isr(self, topic: str, index: int, isr: tuple[int, ...]) -> AlterPartitionResponse:
        """The current leader asks for ``isr`` with up-to-date epochs; committed at once."""
        return self.run(
            self.core.handle_alter_partition_request, self.alter_isr_request(topic, index, isr)
        )

    def alter_isr_request(
        self, topic: str, index: int, isr: tuple[int, ...]
    ) -> AlterPartitionRequest:
        """What the current leader would send to ask for ``isr`` (epochs from the pending image)."""
        image = self.core.pending_image
        p = self.partition(topic, index)
        topic_image = image.topic(topic)
        assert topic_image is not None
        return AlterPartitionRequest(
            broker_id=p.leader,
            broker_epoch=image.brokers[p.leader].broker_epoch,
            topics=(
                AlterPartitionTopic(
                    topic_id=topic_image.topic_id,
                    partitions=(
                        AlterPartitionData(
                            partition=index,
                            leader_epoch=p.leader_epoch,
                            partition_epoch=p.partition_epoch,
                            new_isr_with_epochs=tuple(
                                BrokerEpochState(
                                    broker_id=b, broker_epoch=image.brokers[b].broker_epoch
                                )
                                for b in isr
                            ),
                        ),
                    ),
                ),
            ),
        )
