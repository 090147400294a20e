"""The consumer's preferred read replicas (KIP-392): where it fetches each partition from.

A consumer with ``client.rack`` sends it in every Fetch; a leader whose broker has a
``replica.selector.class`` may answer with no records and ``preferred_read_replica`` set: the
follower in the consumer's rack. The consumer then fetches that partition from it until, as
Kafka's consumer does (``SubscriptionState.preferredReadReplica``):

- ``metadata.max.age.ms`` has passed since the leader named it (then it asks the leader again,
  which may name another);
- a fetch from it failed, or answered the partition with an error (OFFSET_OUT_OF_RANGE from a
  follower that has not caught up to the position included: the position is kept, and the
  next fetch goes to the leader instead of resetting it);
- it is missing from the metadata (gone, or fenced).
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass

from kraft.types import TopicPartition


@dataclass(frozen=True, slots=True)
class _Preferred:
    broker_id: int
    expires_ms: int


class PreferredReadReplicas:
    """Per partition, the replica to fetch from instead of its leader, and until when."""

    def __init__(self, max_age_ms: int) -> None:
        self._max_age_ms = max_age_ms
        self._preferred: dict[TopicPartition, _Preferred] = {}

    def node_for(self, tp: TopicPartition, leader: int, now_ms: int, known: Container[int]) -> int:
        """The broker to fetch ``tp`` from: its preferred read replica while valid, else its
        leader."""
        preferred = self._preferred.get(tp)
        if preferred is None:
            return leader
        if now_ms >= preferred.expires_ms or preferred.broker_id not in known:
            del self._preferred[tp]
            return leader
        return preferred.broker_id

    def update(self, tp: TopicPartition, broker_id: int, now_ms: int) -> None:
        """The leader named ``broker_id`` for ``tp`` (a negative id names none)."""
        if broker_id >= 0:
            self._preferred[tp] = _Preferred(broker_id, now_ms + self._max_age_ms)

    def clear(self, tp: TopicPartition) -> bool:
        """Back to the leader for ``tp``; whether a preferred replica was set."""
        return self._preferred.pop(tp, None) is not None

    def clear_broker(self, broker_id: int) -> None:
        """A fetch from ``broker_id`` failed: every partition read there goes to its leader."""
        for tp in [tp for tp, p in self._preferred.items() if p.broker_id == broker_id]:
            del self._preferred[tp]

    def get(self, tp: TopicPartition) -> int | None:
        """The preferred read replica of ``tp`` (expired or not), or None."""
        preferred = self._preferred.get(tp)
        return None if preferred is None else preferred.broker_id


__all__ = ["PreferredReadReplicas"]
