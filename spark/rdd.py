"""`topic_rdd`: a partition-aware RDD, one Spark partition per `OffsetRange`.

::

    import spark as kraft_spark

    ranges = kraft_spark.offset_ranges(bootstrap, [("events", "earliest", "latest")])
    rdd = kraft_spark.topic_rdd(sc, bootstrap, ranges)
    rdd.map(lambda r: len(r.value or b"")).sum()

Each element is a `TopicRecord` ``(topic, partition, offset, key, value, timestamp_ms,
headers)``. The ranges are parallelised one per slice, so Spark partition ``i`` is range
``i``; its task fetches exactly ``[from_offset, until_offset)`` from the partition's leader
(`RangeFetcher`), or with ``client_rack`` from an in-sync replica in that rack (KIP-392).
Python tasks have no preferred locations, so "partition-aware" means the split, not placement.

For DataFrames the data source (``format("kraft")``) is much faster: it hands Spark Arrow
batches, where an RDD of tuples pays Python-to-JVM row conversion.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from spark.fetcher import RangeFetcher, TopicRecord
from spark.offsets import OffsetRange


def topic_rdd(
    sc: Any,
    bootstrap: str,
    offset_ranges: Sequence[OffsetRange],
    *,
    fail_on_data_loss: bool = True,
    client_rack: str = "",
) -> Any:
    """An RDD of the records in ``offset_ranges``, one Spark partition per range.

    Args:
        sc: the `pyspark.SparkContext`.
        bootstrap: ``host:port,...`` of (some of) the brokers.
        fail_on_data_loss: a range below the log start offset fails its task with
            `OffsetOutOfRangeError` (else its lost offsets are skipped with a warning).
        client_rack: the executors' rack (``client.rack``, KIP-392): each task reads from an
            in-sync replica there when one exists (else from the leader).

    Returns:
        ``pyspark.RDD[TopicRecord]``.
    """
    ranges = list(offset_ranges)
    for r in ranges:
        if not isinstance(r, OffsetRange):
            raise TypeError(f"offset_ranges must hold OffsetRange values, not {r!r}")

    if not ranges:
        return sc.emptyRDD()

    def read(index: int, _: Iterator[int]) -> Iterator[TopicRecord]:
        with RangeFetcher(
            bootstrap, fail_on_data_loss=fail_on_data_loss, client_rack=client_rack
        ) as fetcher:
            yield from fetcher.records(ranges[index])

    # NB: parallelize with one slice per element puts element i in partition i; the closure
    # carries the ranges, so the task reads its own range by index.
    return sc.parallelize(range(len(ranges)), len(ranges)).mapPartitionsWithIndex(read)


__all__ = ["topic_rdd"]
