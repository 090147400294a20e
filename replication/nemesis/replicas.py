"""After a fault run: every replica's log below the high watermark, compared batch for batch.

Below the high watermark the replicas of a partition must hold the same batches, byte for
byte: a follower appends the leader's batches as they are (offsets, leader epochs, CRCs), and
whatever a replica truncated on a leader change lay above the high watermark. The brokers
must be stopped first (the logs are opened here, read-only in effect: nothing is appended).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final

from storage.log import SegmentedLog
from storage.records import read_header

READ_BYTES: Final = 1 << 20


def _batches(directory: Path, high_watermark: int) -> tuple[int, list[tuple[int, bytes]]]:
    """The log start offset, and every batch below ``high_watermark`` as (base, bytes)."""
    log = SegmentedLog.open(directory)
    try:
        start = log.log_start_offset
        batches: list[tuple[int, bytes]] = []
        offset = start
        while offset < high_watermark:
            data = log.read(offset, READ_BYTES, max_offset=high_watermark)
            if not data:
                break
            pos = 0
            while pos < len(data):
                header = read_header(data, pos)
                batch = bytes(data[pos : pos + header.size_bytes])
                if header.next_offset > offset:
                    batches.append((header.base_offset, batch))
                offset = max(offset, header.next_offset)
                pos += header.size_bytes
        return start, batches
    finally:
        log.close()


def compare_replica_logs(
    broker_dirs: Mapping[int, Path], topic: str, high_watermarks: Mapping[int, int]
) -> list[str]:
    """What differs between the replicas of each partition below its high watermark (empty:
    identical). A replica whose log starts later (retention) is compared from there."""
    problems: list[str] = []
    for partition, high_watermark in sorted(high_watermarks.items()):
        logs: dict[int, tuple[int, list[tuple[int, bytes]]]] = {}
        for broker, data_dir in sorted(broker_dirs.items()):
            directory = data_dir / f"{topic}-{partition}"
            if directory.is_dir():
                logs[broker] = _batches(directory, high_watermark)
        if len(logs) < 2:
            continue
        start = max(s for s, _ in logs.values())
        views = {
            broker: [(base, data) for base, data in batches if base >= start]
            for broker, (_, batches) in logs.items()
        }
        reference_broker, reference = next(iter(views.items()))
        for broker, batches in views.items():
            if batches == reference:
                continue
            first = next((a[0] for a, b in zip(batches, reference, strict=False) if a != b), None)
            problems.append(
                f"{topic}-{partition}: broker {broker} differs from {reference_broker} below the "
                f"high watermark {high_watermark} (batches {len(batches)} vs {len(reference)}, "
                f"first difference at offset {first})"
            )
    return problems


__all__ = ["compare_replica_logs"]
