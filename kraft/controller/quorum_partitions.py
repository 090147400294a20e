"""Quorum-mode partitions (``replication.mode=quorum``, issue #12): what the controller does, and
what it leaves to the partitions' Raft groups.

Each partition of a quorum topic is a Raft group of its replicas (the voters), run by the
brokers (`replication.driver`). The group, not the controller, elects the partition's leader:
Raft's vote (KIP-595 with pre-vote and check-quorum) picks a replica with every committed
record, so there is no clean or unclean choice for the controller to make. The rules:

- **Placement and fencing stay the controller's.** It places replicas (as for ISR topics),
  registers, fences and unfences brokers, and tracks offline replicas.
- **No controller election, ever.** Fencing a broker, a controlled shutdown, unfencing,
  preferred and unclean ElectLeaders and ``unclean.leader.election.enable`` change nothing of
  a quorum partition's leader (`PartitionChangeBuilder` with ``leader_by_vote``;
  `elect_offline_leaders` and `remove_broker_from_partitions` skip quorum partitions;
  ElectLeaders answers ELECTION_NOT_NEEDED). One exception: a replica whose broker reports its
  log offline (a disk error) cannot lead, so if it is the recorded leader the record is
  cleared to `NO_LEADER`, in the same leader epoch, until the group reports its next leader.
- **The leader reports itself.** A replica that wins the Raft election for epoch ``e`` sends
  an AlterPartition whose partition entry has ``elected_by_vote`` and ``leader_epoch=e``
  (`handle_quorum_leader_report`). The controller checks that the sender is a replica, is
  active (registered, unfenced, not shutting down) and its log is not offline, and that ``e``
  is above the recorded leader epoch (or equal to it, from the leader already recorded or
  when the record was cleared in ``e``: a retried report); it then writes a
  `PartitionChangeRecord` with ``leader=sender, leader_epoch=e``. So Metadata and
  ``kraft topics describe`` show the Raft leader and the Raft epoch, which is also the leader
  epoch written into the partition's batches.
- **No ISR.** A quorum partition commits on a majority of its replicas; its ``isr`` field holds
  every replica (the voters) from creation on and never changes. An AlterPartition that asks
  for an ISR change is INVALID_REQUEST.
- A new quorum partition starts with no leader (`NO_LEADER`, epoch 0): clients see
  LEADER_NOT_AVAILABLE until its group has elected one (Raft's first epoch is 1).
"""

from __future__ import annotations

from kraft.controller.messages import AlterPartitionData, AlterPartitionPartitionResult
from kraft.metadata.configs import QUORUM_MODE, REPLICATION_MODE
from kraft.metadata.image import MetadataImage, PartitionRegistration
from kraft.metadata.records import NO_LEADER, PartitionChangeRecord
from kraft.types import NodeId
from storage.errors import ErrorCode


def is_quorum_topic(image: MetadataImage, topic_name: str) -> bool:
    """Whether ``topic_name``'s partitions are Raft groups (``replication.mode=quorum``)."""
    return image.topic_config(topic_name, REPLICATION_MODE) == QUORUM_MODE


def report_rejection(
    image: MetadataImage, sender_id: int, partition: PartitionRegistration, leader_epoch: int
) -> tuple[ErrorCode, str] | None:
    """Why the controller refuses ``sender_id``'s report that it leads ``partition`` in
    ``leader_epoch``, or None (see the module docstring)."""
    if sender_id not in partition.replicas:
        return ErrorCode.INELIGIBLE_REPLICA, f"broker {sender_id} is not a replica"
    registration = image.broker(sender_id)
    if registration is None or not registration.is_active:
        state = "unregistered" if registration is None else registration.state.value
        return ErrorCode.INELIGIBLE_REPLICA, f"broker {sender_id} is {state}"
    if sender_id in partition.offline_replicas:
        return ErrorCode.INELIGIBLE_REPLICA, f"the log of replica {sender_id} is offline"
    recorded = partition.leader_epoch
    if leader_epoch < recorded or (
        leader_epoch == recorded and partition.leader not in (NO_LEADER, sender_id)
    ):
        return ErrorCode.FENCED_LEADER_EPOCH, (
            f"leader epoch {leader_epoch} is not above the recorded {recorded} "
            f"(leader {partition.leader})"
        )
    return None


def handle_quorum_leader_report(
    image: MetadataImage, sender_id: int, topic_id: str, data: AlterPartitionData, name: str
) -> tuple[AlterPartitionPartitionResult, PartitionChangeRecord | None]:
    """The answer to a quorum leader report (``data.elected_by_vote``) and its record (None:
    refused, or the leader and epoch are recorded already). ``name``: the partition, for
    messages."""
    topic = image.topic_by_id(topic_id)
    assert topic is not None
    partition = topic.partitions[data.partition]
    rejection = report_rejection(image, sender_id, partition, data.leader_epoch)
    if rejection is not None:
        code, message = rejection
        return (
            AlterPartitionPartitionResult(
                partition=data.partition, error_code=code, error_message=f"{name}: {message}"
            ),
            None,
        )
    record = None
    if (partition.leader, partition.leader_epoch) != (sender_id, data.leader_epoch):
        record = PartitionChangeRecord(
            topic_id=topic_id,
            partition=data.partition,
            leader=sender_id,
            leader_epoch=data.leader_epoch,
        )
    return (
        AlterPartitionPartitionResult(
            partition=data.partition,
            leader_id=NodeId(sender_id),
            leader_epoch=data.leader_epoch,
            isr=partition.isr,
            leader_recovery_state=partition.leader_recovery_state,
            partition_epoch=partition.partition_epoch + (0 if record is None else 1),
        ),
        record,
    )


__all__ = [
    "handle_quorum_leader_report",
    "is_quorum_topic",
    "report_rejection",
]
