"""Cleaner stall benchmark: how long the event loop stalls while a log-cleaner pass runs on
the loop (`SegmentedLog.compact`) and in a cleaner thread (`LogCleaner`, the broker's way).

One compacted log of ``--records`` keyed records over ``--keys`` keys (100-byte values,
``--batch`` records per batch, 1 MiB segments) is built twice; for each, a ticker task on the
loop sleeps 1 ms at a time and records the longest gap between its wake-ups while the pass
runs, and how many times it woke up (how much the loop got done); ``idle`` is the same ticker
with no pass, for as long as the thread's pass took (the machine's own noise). The thread's
figure is
bounded by the interpreter's GIL switch interval (``sys.getswitchinterval()``, 5 ms) plus
the swap the loop applies at the end (renames, fsyncs, the rebuilt indexes).

Usage: ``python -m kraft.bench.cleaner_stall [--records 200000] [--keys 20000] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from kraft.types import TopicPartition
from replication.broker.replicas.cleaner import LogCleaner
from storage.config import LogConfig
from storage.log import SegmentedLog
from storage.log_cleaner import CleanJob, CleanOutput
from storage.records import SimpleRecord, build_batch

NOW_MS = 1_000_000_000


def _build(path: Path, records: int, keys: int, batch: int) -> SegmentedLog:
    config = LogConfig.from_properties({"cleanup.policy": "compact", "segment.bytes": str(1 << 20)})
    log = SegmentedLog.open(path, config, clock_ms=lambda: NOW_MS)
    value = b"v" * 100
    for start in range(0, records, batch):
        log.append(
            build_batch(
                [
                    SimpleRecord(key=b"key-%d" % (i % keys), value=value, timestamp_ms=NOW_MS)
                    for i in range(start, min(start + batch, records))
                ],
                timestamp_ms=NOW_MS,
            )
        )
    return log


class _Replica:
    def __init__(self, log: SegmentedLog) -> None:
        self.log = log
        self.topic_partition = TopicPartition("bench", 0)

    def prepare_compaction(self, now_ms: int, offset_map_bytes: int | None) -> CleanJob | None:
        return self.log.prepare_compaction(now_ms, self.log.log_end_offset, offset_map_bytes)

    def finish_compaction(self, job: CleanJob, output: CleanOutput | Exception) -> int:
        result = self.log.finish_compaction(job, output)
        return 0 if result is None else result.records_removed


async def _measure(clean: Callable[[], Awaitable[int]]) -> dict[str, float]:
    done = False
    longest = 0.0
    wakeups = 0

    async def ticker() -> None:
        nonlocal longest, wakeups
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            longest = max(longest, now - last)
            wakeups += 1
            last = now

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    started = time.perf_counter()
    removed = await clean()
    elapsed = time.perf_counter() - started
    done = True
    await task
    return {
        "pass_s": round(elapsed, 3),
        "longest_stall_ms": round(longest * 1000, 1),
        "loop_wakeups": wakeups,
        "records_removed": removed,
    }


def run(records: int, keys: int, batch: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    root = Path(tempfile.mkdtemp(prefix="kraft-cleaner-stall-"))
    try:
        on_loop = _build(root / "loop", records, keys, batch)

        async def clean_on_loop() -> int:
            result = on_loop.compact(NOW_MS, high_watermark=on_loop.log_end_offset)
            return 0 if result is None else result.records_removed

        out["on_loop"] = asyncio.run(_measure(clean_on_loop))
        on_loop.close()
        threaded = _build(root / "thread", records, keys, batch)

        async def clean_in_thread() -> int:
            cleaner = LogCleaner(threads=1)
            try:
                return await cleaner.clean_once([_Replica(threaded)], NOW_MS)
            finally:
                cleaner.close()

        out["in_thread"] = asyncio.run(_measure(clean_in_thread))
        threaded.close()

        async def idle() -> int:  # the machine's own noise, for as long as the thread's pass
            await asyncio.sleep(out["in_thread"]["pass_s"])
            return 0

        out["idle"] = asyncio.run(_measure(idle))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kraft.bench.cleaner_stall")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.records, args.keys, args.batch)
    if args.json:
        print(json.dumps(result))
    else:
        for mode, figures in result.items():
            print(mode, " ".join(f"{k}={v}" for k, v in figures.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
