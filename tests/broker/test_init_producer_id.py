"""InitProducerId (issue 10, finding 7): without a transactional id, Kafka hands out a fresh
producer id whatever the request names, so nobody can bump (and so fence) another producer's
epoch by naming its id."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from kraft.controller.messages import AllocateProducerIdsResponse
from replication.broker.service import BrokerService
from replication.messages import InitProducerIdRequest
from storage.errors import ErrorCode, error_for


class _Server:
    """The one thing InitProducerId needs of a broker: blocks of producer ids."""

    def __init__(self) -> None:
        self.next_start = 0

    async def allocate_producer_ids(self) -> AllocateProducerIdsResponse:
        start, self.next_start = self.next_start, self.next_start + 1000
        return AllocateProducerIdsResponse(producer_id_start=start, producer_id_len=1000)


def _init(service: BrokerService, producer_id: int = -1, epoch: int = -1) -> tuple[int, int]:
    response = asyncio.run(
        service.init_producer_id(
            InitProducerIdRequest(producer_id=producer_id, producer_epoch=epoch)
        )
    )
    assert response.error_code is ErrorCode.NONE
    return response.producer_id, response.producer_epoch


def test_naming_another_producers_id_gets_a_fresh_id_not_a_bump_of_its_epoch() -> None:
    service = BrokerService(cast(Any, _Server()))
    victim = _init(service)
    assert victim == (0, 0)
    for epoch in (0, 5, 32766):
        stranger = _init(service, producer_id=victim[0], epoch=epoch)
        assert stranger[0] != victim[0] and stranger[1] == 0


def test_every_init_producer_id_gets_a_new_id_from_the_block() -> None:
    service = BrokerService(cast(Any, _Server()))
    ids = [_init(service)[0] for _ in range(3)]
    assert ids == [0, 1, 2]


class _UnregisteredServer:
    """A broker the controller does not know (yet): every block request is refused."""

    def __init__(self, code: ErrorCode) -> None:
        self.code = code

    async def allocate_producer_ids(self) -> AllocateProducerIdsResponse:
        return AllocateProducerIdsResponse(
            error_code=self.code, error_message="broker 103 epoch -1"
        )


@pytest.mark.parametrize(
    "code",
    [ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED, ErrorCode.NOT_CONTROLLER],
)
def test_a_broker_without_a_producer_id_block_answers_a_retriable_error(code: ErrorCode) -> None:
    """Found by ``kraft nemesis``: a restarted broker not yet registered passed the
    controller's STALE_BROKER_EPOCH on to producers, a fatal error for them (31,077 records
    failed in a 600 s run). Kafka answers COORDINATOR_LOAD_IN_PROGRESS until its block
    arrives (KIP-730), and the producer retries."""
    service = BrokerService(cast(Any, _UnregisteredServer(code)))
    response = asyncio.run(service.init_producer_id(InitProducerIdRequest()))
    assert response.error_code is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert error_for(response.error_code, "").retriable
    assert "broker 103 epoch -1" in response.error_message
