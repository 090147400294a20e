"""``kraft bench consume --batch``: `Consumer.poll_batch` (Arrow, no Python object per record)
beside ``poll()`` over the same records in the same run.

Each run assigns every partition, seeks to the beginning and reads until N records came,
checking that every partition's offsets arrive in order without a gap or a repeat (so a figure
counts only records really read back); latency is the duration of each call that returned
records, as for ``poll()``.
"""

from __future__ import annotations

import time
from typing import Any

from kraft.bench import BenchError
from kraft.bench.cpu import _thread_cpu_s
from kraft.bench.produce_consume import PARTITIONS, _figures


def import_arrow() -> None:
    """Import what ``poll_batch`` and this harness use (pyarrow, its compute functions,
    numpy, the decoder): about a second of CPU, once per process, kept out of the timing.
    The harness's offset check compares with Python integers, which pyarrow converts after
    asking pandas (installed or not) whether they are pandas objects: one such call here."""
    import pyarrow.compute as pc

    import storage.columnar.schema
    import storage.columnar.vectorized  # noqa: F401

    pc.equal(0, 0)


def consume_arrow(
    bootstrap: str, topic: str, records: int, max_records: int, *, fetch_max_wait_ms: int = 500
) -> dict[str, Any]:
    """Read ``records`` records of ``topic`` from the beginning with ``poll_batch``."""
    import pyarrow.compute as pc

    from kraft import Consumer, TopicPartition

    consumer = Consumer(
        bootstrap,
        auto_offset_reset="earliest",
        max_poll_records=max_records,
        fetch_max_wait_ms=fetch_max_wait_ms,
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(tps)
        got = 0
        payload = 0
        polls_ms: list[float] = []
        next_offset = dict.fromkeys(range(PARTITIONS), 0)
        clock = time.perf_counter
        start = clock()
        deadline = time.monotonic() + 120
        while got < records:
            t0 = clock()
            batch = consumer.poll_batch(1.0, max_records)
            if batch.num_rows:
                polls_ms.append((clock() - t0) * 1000.0)
                got += batch.num_rows
                payload += pc.sum(pc.binary_length(batch.column("value"))).as_py() or 0
                _check_offsets(batch, next_offset)
            elif time.monotonic() > deadline:
                raise BenchError(f"consumed {got} of {records} records within 120 s")
        seconds = clock() - start
        threads = _thread_cpu_s()  # before close: its threads end with it
    finally:
        consumer.close()
    out = _figures(got, 1, seconds, polls_ms)
    out["mb_per_s"] = round(payload / max(seconds, 1e-9) / 1e6, 3)
    size = payload / got if got else 0.0
    out |= {"polls": len(polls_ms), "value_bytes": payload, "record_size": round(size, 1)}
    out["_threads_at_end"] = threads
    return out


def _check_offsets(batch: Any, next_offset: dict[int, int]) -> None:
    """Each partition's offsets in ``batch`` follow on from the last ones, one apart (the
    bench's topic has no control batches or compaction)."""
    import pyarrow.compute as pc

    partitions = batch.column("partition")
    offsets = batch.column("offset")
    for p in pc.unique(partitions).to_pylist():
        mine = pc.filter(offsets, pc.equal(partitions, p)).to_numpy()
        want = next_offset[p]
        if mine[0] != want or (len(mine) > 1 and not (mine[1:] - mine[:-1] == 1).all()):
            raise BenchError(f"partition {p}: offsets from {mine[0]} where {want} was next")
        next_offset[p] = int(mine[-1]) + 1


__all__ = ["consume_arrow", "import_arrow"]
