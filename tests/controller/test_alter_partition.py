"""AlterPartition: each rejection in Kafka's order, and the successful ISR change.

Setup: brokers 1-3 active, 4 fenced, 5 in controlled shutdown; partition t-0 has replicas
[1,2,3,4,5], ISR [1,2], leader 1, leader epoch 3, partition epoch 7.
"""

from __future__ import annotations

import random

import pytest

from kraft.controller import (
    AlterPartitionData,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopic,
    BrokerEpochState,
    ControllerCore,
)
from kraft.controller.partition_control import handle_alter_partition
from kraft.metadata import LeaderRecoveryState, MetadataImage, PartitionChangeRecord
from storage.errors import ErrorCode
from tests.metadata.builders import ImageBuilder, topic_id_for

TID = topic_id_for("t")


def image() -> MetadataImage:
    return (
        ImageBuilder()
        .with_brokers(1, 2, 3, 4, 5, fenced=[4], shutting_down=[5])
        .with_topic("t", assignments=[(1, 2, 3, 4, 5)])
        .with_partition("t", 0, isr=[1, 2], leader=1, leader_epoch=3, partition_epoch=7)
        .build()
    )


def epoch_of(img: MetadataImage, broker_id: int) -> int:
    registration = img.broker(broker_id)
    return registration.broker_epoch if registration else 12345


def request(
    img: MetadataImage,
    *,
    sender: int = 1,
    sender_epoch: int | None = None,
    topic_id: str = TID,
    partition: int = 0,
    leader_epoch: int = 3,
    partition_epoch: int = 7,
    isr: tuple[int, ...] = (1, 2, 3),
    member_epochs: dict[int, int] | None = None,
    recovery: LeaderRecoveryState = LeaderRecoveryState.RECOVERED,
) -> AlterPartitionRequest:
    epochs = member_epochs or {}
    return AlterPartitionRequest(
        broker_id=sender,
        broker_epoch=epoch_of(img, sender) if sender_epoch is None else sender_epoch,
        topics=(
            AlterPartitionTopic(
                topic_id=topic_id,
                partitions=(
                    AlterPartitionData(
                        partition=partition,
                        leader_epoch=leader_epoch,
                        partition_epoch=partition_epoch,
                        new_isr_with_epochs=tuple(
                            BrokerEpochState(
                                broker_id=b, broker_epoch=epochs.get(b, epoch_of(img, b))
                            )
                            for b in isr
                        ),
                        leader_recovery_state=recovery,
                    ),
                ),
            ),
        ),
    )


def partition_error(response: AlterPartitionResponse) -> ErrorCode:
    assert response.error_code is ErrorCode.NONE, response
    return response.topics[0].partitions[0].error_code


def test_alter_partition_on_a_standby_controller_is_not_controller() -> None:
    img = image()
    core = ControllerCore(rng=random.Random(0), image=img)
    result = core.handle_alter_partition_request(request(img), now_ms=0)
    assert result.response.error_code is ErrorCode.NOT_CONTROLLER and not result.records


def test_alter_partition_rejects_stale_sender_broker_epoch_for_the_whole_request() -> None:
    img = image()
    result = handle_alter_partition(img, request(img, sender_epoch=epoch_of(img, 1) - 1))
    assert result.response.error_code is ErrorCode.STALE_BROKER_EPOCH and not result.records


def test_alter_partition_rejects_unknown_topic_id() -> None:
    img = image()
    result = handle_alter_partition(img, request(img, topic_id="nope"))
    assert partition_error(result.response) is ErrorCode.UNKNOWN_TOPIC_ID


def test_alter_partition_rejects_unknown_partition() -> None:
    img = image()
    result = handle_alter_partition(img, request(img, partition=9))
    assert partition_error(result.response) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_alter_partition_rejects_stale_leader_epoch() -> None:
    img = image()
    result = handle_alter_partition(img, request(img, leader_epoch=2))
    assert partition_error(result.response) is ErrorCode.FENCED_LEADER_EPOCH


def test_alter_partition_from_a_future_leader_epoch_means_we_are_not_the_controller() -> None:
    img = image()
    result = handle_alter_partition(img, request(img, leader_epoch=4))
    assert partition_error(result.response) is ErrorCode.NOT_CONTROLLER


def test_alter_partition_rejects_a_sender_that_is_not_the_leader() -> None:
    img = image()
    result = handle_alter_partition(img, request(img, sender=2, isr=(1, 2, 3)))
    assert partition_error(result.response) is ErrorCode.INVALID_REQUEST


def test_alter_partition_rejects_stale_partition_epoch() -> None:
    img = image()
    result = handle_alter_partition(img, request(img, partition_epoch=6))
    assert partition_error(result.response) is ErrorCode.INVALID_UPDATE_VERSION


@pytest.mark.parametrize("isr", [(1, 2, 9), (1, 1, 2), (2, 3)])
def test_alter_partition_rejects_isr_outside_replicas_or_without_leader(
    isr: tuple[int, ...],
) -> None:
    img = image()
    result = handle_alter_partition(img, request(img, isr=isr))
    assert partition_error(result.response) is ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize(
    ("isr", "member_epochs"),
    [
        ((1, 2, 4), {}),  # 4 is fenced
        ((1, 2, 5), {}),  # 5 is in controlled shutdown
        ((1, 2, 3), {3: 0}),  # 3's broker epoch is stale (KIP-841)
    ],
)
def test_alter_partition_rejects_ineligible_replica_in_isr_expansion(
    isr: tuple[int, ...], member_epochs: dict[int, int]
) -> None:
    """Reference: KIP-841 — an ISR may only hold unfenced, non-shutting-down brokers whose
    epoch matches the one the leader saw."""
    img = image()
    result = handle_alter_partition(img, request(img, isr=isr, member_epochs=member_epochs))
    assert partition_error(result.response) is ErrorCode.INELIGIBLE_REPLICA


def test_alter_partition_with_unknown_member_epoch_skips_the_epoch_check() -> None:
    img = image()
    result = handle_alter_partition(img, request(img, member_epochs={3: -1}))
    assert partition_error(result.response) is ErrorCode.NONE


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        # Each case breaks its own check *and every later one*: the earliest check must win.
        (
            dict(partition=9, leader_epoch=0, sender=2, partition_epoch=0, isr=(9,)),
            "UNKNOWN_TOPIC_OR_PARTITION",
        ),
        (dict(leader_epoch=0, sender=2, partition_epoch=0, isr=(9,)), "FENCED_LEADER_EPOCH"),
        (dict(sender=2, partition_epoch=0, isr=(9,)), "INVALID_REQUEST"),
        (dict(partition_epoch=0, isr=(1, 4)), "INVALID_UPDATE_VERSION"),
        (dict(isr=(2, 4)), "INVALID_REQUEST"),
        (dict(isr=(1, 4)), "INELIGIBLE_REPLICA"),
    ],
)
def test_alter_partition_checks_run_in_kafkas_order(
    overrides: dict[str, object], expected: str
) -> None:
    img = image()
    result = handle_alter_partition(img, request(img, **overrides))  # type: ignore[arg-type]
    assert partition_error(result.response) is ErrorCode[expected]


def test_successful_alter_partition_bumps_partition_epoch_and_returns_new_state() -> None:
    img = image()
    result = handle_alter_partition(img, request(img, isr=(1, 2, 3)))
    assert result.records == (PartitionChangeRecord(topic_id=TID, partition=0, isr=(1, 2, 3)),)
    p = result.response.topics[0].partitions[0]
    assert (p.error_code, p.leader_id, p.leader_epoch, p.isr, p.partition_epoch) == (
        ErrorCode.NONE,
        1,
        3,
        (1, 2, 3),
        8,
    )
    after = img.apply_batch(result.records, img.last_offset + 1)
    assert after.partition(TID, 0).partition_epoch == 8  # type: ignore[union-attr]


def test_alter_partition_shrink_to_the_leader_alone_is_allowed() -> None:
    img = image()
    result = handle_alter_partition(img, request(img, isr=(1,)))
    assert partition_error(result.response) is ErrorCode.NONE
    assert result.response.topics[0].partitions[0].isr == (1,)


def test_alter_partition_with_unchanged_isr_writes_no_record() -> None:
    img = image()
    result = handle_alter_partition(img, request(img, isr=(1, 2)))
    assert partition_error(result.response) is ErrorCode.NONE and result.records == ()
    assert result.response.topics[0].partitions[0].partition_epoch == 7


def test_alter_partition_rejects_recovered_to_recovering() -> None:
    """Reference: KIP-704 — a partition cannot go back from RECOVERED to RECOVERING."""
    img = image()
    response = handle_alter_partition(
        img, request(img, isr=(1,), recovery=LeaderRecoveryState.RECOVERING)
    ).response
    assert partition_error(response) is ErrorCode.INVALID_REQUEST


def test_recovering_leader_can_mark_itself_recovered_and_then_expand() -> None:
    img = (
        ImageBuilder()
        .with_brokers(1, 2, 3)
        .with_topic("t", assignments=[(1, 2, 3)])
        .with_partition("t", 0, isr=[1])
        .build()
    )
    img = img.apply(
        PartitionChangeRecord(
            topic_id=TID, partition=0, leader_recovery_state=LeaderRecoveryState.RECOVERING
        ),
        img.last_offset + 1,
    )
    expand_while_recovering = handle_alter_partition(
        img,
        request(
            img,
            isr=(1, 2),
            leader_epoch=0,
            partition_epoch=1,
            recovery=LeaderRecoveryState.RECOVERING,
        ),
    )
    assert partition_error(expand_while_recovering.response) is ErrorCode.INVALID_REQUEST
    recovered = handle_alter_partition(
        img, request(img, isr=(1, 2), leader_epoch=0, partition_epoch=1)
    )
    assert partition_error(recovered.response) is ErrorCode.NONE
    result = recovered.response.topics[0].partitions[0]
    assert result.leader_recovery_state is LeaderRecoveryState.RECOVERED and result.isr == (1, 2)


def test_duplicate_partition_in_one_request_is_invalid_request() -> None:
    img = image()
    single = request(img)
    doubled = AlterPartitionRequest(
        broker_id=single.broker_id,
        broker_epoch=single.broker_epoch,
        topics=(single.topics[0], single.topics[0]),
    )
    response = handle_alter_partition(img, doubled).response
    assert response.topics[0].partitions[0].error_code is ErrorCode.NONE
    assert response.topics[1].partitions[0].error_code is ErrorCode.INVALID_REQUEST
