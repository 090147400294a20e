"""Produces waiting for the ISR (acks=all): Kafka's ``DelayedProduce`` purgatory, for one
partition and without timers.

Theory of operation
-------------------
An acks=all produce is answered only once every ISR member has its batch, i.e. once the high
watermark reaches ``required_offset`` (its last offset + 1). Until then it waits here, and
the leader re-checks the waiting produces whenever something they depend on changes:

- the high watermark rose: those reached complete with NONE, or with
  NOT_ENOUGH_REPLICAS_AFTER_APPEND if the maximal ISR is below min.insync.replicas then
  (Kafka's ``Partition.checkEnoughReplicasReachOffset``);
- the committed ISR fell below min.insync.replicas: every waiting produce completes with
  NOT_ENOUGH_REPLICAS_AFTER_APPEND at once. NB: Kafka (3.7+, where the HW stops advancing under
  min ISR, KIP-966) leaves them waiting and they time out unless the ISR grows back; kraft
  answers early with the error Kafka defines for exactly this case ("appended, but the ISR
  shrank below min.insync.replicas"), which is retriable;
- its deadline (``now + timeout_ms`` at admission) passed: REQUEST_TIMED_OUT;
- this broker stopped leading: NOT_LEADER_OR_FOLLOWER.

Time is an input: `expire` takes ``now_ms``; `next_deadline_ms` says when to call it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import final

from kraft.types import Offset
from replication.core.log_view import NO_OFFSET
from replication.core.messages import ProduceCompletion
from storage.errors import ErrorCode


@dataclass(frozen=True, slots=True, kw_only=True)
class DelayedProduce:
    request_id: int
    base_offset: Offset
    required_offset: int
    """Complete once the high watermark reaches this (the batch's last offset + 1)."""
    deadline_ms: int


@final
class DelayedProducePurgatory:
    """The acks=all produces of one partition waiting for the high watermark."""

    __slots__ = ("_waiting",)

    def __init__(self) -> None:
        self._waiting: dict[int, DelayedProduce] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    def __iter__(self) -> Iterator[DelayedProduce]:
        return iter(list(self._waiting.values()))

    def add(self, produce: DelayedProduce) -> None:
        assert produce.request_id not in self._waiting, f"duplicate request {produce.request_id}"
        self._waiting[produce.request_id] = produce

    def complete_reached(
        self, high_watermark: int, *, enough_replicas: bool, log_start_offset: int
    ) -> list[ProduceCompletion]:
        """Complete the produces whose batch is below ``high_watermark``."""
        done = [p for p in self._waiting.values() if p.required_offset <= high_watermark]
        error = ErrorCode.NONE if enough_replicas else ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return [self._complete(p, error, log_start_offset) for p in done]

    def recheck(
        self,
        high_watermark: int,
        *,
        maximal_isr_size: int,
        isr_size: int,
        min_isr: int,
        log_start_offset: int,
    ) -> list[ProduceCompletion]:
        """Complete what the high watermark reached (`complete_reached`); then, if the
        committed ISR is below ``min_isr``, fail every produce still waiting with
        NOT_ENOUGH_REPLICAS_AFTER_APPEND (see the module docstring)."""
        done = self.complete_reached(
            high_watermark,
            enough_replicas=maximal_isr_size >= min_isr,
            log_start_offset=Offset(log_start_offset),
        )
        if isr_size < min_isr and self._waiting:
            done += self.fail_all(
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                message=f"the ISR shrank below min.insync.replicas={min_isr}",
                log_start_offset=log_start_offset,
            )
        return done

    def fail_all(
        self, error: ErrorCode, *, message: str, log_start_offset: int
    ) -> list[ProduceCompletion]:
        """Complete every waiting produce with ``error``."""
        return [
            self._complete(p, error, log_start_offset, message)
            for p in list(self._waiting.values())
        ]

    def expire(self, now_ms: int, *, log_start_offset: int) -> list[ProduceCompletion]:
        """Complete the produces whose deadline is at or before ``now_ms`` (REQUEST_TIMED_OUT)."""
        late = [p for p in self._waiting.values() if p.deadline_ms <= now_ms]
        return [
            self._complete(
                p, ErrorCode.REQUEST_TIMED_OUT, log_start_offset, "timed out waiting for the ISR"
            )
            for p in late
        ]

    def next_deadline_ms(self) -> int | None:
        return min((p.deadline_ms for p in self._waiting.values()), default=None)

    def _complete(
        self, produce: DelayedProduce, error: ErrorCode, log_start_offset: int, message: str = ""
    ) -> ProduceCompletion:
        del self._waiting[produce.request_id]
        return ProduceCompletion(
            request_id=produce.request_id,
            error_code=error,
            error_message=message,
            # Kafka answers a failed produce with base offset -1.
            base_offset=produce.base_offset if error is ErrorCode.NONE else NO_OFFSET,
            log_start_offset=Offset(log_start_offset),
        )


__all__ = ["DelayedProduce", "DelayedProducePurgatory"]
