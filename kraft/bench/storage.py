"""Storage benchmark: `SegmentedLog` append and read throughput beside raw ``os.write`` /
``os.read`` of the same bytes on the same disk, measured in the same run.

Cases (16 KiB batches of 100-byte records, prebuilt with ``build_batch``):

- append without fsync: ``log.append(batch)`` per batch vs ``os.write(fd, batch)`` per batch;
- append with fdatasync per append (``sync_every_append``) vs ``os.write`` + ``os.fdatasync``
  per batch (and, for reference, + ``os.fsync``);
- sequential read in ~1 MiB reads: ``log.read(offset, 1 MiB)`` vs ``os.read(fd, 1 MiB)``.

The no-fsync append is measured in short paired blocks (``--block-batches`` batches of raw
``os.write``, then as many ``log.append``, the order alternating). Its ``ratio`` is the
median of the per-block ratios raw/log (with their quartiles): load that changes over seconds
hits both sides of a pair alike. ``ratio_fastest_blocks`` is the fastest raw block over the
fastest log block (``timeit``'s minimum), the median over rounds. On a machine shared with
other work, whole-run medians swung 0.55-0.86 between runs; at load 10 the paired median
stayed within 0.69-0.73, while at load 25 nothing here is steady (read the quartiles).
``cpu_ratio`` is the same comparison in this thread's CPU time per batch (user and system,
``raw_cpu_us`` / ``kraft_cpu_us``, medians over rounds): waits for a core drop out of it.
The other figures are the median of ``rounds`` interleaved runs. Reads are measured warm
(both files read once first); if ``/proc/sys/vm/drop_caches`` is writable, "cold" reads are
measured too, dropping the page cache before each pass (NB: on a VM the host may still cache
the disk).

Usage: ``kraft bench storage [--total-mb 256] [--synced-mb 32] [--block-batches 256] [--json]``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kraft.arguments import ArgumentParser, positive_int
from storage.config import LogConfig
from storage.log import SegmentedLog
from storage.records import build_batch

_MB = 1_000_000
_READ_BYTES = 1 << 20


def make_batch(batch_bytes: int, record_bytes: int = 100) -> bytes:
    """One v2 batch of ``record_bytes``-byte records, as close to ``batch_bytes`` as fits."""
    per_record = len(build_batch([b"x" * record_bytes] * 2, timestamp_ms=0)) - len(
        build_batch([b"x" * record_bytes], timestamp_ms=0)
    )
    count = max(1, (batch_bytes - 61) // per_record)
    return build_batch([b"x" * record_bytes] * count, timestamp_ms=int(time.time() * 1000))


def _timed(fn: Callable[[], int]) -> tuple[float, int]:
    start = time.perf_counter()
    n = fn()
    return time.perf_counter() - start, n


def _raw_append(path: Path, batch: bytes, count: int, sync: Callable[[int], None] | None) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
    try:

        def loop() -> int:
            for _ in range(count):
                os.write(fd, batch)
                if sync is not None:
                    sync(fd)
            return count

        return _timed(loop)[0]
    finally:
        os.close(fd)


def _log_append(directory: Path, batch: bytes, count: int, *, synced: bool) -> float:
    log = SegmentedLog.open(directory, LogConfig(sync_every_append=synced))
    try:

        def loop() -> int:
            append = log.append
            for _ in range(count):
                append(batch)
            return count

        return _timed(loop)[0]
    finally:
        log.close()


def _paired_appends(
    raw_path: Path, log_dir: Path, batch: bytes, count: int, block: int
) -> tuple[float, float, list[float], float, tuple[float, float]]:
    """Append ``count`` batches to a raw file and to a log in alternating blocks of ``block``
    batches (raw first in even blocks, the log first in odd ones). Returns the total raw and
    log seconds, each block's ratio raw/log, the ratio of the fastest full blocks, and the
    raw and log CPU seconds (this thread's, user and system)."""
    fd = os.open(raw_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
    log = SegmentedLog.open(log_dir, LogConfig())
    append, write, clock, cpu = log.append, os.write, time.perf_counter, time.thread_time
    raw_total, log_total, ratios, raw_best, log_best = 0.0, 0.0, [], math.inf, math.inf
    raw_cpu, log_cpu = 0.0, 0.0
    try:
        done, i = 0, 0
        while done < count:
            n = min(block, count - done)
            for side in ("raw", "log") if i % 2 == 0 else ("log", "raw"):
                start, start_cpu = clock(), cpu()
                if side == "raw":
                    for _ in range(n):
                        write(fd, batch)
                    raw_s = clock() - start
                    raw_cpu += cpu() - start_cpu
                else:
                    for _ in range(n):
                        append(batch)
                    log_s = clock() - start
                    log_cpu += cpu() - start_cpu
            raw_total, log_total = raw_total + raw_s, log_total + log_s
            ratios.append(raw_s / log_s)
            if n == block:
                raw_best, log_best = min(raw_best, raw_s), min(log_best, log_s)
            done, i = done + n, i + 1
    finally:
        os.close(fd)
        log.close()
    return raw_total, log_total, ratios, raw_best / log_best, (raw_cpu, log_cpu)


def _raw_read(path: Path) -> tuple[float, int]:
    fd = os.open(path, os.O_RDONLY)
    try:

        def loop() -> int:
            total = 0
            while chunk := os.read(fd, _READ_BYTES):
                total += len(chunk)
            return total

        return _timed(loop)
    finally:
        os.close(fd)


def _log_read(directory: Path) -> tuple[float, int]:
    log = SegmentedLog.open(directory)
    try:

        def loop() -> int:
            total, offset, end = 0, log.log_start_offset, log.log_end_offset
            read = log.read
            while offset < end:
                data = read(offset, _READ_BYTES)
                total += len(data)
                # the next offset is one past the last batch: its header is in the data
                last = _last_batch_next_offset(data)
                offset = last
            return total

        return _timed(loop)
    finally:
        log.close()


def _last_batch_next_offset(data: bytes) -> int:
    from storage.segment import parse_header

    pos, nxt = 0, 0
    while pos < len(data):
        h = parse_header(data, pos)
        nxt = h[0] + h[6] + 1
        pos += h[1] + 12
    return nxt


def _drop_page_cache() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def _figure(kraft_s: float, raw_s: float, nbytes: int, batches: int) -> dict[str, float]:
    return {
        "kraft_mb_s": round(nbytes / kraft_s / _MB, 1),
        "raw_mb_s": round(nbytes / raw_s / _MB, 1),
        "kraft_batches_s": round(batches / kraft_s, 1),
        "raw_batches_s": round(batches / raw_s, 1),
        "ratio": round(raw_s / kraft_s, 3),
    }


def run(
    directory: str | Path,
    total_mb: int = 256,
    batch_bytes: int = 16384,
    *,
    synced_mb: int = 32,
    rounds: int = 3,
    block_batches: int = 256,
) -> dict[str, Any]:
    """Run every case in ``directory`` (created; its contents are removed afterwards).

    Returns a dict of figures: for each case kraft's and the raw MB/s and batches/s and the
    ratio kraft/raw (1.0 = as fast as raw).
    """
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    batch = make_batch(batch_bytes)
    count = max(1, total_mb * _MB // len(batch))
    synced_count = max(1, synced_mb * _MB // len(batch))
    raw_file, log_dir = root / "raw.bin", root / "log"
    result: dict[str, Any] = {
        "batch_bytes": len(batch),
        "records_per_batch": len(batch) // 108,
        "appended_mb": round(count * len(batch) / _MB, 1),
        "rounds": rounds,
    }
    try:
        raw_times, log_times, ratios, best = [], [], [], []
        raw_cpu, log_cpu = [], []
        for _ in range(rounds):  # interleaved, so page-cache writeback hits both alike
            shutil.rmtree(log_dir, ignore_errors=True)
            raw_s, log_s, block_ratios, best_ratio, (raw_c, log_c) = _paired_appends(
                raw_file, log_dir, batch, count, block_batches
            )
            raw_times.append(raw_s)
            log_times.append(log_s)
            ratios.extend(block_ratios)
            best.append(best_ratio)
            raw_cpu.append(raw_c)
            log_cpu.append(log_c)
        result["append"] = _figure(
            statistics.median(log_times), statistics.median(raw_times), count * len(batch), count
        )
        # the fastest blocks' ratio, and the median of the paired blocks' ratios (see above)
        result["append"]["ratio"] = round(statistics.median(ratios), 3)
        result["append"]["ratio_fastest_blocks"] = round(statistics.median(best), 3)
        quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
        result["append"]["ratio_quartiles"] = [round(quartiles[0], 3), round(quartiles[2], 3)]
        result["append"]["blocks"] = len(ratios)
        # CPU per batch (this thread, user + system): what an append costs whatever share of
        # the cores the run got; raw_cpu_us / kraft_cpu_us is the ratio without the waits
        raw_cpu_us = statistics.median(raw_cpu) / count * 1e6
        log_cpu_us = statistics.median(log_cpu) / count * 1e6
        result["append"]["raw_cpu_us"] = round(raw_cpu_us, 2)
        result["append"]["kraft_cpu_us"] = round(log_cpu_us, 2)
        result["append"]["cpu_ratio"] = round(raw_cpu_us / log_cpu_us, 3)

        synced_dir = root / "synced"
        raw_synced = _raw_append(root / "raw-synced.bin", batch, synced_count, os.fdatasync)
        raw_fsync = _raw_append(root / "raw-fsync.bin", batch, synced_count, os.fsync)
        log_synced = _log_append(synced_dir, batch, synced_count, synced=True)
        synced = _figure(log_synced, raw_synced, synced_count * len(batch), synced_count)
        synced["raw_fsync_batches_s"] = round(synced_count / raw_fsync, 1)
        result["append_fdatasync_each"] = synced

        _raw_read(raw_file)  # warm both
        _log_read(log_dir)
        raw_reads, log_reads = [], []
        nbytes = 0
        for _ in range(rounds):
            t, nbytes = _raw_read(raw_file)
            raw_reads.append(t)
            t, n = _log_read(log_dir)
            assert n == nbytes, (n, nbytes)
            log_reads.append(t)
        reads = nbytes // _READ_BYTES + 1
        result["read_warm"] = _figure(
            statistics.median(log_reads), statistics.median(raw_reads), nbytes, reads
        )
        if _drop_page_cache():
            raw_cold, log_cold = [], []
            for i in range(rounds):  # alternate which side goes first
                for side in ("raw", "log") if i % 2 == 0 else ("log", "raw"):
                    _drop_page_cache()
                    if side == "raw":
                        raw_cold.append(_raw_read(raw_file)[0])
                    else:
                        log_cold.append(_log_read(log_dir)[0])
            result["read_cold"] = _figure(
                statistics.median(log_cold), statistics.median(raw_cold), nbytes, reads
            )
        result["page_cache_dropped"] = "read_cold" in result
    finally:
        for child in ("raw.bin", "raw-synced.bin", "raw-fsync.bin"):
            (root / child).unlink(missing_ok=True)
        for child in ("log", "synced"):
            shutil.rmtree(root / child, ignore_errors=True)
    return result


def _print_table(result: dict[str, Any]) -> None:
    print(
        f"batch {result['batch_bytes']} B, {result['appended_mb']} MB appended, "
        f"median of {result['rounds']} rounds"
    )
    columns = ("kraft MB/s", "raw MB/s", "kraft b/s", "raw b/s")
    print(f"{'case':<24}" + "".join(f"{c:>12}" for c in columns) + f"{'ratio':>8}")
    for case in ("append", "append_fdatasync_each", "read_warm", "read_cold"):
        if case not in result:
            continue
        f = result[case]
        print(
            f"{case:<24}{f['kraft_mb_s']:>12}{f['raw_mb_s']:>12}"
            f"{f['kraft_batches_s']:>12}{f['raw_batches_s']:>12}{f['ratio']:>8}"
        )
    if "ratio_quartiles" in result["append"]:
        low, high = result["append"]["ratio_quartiles"]
        print(
            f"(append ratio: median of {result['append']['blocks']} paired blocks, quartiles "
            f"{low}-{high}; fastest blocks {result['append']['ratio_fastest_blocks']})"
        )
    if "cpu_ratio" in result["append"]:
        a = result["append"]
        print(
            f"(append CPU per batch: kraft {a['kraft_cpu_us']} us, raw {a['raw_cpu_us']} us, "
            f"ratio {a['cpu_ratio']})"
        )
    if "append_fdatasync_each" in result:
        fsyncs = result["append_fdatasync_each"]["raw_fsync_batches_s"]
        print(f"(raw os.write + fsync each: {fsyncs} batches/s)")
    if not result["page_cache_dropped"]:
        print("(page cache could not be dropped: reads are warm on both sides)")


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dir", default=None, help="directory to write in (default: temp dir)")
    parser.add_argument(
        "--total-mb", type=positive_int, default=256, help="MB to append without fsync"
    )
    parser.add_argument(
        "--synced-mb", type=positive_int, default=32, help="MB to append with fsync each"
    )
    parser.add_argument("--batch-bytes", type=positive_int, default=16384)
    parser.add_argument("--rounds", type=positive_int, default=3)
    parser.add_argument(
        "--block-batches",
        type=positive_int,
        default=256,
        help="batches per paired block of the no-fsync append (see the docstring)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    from kraft.logs import configure_logging

    configure_logging("warning")  # keep stdout for the figures (and --json)
    base = args.dir or tempfile.mkdtemp(prefix="kraft-bench-")
    try:
        result = run(
            Path(base) / "bench",
            args.total_mb,
            args.batch_bytes,
            synced_mb=args.synced_mb,
            rounds=args.rounds,
            block_batches=args.block_batches,
        )
    finally:
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)
    if args.json:
        print(json.dumps(result))
    else:
        _print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
