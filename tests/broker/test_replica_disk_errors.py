"""A disk error in a `PartitionReplica` takes it offline: produces get a retriable error, the
core is dropped (never left mid-append), nothing that failed is acknowledged or on disk, and
the broker is told (issue 10, findings 5 and 6)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kraft.controller.messages import TopicIdPartition
from kraft.metadata.image import PartitionRegistration
from kraft.types import TopicPartition
from replication.broker.replicas.offline import OfflineReplicas
from replication.broker.replicas.partition import PartitionReplica
from replication.core import BrokerStatus, FollowerFetchRequest, ReplicationConfig
from storage.config import LogConfig
from storage.errors import CorruptRecordError, ErrorCode, KafkaStorageError
from storage.file_io import TEST_FAULTS_ENV, arm_fault, clear_fault
from storage.log import SegmentedLog
from storage.segment import segment_file_name
from tests.replication.harness import TP, batch


def leader_replica(
    directory: Path, offline: list[KafkaStorageError], isr: tuple[int, ...] = (1,)
) -> PartitionReplica:
    async def no_fetch(request: FollowerFetchRequest) -> object:
        raise AssertionError("a leader does not fetch")

    replica = PartitionReplica(
        topic_partition=TP,
        topic_id="tid",
        directory=directory,
        log_config=LogConfig(),
        local_id=1,
        broker_epoch=10,
        fetch_from_leader=no_fetch,  # type: ignore[arg-type]
        send_alter_partition=lambda _replica, _send: None,
        on_offline=lambda _replica, error: offline.append(error),
    )
    replica.apply_registration(
        PartitionRegistration(replicas=isr, isr=isr, leader=1, leader_epoch=1),
        {b: BrokerStatus(broker_epoch=10 * b) for b in isr},
        ReplicationConfig(min_insync_replicas=1),
    )
    return replica


def test_a_full_disk_takes_the_leader_replica_offline_instead_of_wedging_its_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    faults = tmp_path / "faults"
    monkeypatch.setenv(TEST_FAULTS_ENV, str(faults))
    directory = tmp_path / "t-0"

    async def run() -> None:
        offline: list[KafkaStorageError] = []
        replica = leader_replica(directory, offline)
        done = await replica.produce(1, 5_000, batch(b"kept", count=2))
        assert (done.error_code, done.base_offset) == (ErrorCode.NONE, 0)

        fault = arm_fault(faults, directory)  # ENOSPC on every write of this log
        done = await asyncio.wait_for(replica.produce(-1, 5_000, batch(b"lost")), 5)
        assert done.error_code is ErrorCode.KAFKA_STORAGE_ERROR
        assert replica.offline is not None and [e.message for e in offline] == [
            replica.offline.message
        ]
        assert replica.core is None and replica.log.closed
        # Before the fix: AssertionError("the previous LeaderAppend was not acknowledged").
        again = await asyncio.wait_for(replica.produce(-1, 5_000, batch(b"later")), 5)
        assert again.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
        with pytest.raises(KafkaStorageError):
            replica.apply_registration(
                PartitionRegistration(replicas=(1,), isr=(1,), leader=1, leader_epoch=2),
                {1: BrokerStatus(broker_epoch=10)},
                ReplicationConfig(min_insync_replicas=1),
            )
        replica.stop()

        clear_fault(fault)
        reopened = SegmentedLog.open(directory)
        assert reopened.log_end_offset == 2  # the failed append left nothing behind
        assert (directory / segment_file_name(0)).stat().st_size == reopened.size_bytes
        reopened.close()

    asyncio.run(run())


def corrupt_last_batch(replica: PartitionReplica, directory: Path) -> None:
    replica.log.flush()
    path = directory / segment_file_name(0)
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF  # a bit rot in the last batch's records
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("isr", [(1, 2), (1,)], ids=["another_copy", "only_copy"])
def test_a_corrupt_batch_in_the_leaders_own_log_fails_over_only_if_another_copy_exists(
    tmp_path: Path, isr: tuple[int, ...]
) -> None:
    directory = tmp_path / "t-0"

    async def run() -> None:
        offline: list[KafkaStorageError] = []
        replica = leader_replica(directory, offline, isr)
        for i in range(5):
            done = await replica.produce(1, 5_000, batch(b"v%d" % i))
            assert done.error_code is ErrorCode.NONE
        corrupt_last_batch(replica, directory)

        if isr == (1,):  # nothing to fail over to: the reader gets CORRUPT_MESSAGE
            with pytest.raises(CorruptRecordError, match="CRC mismatch"):
                replica.read(0, 1 << 20)
            assert replica.offline is None and not offline
            assert replica.read(0, 1 << 20, max_offset=4)  # the batches before it still read
            replica.stop()
            assert SegmentedLog.open(directory).log_end_offset == 5  # nothing cut
            return
        with pytest.raises(KafkaStorageError, match="CRC mismatch"):
            replica.read(0, 1 << 20)
        assert replica.offline is not None and len(offline) == 1
        replica.stop()
        reopened = SegmentedLog.open(directory)
        assert reopened.log_end_offset == 4  # recovery cut the corrupt batch: refetched later
        reopened.close()

    asyncio.run(run())


def test_an_append_whose_fsync_fails_is_not_acknowledged_and_takes_the_replica_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    faults = tmp_path / "faults"
    monkeypatch.setenv(TEST_FAULTS_ENV, str(faults))
    directory = tmp_path / "t-0"

    async def run() -> None:
        offline: list[KafkaStorageError] = []
        replica = leader_replica(directory, offline)
        replica.update_log_config(LogConfig(flush_ms=0))
        arm_fault(faults, directory, error="EIO", ops={"fsync", "fdatasync"})
        done = await replica.produce(1, 5_000, batch(b"x"))
        # NB: flush.ms=0 flushes in the append: written, not durable, so not acknowledged.
        assert done.error_code is ErrorCode.KAFKA_STORAGE_ERROR
        assert replica.offline is not None and "Input/output error" in replica.offline.message
        replica.tick()  # an offline replica's tick does nothing
        replica.stop()

    asyncio.run(run())


def test_offline_replicas_are_reported_and_probed_with_a_doubling_backoff() -> None:
    offline = OfflineReplicas()
    tp = TopicPartition("t", 3)
    offline.add(tp, "tid", "ENOSPC", now_s=100.0)
    assert offline.report() == (TopicIdPartition(topic_id="tid", partition=3),)
    assert offline.due(100.4) == []
    assert [t for t, _ in offline.due(100.5)] == [tp]
    waits = [offline.probe_failed(tp, "still full", now_s=101.0) for _ in range(8)]
    assert waits == [1000, 2000, 4000, 8000, 10_000, 10_000, 10_000, 10_000]
    assert offline.due(110.9) == [] and offline.due(111.0) != []
    offline.remove(tp)
    assert offline.report() == () and tp not in offline
