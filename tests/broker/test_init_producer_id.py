"""InitProducerId (issue 10, finding 7): without a transactional id, Kafka hands out a fresh
producer id whatever the request names, so nobody can bump (and so fence) another producer's
epoch by naming its id."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from kraft.controller.messages import AllocateProducerIdsResponse
from replication.broker.service import BrokerService
from replication.messages import InitProducerIdRequest
from storage.errors import ErrorCode


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
