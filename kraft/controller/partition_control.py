"""Partition decisions: ISR changes (AlterPartition), elections, and the KIP-841 fencing rule.

Pure functions of a `MetadataImage` (the controller's *pending* image) that return records;
`ControllerCore` calls them and appends the records to its pending image.

KIP-841 in one paragraph: an ISR may hold only *active* brokers (unfenced, not in controlled
shutdown, with the broker epoch the leader thinks they have). So when a broker is fenced, starts
a controlled shutdown, re-registers or unregisters, the controller removes it from every ISR and
moves its leaderships **in the same atomic batch** as the broker record; and an AlterPartition
that would add an ineligible broker is refused with INELIGIBLE_REPLICA. The one exception: the
ISR never becomes empty. The last ISR member stays (with the leader set to `NO_LEADER`) so that
when it comes back it can lead again without an unclean election.

With eligible leader replicas (KIP-966, ``elr_enabled``; `kraft.controller.eligible_leaders`)
that exception goes: the last member leaves the ISR for the ELR, which also keeps every replica
that left the ISR while it was below ``min.insync.replicas``, and an ELR member leads when the
ISR is empty. Each function here takes ``elr_enabled`` (the controller's
``eligible.leader.replicas.enable``) and hands the builder an `ElrPolicy` when it is on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

from kraft.controller.eligible_leaders import elr_policy
from kraft.controller.limits import reject_elect_leaders
from kraft.controller.messages import (
    AlterPartitionData,
    AlterPartitionPartitionResult,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopicResult,
    ElectionType,
    ElectLeadersRequest,
    ElectLeadersResponse,
    PartitionElectionResult,
    ReplicaElectionResult,
)
from kraft.controller.partition_change import Election, PartitionChangeBuilder
from kraft.controller.quorum_partitions import handle_quorum_leader_report, is_quorum_topic
from kraft.controller.result import ControllerResult
from kraft.metadata.configs import parse_bool, quoted
from kraft.metadata.delta import merge_partition_change
from kraft.metadata.image import MetadataImage, PartitionRegistration, TopicImage
from kraft.metadata.partition_index import sorted_keys
from kraft.metadata.records import (
    NO_LEADER,
    LeaderRecoveryState,
    MetadataRecord,
    PartitionChangeRecord,
)
from kraft.types import Epoch, NodeId, TopicPartition
from storage.errors import ErrorCode


def unclean_election_enabled(image: MetadataImage, topic_name: str) -> bool:
    return parse_bool(image.topic_config(topic_name, "unclean.leader.election.enable"))


def remove_broker_from_partitions(
    image: MetadataImage,
    broker_id: int,
    *,
    elr_enabled: bool = False,
    unclean_shutdown: bool = False,
    limit: int | None = None,
) -> list[PartitionChangeRecord]:
    """Drop ``broker_id`` from every ISR and move its leaderships (KIP-841).

    ``broker_id`` is treated as unable to lead whatever the image says, so this works both
    before and after the broker's own fence / shutdown record is applied. Quorum-mode
    partitions are left alone: they have no ISR, and their Raft group elects their leader.

    With ``elr_enabled`` a replica leaving an ISR below min ISR joins the ELR (KIP-966), unless
    ``unclean_shutdown``: its broker may have lost committed records, so it also leaves every
    ELR it is in.

    With ``limit``: at most that many records, the partitions ``broker_id`` leads first (they
    have no working leader until moved), so a fencing can be paced over several batches
    (`kraft.controller.cluster_control.fence_one_expired_broker`).
    """

    def acceptable(replica: int) -> bool:
        return replica != broker_id and image.is_active_broker(replica)

    purge_elr = elr_enabled and unclean_shutdown
    records: list[PartitionChangeRecord] = []
    for topic, index, partition in _memberships(image, broker_id, purge_elr=purge_elr):
        if limit is not None and len(records) >= limit:
            break
        if is_quorum_topic(image, topic.name):
            continue
        # KIP-841: the last ISR member stays, so the partition can recover cleanly (the
        # builder keeps it unless ELR is on, which moves it to the ELR instead).
        target_isr = tuple(r for r in partition.isr if r != broker_id)
        policy = elr_policy(
            image,
            topic.name,
            partition,
            enabled=elr_enabled,
            unclean_shutdown=(broker_id,) if unclean_shutdown else (),
        )
        record = (
            PartitionChangeBuilder(
                partition,
                topic.topic_id,
                index,
                is_acceptable_leader=acceptable,
                unclean_allowed=unclean_election_enabled(image, topic.name),
                elr=policy,
            )
            .set_target_isr(target_isr)
            .build()
        )
        if record is not None:
            records.append(record)
    return records


def _memberships(
    image: MetadataImage, broker_id: int, *, purge_elr: bool
) -> Iterator[tuple[TopicImage, int, PartitionRegistration]]:
    """The partitions ``broker_id`` leads, then those whose ISR (or, with ``purge_elr``, ELR)
    it is in, each once, from the image's index (`kraft.metadata.partition_index`): a step of
    a paced fencing visits only the broker's own partitions, and only as many as it takes."""
    index = image.partition_index
    topics = image.topics_by_id
    led = index.led_by(broker_id)
    for topic_id, i in sorted_keys(led, topics):
        topic = topics[topic_id]
        yield topic, i, topic.partitions[i]
    rest = set(index.in_isr_of(broker_id))
    if purge_elr:
        rest |= index.in_elr_of(broker_id)
    rest -= led
    for topic_id, i in sorted_keys(rest, topics):
        topic = topics[topic_id]
        yield topic, i, topic.partitions[i]


def elect_offline_leaders(
    image: MetadataImage,
    *,
    is_acceptable: Callable[[int], bool] | None = None,
    elr_enabled: bool = False,
    limit: int | None = None,
) -> list[PartitionChangeRecord]:
    """Elect a leader for every leaderless partition that now has an eligible replica (from the
    ISR; with ELR on, then from the ELR, then its last known leader; outside them only where
    the topic enables unclean election); with ``limit``, for the first that many only (the
    caller elects the rest in a later batch). Quorum-mode partitions wait for their Raft
    group's report instead (`kraft.controller.quorum_partitions`)."""
    acceptable = is_acceptable or image.is_active_broker
    records: list[PartitionChangeRecord] = []
    topics = image.topics_by_id
    # NB: only the leaderless partitions, from the index: this runs on every tick and every
    # unfencing, and a walk over all partitions cost ~6 ms per call at 10,000 (py-spy: the
    # active controller's largest consumer in ``kraft bench metadata``).
    for topic_id, index in sorted_keys(image.partition_index.leaderless(), topics):
        if limit is not None and len(records) >= limit:
            break
        topic = topics[topic_id]
        partition = topic.partitions[index]
        if is_quorum_topic(image, topic.name):
            continue
        record = PartitionChangeBuilder(
            partition,
            topic.topic_id,
            index,
            is_acceptable_leader=acceptable,
            unclean_allowed=unclean_election_enabled(image, topic.name),
            elr=elr_policy(image, topic.name, partition, enabled=elr_enabled),
        ).build()
        if record is not None and record.leader not in (None, NO_LEADER):
            records.append(record)
    return records


# -- AlterPartition ----------------------------------------------------------------------------


def handle_alter_partition(
    image: MetadataImage, request: AlterPartitionRequest, *, elr_enabled: bool = False
) -> ControllerResult[AlterPartitionResponse]:
    """Validate and apply a leader's ISR change, checking in Kafka's order.

    Request level: the sender's broker epoch (STALE_BROKER_EPOCH), as Kafka's
    ``ReplicationControlManager.alterPartition`` does before looking at any partition.
    Then per partition (`_validate_alter_partition`): UNKNOWN_TOPIC_ID /
    UNKNOWN_TOPIC_OR_PARTITION, FENCED_LEADER_EPOCH, INVALID_REQUEST (not the leader),
    INVALID_UPDATE_VERSION, INVALID_REQUEST (bad ISR or recovery state), INELIGIBLE_REPLICA.
    """
    sender = image.broker(request.broker_id)
    if sender is None or sender.broker_epoch != request.broker_epoch:
        return ControllerResult(
            records=(),
            response=AlterPartitionResponse(
                error_code=ErrorCode.STALE_BROKER_EPOCH,
                error_message=f"broker {request.broker_id} epoch {request.broker_epoch} is stale",
            ),
        )
    records: list[MetadataRecord] = []
    topic_results: list[AlterPartitionTopicResult] = []
    seen: set[tuple[str, int]] = set()
    for topic_data in request.topics:
        results: list[AlterPartitionPartitionResult] = []
        for data in topic_data.partitions:
            key = (topic_data.topic_id, data.partition)
            if key in seen:
                results.append(_error(data, ErrorCode.INVALID_REQUEST, "duplicate partition"))
                continue
            seen.add(key)
            result, record = _alter_one(
                image, request.broker_id, topic_data.topic_id, data, elr_enabled
            )
            results.append(result)
            if record is not None:
                records.append(record)
        topic_results.append(
            AlterPartitionTopicResult(topic_id=topic_data.topic_id, partitions=tuple(results))
        )
    return ControllerResult(
        records=tuple(records), response=AlterPartitionResponse(topics=tuple(topic_results))
    )


def _error(
    data: AlterPartitionData, code: ErrorCode, message: str
) -> AlterPartitionPartitionResult:
    return AlterPartitionPartitionResult(
        partition=data.partition, error_code=code, error_message=message
    )


def _alter_one(
    image: MetadataImage, sender_id: int, topic_id: str, data: AlterPartitionData, elr_enabled: bool
) -> tuple[AlterPartitionPartitionResult, PartitionChangeRecord | None]:
    topic = image.topic_by_id(topic_id)
    if topic is None:
        return _error(
            data, ErrorCode.UNKNOWN_TOPIC_ID, f"unknown topic id {quoted(topic_id)}"
        ), None
    partition = topic.partitions.get(data.partition)
    if partition is None:
        message = f"unknown partition {topic.name}-{data.partition}"
        return _error(data, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message), None
    name = f"{topic.name}-{data.partition}"
    if is_quorum_topic(image, topic.name):
        if data.elected_by_vote:
            return handle_quorum_leader_report(image, sender_id, topic_id, data, name)
        message = f"{name}: a quorum-mode partition has no ISR to change"
        return _error(data, ErrorCode.INVALID_REQUEST, message), None
    if data.elected_by_vote:
        message = f"{name}: an ISR partition's leader is elected by the controller"
        return _error(data, ErrorCode.INVALID_REQUEST, message), None
    rejection = _validate_alter_partition(image, sender_id, partition, data)
    if rejection is None:
        rejection = _reject_offline_replicas(partition, data)
    if rejection is not None:
        code, message = rejection
        return _error(data, code, f"{topic.name}-{data.partition}: {message}"), None
    record = (
        PartitionChangeBuilder(
            partition,
            topic_id,
            data.partition,
            is_acceptable_leader=image.is_active_broker,
            elr=elr_policy(image, topic.name, partition, enabled=elr_enabled),
        )
        .set_target_isr(data.new_isr)
        .set_target_leader_recovery_state(data.leader_recovery_state)
        .build()
    )
    after = partition if record is None else merge_partition_change(partition, record)
    result = AlterPartitionPartitionResult(
        partition=data.partition,
        leader_id=NodeId(after.leader),
        leader_epoch=Epoch(after.leader_epoch),
        isr=after.isr,
        leader_recovery_state=after.leader_recovery_state,
        partition_epoch=after.partition_epoch,
    )
    return result, record


def _validate_alter_partition(
    image: MetadataImage, sender_id: int, partition: PartitionRegistration, data: AlterPartitionData
) -> tuple[ErrorCode, str] | None:
    # NB: a *newer* epoch than ours means we are a stale controller: NOT_CONTROLLER (Kafka 3.6+).
    if data.leader_epoch < partition.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH, (
            f"leader epoch {data.leader_epoch} < current {partition.leader_epoch}"
        )
    if data.leader_epoch > partition.leader_epoch:
        return ErrorCode.NOT_CONTROLLER, f"leader epoch {data.leader_epoch} is from the future"
    if sender_id != partition.leader:
        return ErrorCode.INVALID_REQUEST, (
            f"broker {sender_id} is not the leader (leader is {partition.leader})"
        )
    if data.partition_epoch < partition.partition_epoch:
        return ErrorCode.INVALID_UPDATE_VERSION, (
            f"partition epoch {data.partition_epoch} < current {partition.partition_epoch}"
        )
    if data.partition_epoch > partition.partition_epoch:
        return (
            ErrorCode.NOT_CONTROLLER,
            f"partition epoch {data.partition_epoch} is from the future",
        )
    new_isr = data.new_isr
    if len(set(new_isr)) != len(new_isr) or not set(new_isr) <= set(partition.replicas):
        return ErrorCode.INVALID_REQUEST, f"ISR {_ids(new_isr)} is not a subset of the replicas"
    if partition.leader not in new_isr:
        return ErrorCode.INVALID_REQUEST, f"ISR {_ids(new_isr)} does not contain the leader"
    # KIP-704: RECOVERED -> RECOVERING is not allowed, and a RECOVERING ISR is just the leader.
    if data.leader_recovery_state is LeaderRecoveryState.RECOVERING:
        if partition.leader_recovery_state is LeaderRecoveryState.RECOVERED:
            return ErrorCode.INVALID_REQUEST, "cannot go from RECOVERED to RECOVERING"
        if len(new_isr) != 1:
            return ErrorCode.INVALID_REQUEST, "a RECOVERING partition's ISR is only the leader"
    # KIP-841: every ISR member must be active with the broker epoch the leader saw.
    for member in data.new_isr_with_epochs:
        registration = image.broker(member.broker_id)
        if registration is None or not registration.is_active:
            state = "unregistered" if registration is None else registration.state.value
            return ErrorCode.INELIGIBLE_REPLICA, f"replica {member.broker_id} is {state}"
        if member.broker_epoch != -1 and member.broker_epoch != registration.broker_epoch:
            return ErrorCode.INELIGIBLE_REPLICA, (
                f"replica {member.broker_id} epoch {member.broker_epoch} is stale "
                f"(registered epoch {registration.broker_epoch})"
            )
    return None


def _reject_offline_replicas(
    partition: PartitionRegistration, data: AlterPartitionData
) -> tuple[ErrorCode, str] | None:
    """An ISR change may not add a replica whose broker reports its log offline
    (`kraft.controller.offline_replicas`)."""
    offline, isr = partition.offline_replicas, partition.isr
    joining = [r for r in data.new_isr if r in offline and r not in isr]
    if joining:
        return ErrorCode.INELIGIBLE_REPLICA, f"the log of replica {joining[0]} is offline"
    return None


def _ids(ids: Sequence[int], limit: int = 10) -> str:
    """A list of broker ids for an error message, cut to ``limit`` of them."""
    if len(ids) <= limit:
        return str(list(ids))
    return f"{list(ids[:limit])}... ({len(ids)} ids)"


# -- ElectLeaders (KIP-460) --------------------------------------------------------------------


def handle_elect_leaders(
    image: MetadataImage, request: ElectLeadersRequest, *, elr_enabled: bool = False
) -> ControllerResult[ElectLeadersResponse]:
    """Preferred or unclean election for the named partitions (or all partitions)."""
    rejection = reject_elect_leaders(request)
    if rejection is not None:
        return ControllerResult(records=(), response=rejection)
    report_all = request.partitions is not None
    targets: Iterable[TopicPartition]
    if request.partitions is None:
        targets = [TopicPartition(t.name, i) for t, i, _ in image.iter_partitions()]
    else:
        targets = request.partitions
    records: list[MetadataRecord] = []
    by_topic: dict[str, list[PartitionElectionResult]] = {}
    for tp in targets:
        code, message, record = _elect_one(image, tp, request.election_type, elr_enabled)
        if record is not None:
            records.append(record)
        if report_all or code is not ErrorCode.ELECTION_NOT_NEEDED:
            by_topic.setdefault(tp.topic, []).append(
                PartitionElectionResult(
                    partition=tp.partition, error_code=code, error_message=message
                )
            )
    results = tuple(
        ReplicaElectionResult(topic=topic, partition_results=tuple(partitions))
        for topic, partitions in by_topic.items()
    )
    return ControllerResult(
        records=tuple(records), response=ElectLeadersResponse(replica_election_results=results)
    )


_VOTE_ELECTS = "a quorum-mode partition's leader is elected by its Raft vote, not the controller"


def _elect_one(
    image: MetadataImage, tp: TopicPartition, election_type: ElectionType, elr_enabled: bool
) -> tuple[ErrorCode, str, PartitionChangeRecord | None]:
    topic = image.topic(tp.topic)
    partition = None if topic is None else topic.partitions.get(tp.partition)
    if topic is None or partition is None:
        return (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            f"unknown partition {quoted(tp.topic)}-{tp.partition}",
            None,
        )
    if is_quorum_topic(image, topic.name):
        return ErrorCode.ELECTION_NOT_NEEDED, _VOTE_ELECTS, None
    builder = PartitionChangeBuilder(
        partition,
        topic.topic_id,
        tp.partition,
        is_acceptable_leader=image.is_active_broker,
        elr=elr_policy(image, topic.name, partition, enabled=elr_enabled),
    )
    if election_type is ElectionType.PREFERRED:
        if partition.leader == partition.preferred_leader:
            return ErrorCode.ELECTION_NOT_NEEDED, "", None
        record = builder.set_election(Election.PREFERRED).build()
        if record is None or record.leader != partition.preferred_leader:
            message = f"preferred leader {partition.preferred_leader} is not available"
            return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, message, None
        return ErrorCode.NONE, "", record
    if partition.is_online:
        return ErrorCode.ELECTION_NOT_NEEDED, "", None
    record = builder.set_election(Election.UNCLEAN).build()
    if record is None or record.leader in (None, NO_LEADER):
        return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, f"no live replica of {tp}", None
    return ErrorCode.NONE, "", record


__all__ = [
    "elect_offline_leaders",
    "handle_alter_partition",
    "handle_elect_leaders",
    "remove_broker_from_partitions",
    "unclean_election_enabled",
]
