"""The storage demo (``python -m kraft.demo --storage``): a torn log survives recovery.

A child process writes records into a segmented log, flushing every few batches, and is killed
with SIGKILL in the middle of writing. We then cut its last segment in the middle of the last
(unflushed) batch, as a power cut can, look at the files with ``kraft dump-log``, reopen the
log (recovery validates every batch past the recovery point and cuts the torn tail), and check
that every flushed record is there, in order, with contiguous offsets.

    python -m kraft.demo --storage [--records 400000] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RECORD_BYTES = 100
BATCH_RECORDS = 500
FLUSH_EVERY_BATCHES = 40


def _value(i: int) -> bytes:
    return f"record-{i:010d}".encode().ljust(RECORD_BYTES, b".")


def _config() -> object:
    from storage.config import LogConfig

    return LogConfig(segment_bytes=4 << 20)


def write(directory: str, records: int) -> None:
    """The child: append batches forever-ish, report each flush on stdout."""
    from storage.log import SegmentedLog
    from storage.records import build_batch

    log = SegmentedLog.open(directory, config=_config())  # type: ignore[arg-type]
    i = 0
    batches = 0
    while i < records:
        batch = build_batch(
            [_value(n) for n in range(i, i + BATCH_RECORDS)], timestamp_ms=int(time.time() * 1000)
        )
        log.append(batch, leader_epoch=0)
        i += BATCH_RECORDS
        batches += 1
        if batches % FLUSH_EVERY_BATCHES == 0:
            log.flush()
            print(f"flushed {log.log_end_offset}", flush=True)
    print("done", flush=True)
    time.sleep(60)  # wait to be killed


def _dump_tail(segment: Path, lines: int) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "kraft.cli", "dump-log", str(segment)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return [out[0], "  ...", *out[-lines:]]


def run(data_dir: Path, records: int) -> int:
    from storage.log import SegmentedLog
    from storage.records import iter_batches, iter_records

    log_dir = data_dir / "log"
    print(f"kraft storage demo: {records:,} records of {RECORD_BYTES} bytes into {log_dir}")
    print(f"  batches of {BATCH_RECORDS} records, flush every {FLUSH_EVERY_BATCHES} batches")
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kraft.demo.storage_crash",
            "--writer",
            str(log_dir),
            "--records",
            str(records),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    flushed = 0
    started = time.monotonic()
    assert child.stdout is not None
    for line in child.stdout:
        if line.startswith("flushed"):
            flushed = int(line.split()[1])
            if flushed >= records // 2:
                break
    time.sleep(0.05)  # let it get some unflushed batches in
    child.kill()
    child.wait()
    elapsed = time.monotonic() - started
    segments = sorted(log_dir.glob("*.log"))
    size = sum(p.stat().st_size for p in segments)
    print(
        f"\n1. killed the writer with SIGKILL after {elapsed:.2f}s: {len(segments)} segments, "
        f"{size / 1e6:.1f} MB on disk; last flush covered offsets [0, {flushed:,})"
    )

    last = segments[-1]
    data = last.read_bytes()
    positions = [(pos, h) for pos, h in iter_batches(data)]
    if positions and positions[-1][1].base_offset >= flushed:
        pos, h = positions[-1]
        cut = pos + h.size_bytes // 2
        with last.open("r+b") as f:
            f.truncate(cut)
        print(
            f"2. simulated a power cut: chopped {last.name} in the middle of its last batch "
            f"(offsets {h.base_offset:,}-{h.last_offset:,}, unflushed) at byte {cut:,}"
        )
    else:
        print("2. the last batch was flushed before the kill: nothing to chop")
    print("\n   kraft dump-log on that segment now:")
    for line in _dump_tail(last, 3):
        print("   " + line)

    t0 = time.perf_counter()
    log = SegmentedLog.open(log_dir, config=_config())  # type: ignore[arg-type]
    recovery_ms = (time.perf_counter() - t0) * 1000
    print(
        f"\n3. reopened the log in {recovery_ms:.0f} ms: recovery validated every batch past the "
        f"recovery point and cut the torn tail;\n   log end offset {log.log_end_offset:,} "
        f"(>= flushed {flushed:,}), log start offset {log.log_start_offset}"
    )

    expected = 0
    position = 0
    while position < log.log_end_offset:
        chunk = log.read(position, 4 << 20)
        for pos, h in iter_batches(chunk):
            for rec in iter_records(memoryview(chunk)[pos : pos + h.size_bytes]):
                if rec.offset != expected or rec.value != _value(expected):
                    print(f"   MISMATCH at offset {expected}: {rec.offset} {rec.value!r}")
                    return 1
                expected += 1
            position = h.next_offset
    log.close()
    lost = max(0, flushed - expected)
    print(
        f"4. read back {expected:,} records: offsets contiguous from 0, every value as written, "
        f"flushed records lost = {lost}"
    )
    print("\n   kraft dump-log on that segment after recovery:")
    for line in _dump_tail(sorted(log_dir.glob("*.log"))[-1], 2):
        print("   " + line)
    print(
        f"\nsummary: written ~{flushed:,}+ records, flushed {flushed:,}, recovered {expected:,}, "
        f"lost flushed records: {lost}, corrupt batches returned: 0"
    )
    return 0 if lost == 0 else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kraft.demo --storage",
        description="kraft's storage demo: a SIGKILLed writer, a torn tail, recovery",
    )
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--writer", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.writer:
        write(args.writer, args.records)
        return 0
    from kraft.logs import configure_logging

    configure_logging("warning")
    if args.data_dir:
        return run(Path(args.data_dir), args.records)
    with tempfile.TemporaryDirectory(prefix="kraft-demo-") as tmp:
        return run(Path(tmp), args.records)


if __name__ == "__main__":
    sys.exit(main())
