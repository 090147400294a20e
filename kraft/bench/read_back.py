"""`read_topic`: every value of a topic, from its start to its end (the final read of a loss
check: ``kraft compare``'s checker, ``kraft bench host-faults``)."""

from __future__ import annotations

import time


def read_topic(bootstrap: str, topic: str, partitions: int, timeout_s: float = 60.0) -> list[bytes]:
    """Every value of ``topic``, read from the beginning to the high watermark of each
    partition (the final read of a loss check)."""
    from kraft import Consumer, TopicPartition

    tps = [TopicPartition(topic, p) for p in range(partitions)]
    values: list[bytes] = []
    consumer = Consumer(bootstrap, auto_offset_reset="earliest", max_poll_records=5000)
    try:
        consumer.assign(tps)
        consumer.seek_to_beginning(tps)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            values.extend(r.value or b"" for r in consumer.poll(timeout=0.5))
            ends = [consumer.highwater(tp) for tp in tps]
            if all(e is not None for e in ends) and all(
                consumer.position(tp, timeout=5) >= (e or 0)
                for tp, e in zip(tps, ends, strict=True)
            ):
                return values
        raise TimeoutError(f"could not read {topic} to its end within {timeout_s:.0f}s")
    finally:
        consumer.close()


__all__ = ["read_topic"]
