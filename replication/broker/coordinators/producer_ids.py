"""`ProducerIds`: producer ids from a block the controller allocates (AllocateProducerIds,
KIP-730), for idempotent producers (`BrokerService`) and transactional ids (`TxnService`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from replication.messages import InitProducerIdResponse
from storage.errors import ErrorCode, KraftError

if TYPE_CHECKING:
    from kraft.controller.messages import AllocateProducerIdsResponse


class ProducerIds:
    """Hands out the ids of the current block, asking the controller for the next one."""

    def __init__(self, allocate: Callable[[], Awaitable[AllocateProducerIdsResponse]]) -> None:
        self._allocate = allocate
        self._block = (0, 0)  # [next, end) of the current block
        self._lock = asyncio.Lock()

    async def next(self) -> InitProducerIdResponse:
        """A fresh id at epoch 0, or COORDINATOR_LOAD_IN_PROGRESS while no block is to be had."""
        async with self._lock:
            start, end = self._block
            if start >= end:
                # No block yet, and none to be had: whatever the controller said (this broker
                # not registered yet, a stale broker epoch, no active controller, a network
                # error) concerns the broker, not the producer, which retries: Kafka answers
                # COORDINATOR_LOAD_IN_PROGRESS until its block arrives (KIP-730).
                try:
                    block = await self._allocate()
                except KraftError as e:
                    return _no_block(e.code, e.message)
                if block.error_code is not ErrorCode.NONE:
                    return _no_block(block.error_code, block.error_message)
                start, end = (
                    block.producer_id_start,
                    block.producer_id_start + block.producer_id_len,
                )
            self._block = (start + 1, end)
            return InitProducerIdResponse(producer_id=start, producer_epoch=0)


def _no_block(code: ErrorCode, message: str) -> InitProducerIdResponse:
    return InitProducerIdResponse(
        error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        error_message=f"no producer id block yet ({code.name}: {message[:200]})",
    )


__all__ = ["ProducerIds"]
