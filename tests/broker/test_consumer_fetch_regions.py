"""A consumer's Fetch through a transport that sends from the file (a plaintext Kafka listener:
``file_regions``): its records come as a `FileRegion` of the segment holding the same bytes a
read returns, never past the high watermark (read_committed: the last stable offset); other
transports get bytes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

from kraft.metadata.image import PartitionRegistration
from replication.broker.replicas.partition import PartitionReplica
from replication.broker.replicas.stable_reads import READ_COMMITTED
from replication.broker.service import BrokerService
from replication.core import BrokerStatus, ReplicationConfig
from replication.messages import FetchPartition
from storage.config import LogConfig
from storage.errors import ErrorCode
from storage.file_region import FileRegion, Records, records_bytes
from tests.broker.test_consumer_fetch_range import _never_fetches
from tests.replication.harness import TP, batch

if TYPE_CHECKING:
    from replication.broker.server import BrokerServer


def _replica(directory: Path, replicas: tuple[int, ...]) -> PartitionReplica:
    replica = PartitionReplica(
        topic_partition=TP,
        topic_id="tid",
        directory=directory,
        log_config=LogConfig(),
        local_id=1,
        broker_epoch=10,
        fetch_from_leader=_never_fetches,
        send_alter_partition=lambda _replica, _send: None,
    )
    replica.apply_registration(
        PartitionRegistration(replicas=replicas, isr=replicas, leader=1),
        {n: BrokerStatus(broker_epoch=10 * n) for n in replicas},
        ReplicationConfig(),
    )
    return replica


def _fetch(
    service: BrokerService, offset: int, *, file_regions: bool, isolation_level: int = 0
) -> Records:
    data = service._consumer_fetch(
        TP,
        FetchPartition(partition=TP.partition, fetch_offset=offset),
        1 << 20,
        isolation_level,
        None,
        file_regions,
    )
    assert data.error_code is ErrorCode.NONE
    return data.records


def test_a_consumer_fetch_that_asks_for_regions_gets_the_read_s_bytes_as_one(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        replica = _replica(tmp_path / "p", (1,))
        try:
            for i in range(4):
                done = await replica.produce(1, 1000, batch(bytes([65 + i]) * 1000, count=30))
                assert done.error_code is ErrorCode.NONE
            assert replica.high_watermark == replica.log.log_end_offset == 120
            service = BrokerService(cast("BrokerServer", SimpleNamespace(replicas={TP: replica})))
            expected = _fetch(service, 0, file_regions=False)
            assert isinstance(expected, bytes) and len(expected) > 100_000
            region = _fetch(service, 0, file_regions=True)
            assert isinstance(region, FileRegion)
            assert records_bytes(region) == expected
            committed = _fetch(service, 0, file_regions=True, isolation_level=READ_COMMITTED)
            assert isinstance(committed, FileRegion) and committed.next_offset == 120
            assert records_bytes(committed) == expected
        finally:
            replica.stop()

    asyncio.run(run())


def test_a_region_never_reaches_past_the_high_watermark(tmp_path: Path) -> None:
    async def run() -> None:
        replica = _replica(tmp_path / "p", (1, 2))  # the follower never fetches
        try:
            done = await replica.produce(1, 1000, batch(b"x" * 1000, count=100))
            assert done.error_code is ErrorCode.NONE
            assert (replica.high_watermark, replica.log.log_end_offset) == (0, 100)
            service = BrokerService(cast("BrokerServer", SimpleNamespace(replicas={TP: replica})))
            assert _fetch(service, 0, file_regions=True) == b""
        finally:
            replica.stop()

    asyncio.run(run())
