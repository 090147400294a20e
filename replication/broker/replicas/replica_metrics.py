"""The event counters of one broker replica (`kraft.metrics`): Kafka's
``BrokerTopicMetrics`` MessagesInPerSec / BytesInPerSec per topic, counted when a produce is
acknowledged, and ``ReplicaManager`` IsrShrinksPerSec / IsrExpandsPerSec, counted when the
controller accepts the leader's ISR change; and BytesOutPerSec per topic, the record bytes this
broker sent to consumers (`consumer_bytes_out`: with KIP-392 a follower's count too)."""

from __future__ import annotations

from collections.abc import Set
from typing import final

from kraft.metrics import counter
from kraft.metrics.kafka import BYTES_IN, BYTES_OUT, ISR_EXPANDS, ISR_SHRINKS, MESSAGES_IN
from storage.records import BATCH_HEADER_SIZE, read_header


@final
class ReplicaMetrics:
    __slots__ = ("_bytes_in", "_expands", "_messages_in", "_shrinks")

    def __init__(self, topic: str) -> None:
        self._messages_in = counter(MESSAGES_IN, "records acknowledged, per topic", ("topic",))
        self._messages_in = self._messages_in.labels(topic)
        self._bytes_in = counter(BYTES_IN, "bytes acknowledged, per topic", ("topic",))
        self._bytes_in = self._bytes_in.labels(topic)
        self._shrinks = counter(ISR_SHRINKS, "ISR shrinks this broker's leaders committed")
        self._expands = counter(ISR_EXPANDS, "ISR expands this broker's leaders committed")

    def produced(self, records: bytes) -> None:
        """A produced batch was acknowledged."""
        self._bytes_in.inc(len(records))
        if len(records) >= BATCH_HEADER_SIZE:
            self._messages_in.inc(read_header(records).record_count)

    def isr_changed(self, before: Set[int], after: Set[int]) -> None:
        """The leader's ISR went from ``before`` to ``after`` (equal: no change)."""
        if after < before:
            self._shrinks.inc()
        elif after > before:
            self._expands.inc()


def consumer_bytes_out(topic: str, size: int) -> None:
    """``size`` record bytes of ``topic`` went to a consumer (not to a follower: Kafka counts
    those as ReplicationBytesOut)."""
    if size:
        counter(BYTES_OUT, "record bytes sent to consumers, per topic", ("topic",)).labels(
            topic
        ).inc(size)
