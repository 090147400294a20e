"""A consumer fetch's OFFSET_OUT_OF_RANGE, as Kafka's: the check is against the log end offset
(an offset between the high watermark and the log end is valid and returns nothing yet), and
the message names that same range."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

from kraft.metadata.image import PartitionRegistration
from replication.broker.replicas.partition import PartitionReplica
from replication.broker.service import BrokerService
from replication.core import (
    BrokerStatus,
    FollowerFetchRequest,
    FollowerFetchResponse,
    ReplicationConfig,
)
from replication.messages import FetchPartition
from storage.config import LogConfig
from storage.errors import ErrorCode
from storage.file_region import Records
from tests.replication.harness import TP, batch

if TYPE_CHECKING:
    from replication.broker.server import BrokerServer


async def _never_fetches(request: FollowerFetchRequest) -> FollowerFetchResponse:
    raise AssertionError("the leader does not fetch")  # pragma: no cover


def test_out_of_range_is_checked_and_reported_against_the_log_end_offset(tmp_path: Path) -> None:
    async def run() -> None:
        replica = PartitionReplica(
            topic_partition=TP,
            topic_id="tid",
            directory=tmp_path / "p",
            log_config=LogConfig(),
            local_id=1,
            broker_epoch=10,
            fetch_from_leader=_never_fetches,
            send_alter_partition=lambda _replica, _send: None,
        )
        try:
            # The follower never fetches: the high watermark stays at 0 while the log grows.
            replica.apply_registration(
                PartitionRegistration(replicas=(1, 2), isr=(1, 2), leader=1),
                {1: BrokerStatus(broker_epoch=10), 2: BrokerStatus(broker_epoch=20)},
                ReplicationConfig(),
            )
            done = await replica.produce(1, 1000, batch(b"x", count=5))
            assert done.error_code is ErrorCode.NONE
            assert (replica.high_watermark, replica.log.log_end_offset) == (0, 5)
            server = cast("BrokerServer", SimpleNamespace(replicas={TP: replica}))
            service = BrokerService(server)

            def fetch(offset: int) -> tuple[ErrorCode, str, Records]:
                data = service._consumer_fetch(
                    TP, FetchPartition(partition=TP.partition, fetch_offset=offset), 1 << 20
                )
                return data.error_code, data.error_message, data.records

            # Between the high watermark and the log end: valid, nothing to read yet.
            assert fetch(3) == (ErrorCode.NONE, "", b"")
            assert fetch(5) == (ErrorCode.NONE, "", b"")
            code, message, _ = fetch(6)
            assert code is ErrorCode.OFFSET_OUT_OF_RANGE
            assert "[0, 5]" in message, message  # the range checked, not [0, high watermark]
            assert "high watermark 0" in message
        finally:
            replica.stop()

    asyncio.run(run())
