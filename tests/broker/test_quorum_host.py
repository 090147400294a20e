"""`QuorumHost`: a quorum partition's won election is reported to the controller until it is
recorded, refused for good, or no longer true; peers come from the metadata image."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from kraft.controller.messages import (
    AlterPartitionPartitionResult,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopicResult,
)
from kraft.raft import RaftConfig
from kraft.types import NodeId, TopicPartition
from replication.broker.replicas import quorum_host
from replication.broker.replicas.quorum_host import QuorumHost
from storage.errors import ErrorCode, NetworkError
from tests.metadata.builders import ImageBuilder


class _Replica:
    def __init__(self) -> None:
        self.topic_partition = TopicPartition("ledger", 0)
        self.topic_id = "ledger-id"
        self.leading: int | None = 3

    def leads_epoch(self, leader_epoch: int) -> bool:
        return self.leading == leader_epoch


def _answer(code: ErrorCode) -> AlterPartitionResponse:
    return AlterPartitionResponse(
        topics=(
            AlterPartitionTopicResult(
                topic_id="ledger-id",
                partitions=(AlterPartitionPartitionResult(partition=0, error_code=code),),
            ),
        )
    )


async def _host(
    answers: list[ErrorCode | Exception],
) -> tuple[QuorumHost, list[AlterPartitionRequest]]:
    sent: list[AlterPartitionRequest] = []

    async def send(request: AlterPartitionRequest) -> AlterPartitionResponse:
        sent.append(request)
        answer = answers.pop(0) if answers else ErrorCode.NONE
        if isinstance(answer, Exception):
            raise answer
        return _answer(answer)

    host = QuorumHost(
        1,
        grpc.aio.server(),
        send_to_controller=send,
        broker_epoch=lambda: 7,
        raft_config=RaftConfig(),
    )
    return host, sent


async def _settle(host: QuorumHost) -> None:
    for _ in range(200):
        if not host._reports:
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the report never settled")


@pytest.fixture(autouse=True)
def _fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quorum_host, "REPORT_BACKOFF_MS", 1)
    monkeypatch.setattr(quorum_host, "REPORT_BACKOFF_MAX_MS", 2)


def test_a_report_is_retried_until_the_controller_records_it() -> None:
    async def main() -> None:
        host, sent = await _host(
            [NetworkError("no controller"), ErrorCode.INELIGIBLE_REPLICA, ErrorCode.NONE]
        )
        host.report_leader(_Replica(), 3)
        await _settle(host)
        assert len(sent) == 3
        data = sent[0].topics[0].partitions[0]
        assert data.elected_by_vote and data.leader_epoch == 3 and sent[0].broker_epoch == 7
        await host.close()

    asyncio.run(main())


def test_a_report_stops_when_fenced_or_when_the_replica_no_longer_leads_that_epoch() -> None:
    async def main() -> None:
        host, sent = await _host([ErrorCode.FENCED_LEADER_EPOCH])
        host.report_leader(_Replica(), 3)
        await _settle(host)
        assert len(sent) == 1
        replica = _Replica()
        host2, sent2 = await _host([ErrorCode.INELIGIBLE_REPLICA] * 1000)
        host2.report_leader(replica, 3)
        for _ in range(400):  # until the refused report has been retried at least once
            if len(sent2) >= 2:
                break
            await asyncio.sleep(0.005)
        assert len(sent2) >= 2, "a refused report is retried while the replica still leads"
        replica.leading = None  # lost the leadership: the report is no longer true
        await _settle(host2)
        stopped_at = len(sent2)
        await asyncio.sleep(0.05)  # several backoffs (1 ms here): no further report goes out
        assert len(sent2) == stopped_at < 1000
        await host.close()
        await host2.close()

    asyncio.run(main())


def test_peers_are_the_registered_listeners_of_the_other_brokers() -> None:
    async def main() -> None:
        host, _ = await _host([])
        host.update_addresses(ImageBuilder().with_brokers(1, 2, 3).build())
        addresses = host.transport._addresses
        assert addresses == {NodeId(2): "127.0.0.1:9002", NodeId(3): "127.0.0.1:9003"}
        await host.close()

    asyncio.run(main())
