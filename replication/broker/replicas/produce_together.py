"""`produce_together`: the partitions of one topic of a Produce, appended without a task each.

A Produce naming several partitions of a leader (kraft's producer sends each broker every
partition's ready batch in one request) ran each partition in a task under ``gather``: a task
per partition cost its creation, its steps and its completion callbacks, per request. Here each
batch whose producer's sequence turn has come is appended at once, in the request's order, and
the completions (futures) are awaited after all the appends, so the followers' next fetch
carries them all. A partition that must wait (a batch ahead of its producer's sequence,
`replication.broker.replicas.sequence_turn`; a KIP-890 gate) or that is answered without an append
still runs in a task of its own, as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from kraft.types import TopicPartition
from replication.core import ProduceCompletion
from replication.messages import ProducePartitionResponse


async def produce_together(
    tps: Sequence[TopicPartition],
    now: Callable[[TopicPartition], asyncio.Future[ProduceCompletion] | None],
    one: Callable[[TopicPartition], Awaitable[ProducePartitionResponse]],
    answered: Callable[[TopicPartition, ProduceCompletion], ProducePartitionResponse],
) -> list[ProducePartitionResponse]:
    """The answers for ``tps``, in order.

    Args:
        now: appends a partition's batch at once and returns the future of its completion, or
            None if it cannot be (then ``one`` runs it in a task).
        one: a partition's whole produce (waits, gates, errors included).
        answered: the answer for a partition ``now`` appended, from its completion.
    """
    pending: list[asyncio.Future[Any]] = []
    for tp in tps:
        started = now(tp)
        pending.append(started if started is not None else asyncio.ensure_future(one(tp)))
    answers: list[ProducePartitionResponse] = []
    try:
        for tp, waiting in zip(tps, pending, strict=True):
            done = await waiting
            answers.append(answered(tp, done) if isinstance(done, ProduceCompletion) else done)
    finally:
        for waiting in pending:  # NB: cancelled (the request's task was): as gather did
            if isinstance(waiting, asyncio.Task) and not waiting.done():
                waiting.cancel()
    return answers


__all__ = ["produce_together"]
