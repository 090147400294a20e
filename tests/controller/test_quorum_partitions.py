"""Quorum-mode topics at the controller (issue #12): it places replicas and fences brokers, but
the partitions' Raft groups elect their leaders and report them; configs that cannot apply are
refused."""

from __future__ import annotations

from kraft.controller import (
    AlterableConfig,
    AlterConfigsResource,
    CreatableTopic,
    CreateTopicsRequest,
    IncrementalAlterConfigsRequest,
)
from kraft.controller.messages import (
    AlterConfigOp,
    AlterPartitionData,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopic,
    BrokerEpochState,
    BrokerHeartbeatRequest,
    ElectionType,
    ElectLeadersRequest,
    TopicIdPartition,
)
from kraft.controller.offline_replicas import offline_replica_changes
from kraft.metadata import ConfigResourceType
from kraft.metadata.records import NO_LEADER
from kraft.types import TopicPartition
from storage.errors import ErrorCode
from tests.controller.harness import ControllerHarness

QUORUM = {"replication.mode": "quorum"}


def _cluster(*, configs: dict[str, str] | None = None) -> ControllerHarness:
    h = ControllerHarness()
    h.start_brokers(1, 2, 3)
    topic = CreatableTopic(
        name="q",
        num_partitions=1,
        replication_factor=3,
        configs=QUORUM if configs is None else configs,
    )
    result = h.run(h.core.handle_create_topics_request, CreateTopicsRequest(topics=(topic,)))
    assert result.topics[0].error_code is ErrorCode.NONE, result.topics[0].error_message
    return h


def _report(h: ControllerHarness, sender: int, epoch: int) -> AlterPartitionResponse:
    image = h.core.pending_image
    topic = image.topic("q")
    assert topic is not None
    request = AlterPartitionRequest(
        broker_id=sender,
        broker_epoch=image.brokers[sender].broker_epoch,
        topics=(
            AlterPartitionTopic(
                topic_id=topic.topic_id,
                partitions=(
                    AlterPartitionData(
                        partition=0,
                        leader_epoch=epoch,
                        new_isr_with_epochs=(),
                        partition_epoch=-1,
                        elected_by_vote=True,
                    ),
                ),
            ),
        ),
    )
    return h.run(h.core.handle_alter_partition_request, request)


def _code(response: AlterPartitionResponse) -> ErrorCode:
    assert response.error_code is ErrorCode.NONE, response.error_message
    return response.topics[0].partitions[0].error_code


def _alter(h: ControllerHarness, key: str, value: str | None) -> tuple[ErrorCode, str]:
    op = AlterConfigOp.SET if value is not None else AlterConfigOp.DELETE
    response = h.run(
        h.core.handle_incremental_alter_configs_request,
        IncrementalAlterConfigsRequest(
            resources=(
                AlterConfigsResource(
                    resource_type=ConfigResourceType.TOPIC,
                    resource_name="q",
                    configs=(AlterableConfig(name=key, value=value, op=op),),
                ),
            )
        ),
    )
    result = response.responses[0]
    return result.error_code, result.error_message


def test_a_new_quorum_partition_has_every_replica_as_voter_and_no_leader_until_its_vote() -> None:
    p = _cluster().partition("q")
    assert p.leader == NO_LEADER and p.leader_epoch == 0
    assert sorted(p.isr) == sorted(p.replicas) and len(p.replicas) == 3


def test_the_raft_winner_reports_and_the_controller_records_its_leader_and_epoch() -> None:
    h = _cluster()
    assert _code(_report(h, 2, epoch=3)) is ErrorCode.NONE
    p = h.partition("q")
    assert (p.leader, p.leader_epoch) == (2, 3)
    assert _code(_report(h, 2, epoch=3)) is ErrorCode.NONE  # a retried report: no change
    assert h.partition("q").partition_epoch == p.partition_epoch


def test_a_report_for_an_epoch_not_above_the_recorded_one_is_fenced() -> None:
    h = _cluster()
    _report(h, 2, epoch=3)
    assert _code(_report(h, 1, epoch=3)) is ErrorCode.FENCED_LEADER_EPOCH
    assert _code(_report(h, 1, epoch=2)) is ErrorCode.FENCED_LEADER_EPOCH
    assert h.partition("q").leader == 2
    assert _code(_report(h, 1, epoch=4)) is ErrorCode.NONE
    assert (h.partition("q").leader, h.partition("q").leader_epoch) == (1, 4)


def test_a_report_from_a_non_replica_or_a_fenced_broker_is_refused() -> None:
    h = _cluster()
    h.start_brokers(4)
    assert _code(_report(h, 4, epoch=1)) is ErrorCode.INELIGIBLE_REPLICA
    h.heartbeat(3, want_fence=True)
    assert h.image.brokers[3].fenced
    assert _code(_report(h, 3, epoch=1)) is ErrorCode.INELIGIBLE_REPLICA
    assert h.partition("q").leader == NO_LEADER


def test_fencing_the_leader_neither_elects_nor_shrinks_a_quorum_partition() -> None:
    h = _cluster()
    _report(h, 1, epoch=1)
    before = h.partition("q")
    h.heartbeat(1, want_fence=True)
    after = h.partition("q")
    assert (after.leader, after.leader_epoch, after.isr) == (1, 1, before.isr)


def test_an_isr_change_of_a_quorum_partition_is_refused() -> None:
    h = _cluster()
    _report(h, 1, epoch=1)
    request = h.alter_isr_request("q", 0, (1,))
    assert _code(h.run(h.core.handle_alter_partition_request, request)) is (
        ErrorCode.INVALID_REQUEST
    )


def test_a_leader_report_for_an_isr_partition_is_refused() -> None:
    h = _cluster(configs={})
    assert _code(_report(h, 2, epoch=5)) is ErrorCode.INVALID_REQUEST
    assert h.partition("q").leader_epoch == 0


def test_preferred_and_unclean_elections_leave_quorum_partitions_to_their_vote() -> None:
    h = _cluster()
    _report(h, 3, epoch=1)
    for kind in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        response = h.run(
            h.core.handle_elect_leaders_request,
            ElectLeadersRequest(election_type=kind, partitions=(TopicPartition("q", 0),)),
        )
        result = response.replica_election_results[0].partition_results[0]
        assert result.error_code is ErrorCode.ELECTION_NOT_NEEDED
        assert "Raft vote" in result.error_message
        assert h.partition("q").leader == 3


def test_an_offline_leader_replica_is_cleared_in_the_same_epoch_for_the_next_report() -> None:
    h = _cluster()
    _report(h, 2, epoch=4)
    topic_id = h.image.topic_ids_by_name["q"]
    offline = (TopicIdPartition(topic_id=topic_id, partition=0),)
    records = offline_replica_changes(h.core.pending_image, 2, offline)
    assert len(records) == 1 and records[0].leader == NO_LEADER
    assert records[0].isr is None  # the voters stay
    h.run(
        h.core.handle_broker_heartbeat_request,
        BrokerHeartbeatRequest(
            broker_id=2,
            broker_epoch=h.image.brokers[2].broker_epoch,
            current_metadata_offset=h.image.last_offset,
            offline_replicas=offline,
        ),
    )
    p = h.partition("q")
    assert (p.leader, p.leader_epoch, p.offline_replicas) == (NO_LEADER, 4, (2,))
    assert _code(_report(h, 2, epoch=5)) is ErrorCode.INELIGIBLE_REPLICA
    assert _code(_report(h, 1, epoch=5)) is ErrorCode.NONE


def test_changing_the_replication_mode_of_an_existing_topic_is_refused() -> None:
    quorum = _cluster()
    code, message = _alter(quorum, "replication.mode", "isr")
    assert code is ErrorCode.INVALID_CONFIG and "chosen when the topic is created" in message
    assert _alter(quorum, "replication.mode", None)[0] is ErrorCode.INVALID_CONFIG
    assert _alter(quorum, "replication.mode", "quorum")[0] is ErrorCode.NONE  # no change
    isr = _cluster(configs={})
    assert _alter(isr, "replication.mode", "quorum")[0] is ErrorCode.INVALID_CONFIG


def test_min_insync_replicas_on_a_quorum_topic_is_refused_as_not_applying() -> None:
    code, message = _alter(_cluster(), "min.insync.replicas", "2")
    assert code is ErrorCode.INVALID_CONFIG and "does not apply" in message
    h = ControllerHarness()
    h.start_brokers(1, 2, 3)
    topic = CreatableTopic(
        name="q", replication_factor=3, configs={**QUORUM, "min.insync.replicas": "2"}
    )
    result = h.run(h.core.handle_create_topics_request, CreateTopicsRequest(topics=(topic,)))
    assert result.topics[0].error_code is ErrorCode.INVALID_CONFIG
    assert "does not apply" in result.topics[0].error_message


def test_unused_isr_fields_are_ignored_in_a_report() -> None:
    h = _cluster()
    image = h.core.pending_image
    topic_id = image.topic_ids_by_name["q"]
    request = AlterPartitionRequest(
        broker_id=1,
        broker_epoch=image.brokers[1].broker_epoch,
        topics=(
            AlterPartitionTopic(
                topic_id=topic_id,
                partitions=(
                    AlterPartitionData(
                        partition=0,
                        leader_epoch=1,
                        new_isr_with_epochs=(BrokerEpochState(broker_id=9, broker_epoch=1),),
                        partition_epoch=77,
                        elected_by_vote=True,
                    ),
                ),
            ),
        ),
    )
    assert _code(h.run(h.core.handle_alter_partition_request, request)) is ErrorCode.NONE
    assert h.partition("q").isr == h.partition("q").replicas


def test_leading_a_quorum_partition_does_not_hold_a_controlled_shutdown_back() -> None:
    """The controller cannot move a quorum leadership; the broker's replica resigns to its
    Raft group as it stops, so the controller lets it go at once."""
    h = _cluster()
    _report(h, 1, epoch=1)
    response = h.heartbeat(1, want_shutdown=True)
    assert response.should_shut_down
    assert h.partition("q").leader == 1  # the group, not the controller, moves it


def test_unclean_leader_election_on_a_quorum_topic_is_refused_as_not_applying() -> None:
    code, message = _alter(_cluster(), "unclean.leader.election.enable", "true")
    assert code is ErrorCode.INVALID_CONFIG and "does not apply" in message
    assert _alter(_cluster(configs={}), "unclean.leader.election.enable", "true")[0] is (
        ErrorCode.NONE
    )
