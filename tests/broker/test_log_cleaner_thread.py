"""The broker's log cleaner runs its passes in worker threads (``log.cleaner.threads``, as
Kafka's ``LogCleaner``): the event loop keeps serving while a pass maps and rewrites, the swap
is applied on the loop, and a pass whose log changed meanwhile is dropped, not applied."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from kraft.types import TopicPartition
from replication.broker.replicas.cleaner import LogCleaner
from storage.config import LogConfig
from storage.log import SegmentedLog
from storage.log_cleaner import CLEANED_SUFFIX, CleanJob, CleanOutput, run_clean
from storage.records import SimpleRecord, build_batch, iter_batches, record_tuples

NOW_MS = 1_000_000_000


class _Replica:
    """A replica as the cleaner sees it: its log, everything below the log end committed."""

    def __init__(self, log: SegmentedLog) -> None:
        self.log = log
        self.topic_partition = TopicPartition("t", 0)

    def prepare_compaction(self, now_ms: int, offset_map_bytes: int | None) -> CleanJob | None:
        return self.log.prepare_compaction(now_ms, self.log.log_end_offset, offset_map_bytes)

    def finish_compaction(self, job: CleanJob, output: CleanOutput | Exception) -> int:
        result = self.log.finish_compaction(job, output)
        return 0 if result is None else result.records_removed


def _open(path: Path) -> SegmentedLog:
    config = LogConfig.from_properties(
        {"cleanup.policy": "compact", "segment.bytes": "400", "min.cleanable.dirty.ratio": "0"}
    )
    log = SegmentedLog.open(path, config, clock_ms=lambda: NOW_MS)
    for i in range(60):
        _put(log, b"k%d" % (i % 5), b"v%d" % i)
    return log


def _put(log: SegmentedLog, key: bytes, value: bytes) -> None:
    log.append(
        build_batch([SimpleRecord(key=key, value=value, timestamp_ms=NOW_MS)], timestamp_ms=NOW_MS)
    )


def _records(log: SegmentedLog) -> list[tuple[int, bytes | None, bytes | None]]:
    out: list[tuple[int, bytes | None, bytes | None]] = []
    offset = 0
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        for pos, header in iter_batches(data):
            out += [(o, k, v) for o, _, k, v, _ in record_tuples(data, pos)]
            offset = header.next_offset
    return out


class _GatedRun:
    """The worker's step, held until the loop has done its part (`release`)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.started = asyncio.Event()
        self.released = threading.Event()
        self.threads: list[str] = []

    def __call__(self, job: CleanJob) -> CleanOutput:
        self.threads.append(threading.current_thread().name)
        self._loop.call_soon_threadsafe(self.started.set)
        # NB: were the pass on the loop, nothing could release it: this wait would time out.
        assert self.released.wait(timeout=30), "the event loop did not run during the pass"
        return run_clean(job)


def test_the_loop_keeps_serving_while_a_pass_runs_in_a_cleaner_thread(tmp_path: Path) -> None:
    log = _open(tmp_path)
    replica = _Replica(log)

    async def main() -> tuple[int, _GatedRun]:
        gate = _GatedRun(asyncio.get_running_loop())
        cleaner = LogCleaner(threads=1, dedupe_buffer_bytes=1 << 20, run=gate)
        try:
            pass_ = asyncio.create_task(cleaner.clean_once([replica], NOW_MS))
            await gate.started.wait()
            for i in range(60, 70):  # the loop serves appends while the worker holds the pass
                _put(log, b"k%d" % (i % 5), b"v%d" % i)
            gate.released.set()
            return await pass_, gate
        finally:
            cleaner.close()

    removed, gate = asyncio.run(main())
    assert removed > 0
    assert gate.threads and gate.threads[0].startswith("log-cleaner")
    records = _records(log)
    assert [r for r in records if r[0] >= 60] == [
        (i, b"k%d" % (i % 5), b"v%d" % i) for i in range(60, 70)
    ]
    assert len(records) < 70  # the swap was applied
    assert not list(tmp_path.glob("*" + CLEANED_SUFFIX))
    log.close()


def test_a_pass_whose_log_was_truncated_meanwhile_is_dropped(tmp_path: Path) -> None:
    log = _open(tmp_path)
    replica = _Replica(log)

    async def main() -> int:
        gate = _GatedRun(asyncio.get_running_loop())
        cleaner = LogCleaner(threads=1, dedupe_buffer_bytes=1 << 20, run=gate)
        try:
            pass_ = asyncio.create_task(cleaner.clean_once([replica], NOW_MS))
            await gate.started.wait()
            log.truncate_fully_and_start_at(0)  # e.g. a follower reset to its leader's log
            for i in range(30):
                _put(log, b"x", b"w%d" % i)
            gate.released.set()
            return await pass_
        finally:
            cleaner.close()

    assert asyncio.run(main()) == 0
    assert _records(log) == [(i, b"x", b"w%d" % i) for i in range(30)]
    assert not list(tmp_path.glob("*" + CLEANED_SUFFIX))
    assert log.failed is None
    log.close()
