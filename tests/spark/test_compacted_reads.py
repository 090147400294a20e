"""Spark's readers across compaction gaps: ``failOnDataLoss`` must not fire when a compacted
log has no records at some offsets (a known false alarm of Spark's own Kafka source). kraft's
cleaner keeps every batch's offsets (an emptied batch stays as an empty batch), so a fetch never
starts past the requested offset; the readers skip the missing offsets inside batches."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from replication.messages import BrokerFetchResponse, FetchPartitionData, FetchTopicResponse
from spark.fetcher import RangeFetcher
from spark.offsets import OffsetRange
from storage.config import LogConfig
from storage.log import SegmentedLog
from storage.records import SimpleRecord, build_batch, iter_batches, record_tuples
from tests.spark.test_planning import FakeNetwork

pytest.importorskip("pyarrow")

NOW_MS = 1_000_000
TOMBSTONE_MS = NOW_MS - 5


class LogNetwork(FakeNetwork):
    """A broker leading ``t-0`` whose Fetch reads a real `SegmentedLog`, as the broker does."""

    def __init__(self, log: SegmentedLog, max_bytes: int) -> None:
        super().__init__([], log.log_start_offset, log.log_end_offset)
        self.log = log
        self.max_bytes = max_bytes

    def call_async(
        self, address: str, method: str, request: Any, cls: Any, on_done: Any, **_: Any
    ) -> None:
        offset = request.topics[0].partitions[0].fetch_offset
        self.fetched.append(offset)
        records = self.log.read(offset, self.max_bytes, max_offset=self.high_watermark)
        part = FetchPartitionData(
            partition_index=0,
            high_watermark=self.high_watermark,
            log_start_offset=self.log_start_offset,
            records=records,
        )
        on_done(
            BrokerFetchResponse(responses=(FetchTopicResponse(topic="t", partitions=(part,)),)),
            None,
        )


def _compacted_log(path: Path) -> tuple[SegmentedLog, list[int]]:
    config = LogConfig.from_properties(
        {"cleanup.policy": "compact", "segment.bytes": "500", "min.cleanable.dirty.ratio": "0"}
    )
    log = SegmentedLog.open(path, config, clock_ms=lambda: NOW_MS)
    tombstone = SimpleRecord(key=b"gone", value=None, timestamp_ms=TOMBSTONE_MS)
    log.append(build_batch([tombstone], timestamp_ms=TOMBSTONE_MS))  # kept, its horizon set
    for i in range(120):
        records = [SimpleRecord(key=b"k%d" % ((i * 3 + j) % 7), value=b"v%d" % i) for j in range(3)]
        log.append(build_batch(records, timestamp_ms=NOW_MS))
    assert log.compact(NOW_MS, high_watermark=log.log_end_offset) is not None
    survivors = []
    offset = 0
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        for pos, header in iter_batches(data):
            survivors += [o for o, *_ in record_tuples(data, pos)]
            offset = header.next_offset
    assert len(survivors) < log.log_end_offset / 2, "the log has gaps"
    return log, survivors


@pytest.mark.parametrize("max_bytes", [300, 1 << 20])
def test_spark_ranges_read_across_compaction_gaps_without_data_loss(
    tmp_path: Path, max_bytes: int
) -> None:
    log, survivors = _compacted_log(tmp_path)
    network = LogNetwork(log, max_bytes)
    end = log.log_end_offset
    ranges = [(0, end), (1, 50), (7, 8), (100, end - 3), (end - 1, end)]
    with RangeFetcher("fake:1", network=network, fail_on_data_loss=True) as fetcher:  # type: ignore[arg-type]
        for start, until in ranges:
            r = OffsetRange("t", 0, start, until)
            want = [o for o in survivors if start <= o < until]
            assert [rec.offset for rec in fetcher.records(r)] == want
            arrow = list(fetcher.arrow_batches(r, include_headers=False))
            assert [o for b in arrow for o in b.column("offset").to_pylist()] == want
            # offset 0's batch holds KIP-534's delete horizon as its base timestamp: each
            # record still reads as its own timestamp
            times = [round(t.timestamp() * 1000) for b in arrow for t in b["timestamp"].to_pylist()]
            assert times == [TOMBSTONE_MS if o == 0 else NOW_MS for o in want]
    log.close()
