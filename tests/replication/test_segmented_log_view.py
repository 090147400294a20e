"""The cores run over a real `storage.log.SegmentedLog` as they are: the shell's glue is the
loop in ``replication.core``'s docstring and nothing more."""

from __future__ import annotations

from pathlib import Path

from kraft.metadata.image import PartitionRegistration
from replication.core import (
    BrokerStatus,
    FollowerFetch,
    FollowerFetchResponse,
    PartitionFollower,
    PartitionLeader,
    PartitionLogView,
    PartitionProduce,
    ProducerStateManager,
    ReplicationConfig,
)
from storage.log import SegmentedLog
from tests.replication.harness import QUIET, TP, batch


def test_leader_and_follower_replicate_between_two_segmented_logs(tmp_path: Path) -> None:
    clock = lambda: 0  # noqa: E731
    leader_log = SegmentedLog.open(tmp_path / "leader", clock_ms=clock)
    follower_log = SegmentedLog.open(tmp_path / "follower", clock_ms=clock)
    view: PartitionLogView = leader_log  # structural: mypy checks SegmentedLog fits
    assert view.log_end_offset == 0
    config = ReplicationConfig()
    registration = PartitionRegistration(replicas=(1, 2), isr=(1, 2), leader=1, leader_epoch=3)
    leader = PartitionLeader(
        topic_partition=TP,
        local_id=1,
        local_broker_epoch=10,
        registration=registration,
        brokers={1: BrokerStatus(broker_epoch=10), 2: BrokerStatus(broker_epoch=20)},
        log=leader_log,
        producer_state=ProducerStateManager(),
        config=config,
        high_watermark=0,
        now_ms=0,
        logger=QUIET,
    )
    follower = PartitionFollower(
        topic_partition=TP,
        local_id=2,
        local_broker_epoch=20,
        leader_id=1,
        leader_epoch=3,
        log=follower_log,
        producer_state=ProducerStateManager(),
        config=config,
        high_watermark=0,
        now_ms=0,
        logger=QUIET,
    )

    def drain_leader() -> list[int]:
        done = []
        while leader.has_ready():
            rd = leader.ready()
            if rd.assign_epoch_start is not None:
                leader_log.leader_epoch_cache.assign(*rd.assign_epoch_start)
            done += [c.request_id for c in rd.produce_completions]
            leader.advance(rd)
        return done

    def drain_follower() -> None:
        while follower.has_ready():
            rd = follower.ready()
            if rd.truncate_to is not None:
                follower_log.truncate_to(rd.truncate_to)
                follower_log.leader_epoch_cache.truncate_from_end(follower_log.log_end_offset)
            if rd.append:
                follower_log.append_as_follower(rd.append)
            follower.advance(rd)

    drain_leader()
    drain_follower()
    answered: list[int] = []
    for rid in (1, 2):
        produce = PartitionProduce(
            request_id=rid,
            acks=-1,
            timeout_ms=1_000,
            records=batch(b"v", producer_id=5, producer_epoch=0, base_sequence=rid - 1),
        )
        append = leader.handle_produce_request(produce, 0)
        assert append is not None
        base = leader_log.append(append.records, leader_epoch=append.leader_epoch)
        leader.on_appended(rid, base, 0)
        answered += drain_leader()
    assert answered == []
    for _ in range(3):
        request = follower.build_fetch_request(0)
        assert request is not None
        answer = leader.handle_follower_fetch(
            FollowerFetch(
                replica_id=2,
                broker_epoch=request.broker_epoch,
                fetch_offset=request.fetch_offset,
                last_fetched_epoch=request.last_fetched_epoch,
                current_leader_epoch=request.current_leader_epoch,
            ),
            0,
        )
        answered += drain_leader()
        records = (
            b"" if answer.read_offset is None else leader_log.read(answer.read_offset, 1 << 20)
        )
        follower.handle_fetch_response(
            FollowerFetchResponse(
                fetch_id=request.fetch_id,
                error_code=answer.error_code,
                high_watermark=answer.high_watermark,
                log_start_offset=answer.log_start_offset,
                diverging_epoch=answer.diverging_epoch,
                records=records,
            ),
            0,
        )
        drain_follower()
    assert sorted(answered) == [1, 2]
    assert follower_log.log_end_offset == leader_log.log_end_offset == 2
    assert follower_log.leader_epoch_cache.entries == leader_log.leader_epoch_cache.entries
    assert follower.high_watermark == leader.high_watermark == 2
    leader_log.close()
    follower_log.close()
