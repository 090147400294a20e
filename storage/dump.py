"""Describe the batches of segment files, like Kafka's ``kafka-dump-log`` (``kraft dump-log``).

Reads files directly (no log open, no recovery), so it shows exactly what is on disk:
valid batches, a corrupt batch (``crc_valid: False``), and a torn tail.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from storage.compression import Compression
from storage.errors import CorruptRecordError, KraftError
from storage.records import (
    BATCH_HEADER_SIZE,
    MAGIC,
    compute_crc,
    iter_records,
    read_header,
)
from storage.segment import LOG_SUFFIX


@dataclass(frozen=True, slots=True, kw_only=True)
class TailProblem:
    """Bytes at the end of a segment that are not a whole, parseable batch."""

    position: int
    size_bytes: int
    reason: str


_SEGMENT_NAME = re.compile(r"^\d{20}" + re.escape(LOG_SUFFIX) + "$")
_MAGIC_POSITION = 16
"""Where a v2 batch keeps its magic byte: after base offset (8), length (4) and epoch (4)."""


def segment_files(path: str | Path) -> list[Path]:
    """The segment files at ``path``: the file itself, or every file under the directory
    named like a segment (``<20-digit base offset>.log``; other ``.log`` files, such as
    process logs, are not segments)."""
    p = Path(path)
    if p.is_dir():
        return sorted(f for f in p.rglob("*" + LOG_SUFFIX) if _SEGMENT_NAME.match(f.name))
    if not p.exists():
        raise FileNotFoundError(f"no such file or directory: {p}")
    return [p]


def not_a_segment(path: Path) -> str | None:
    """Why the file at ``path`` is not a kraft (Kafka) log segment, or None if it is one: a
    segment is named ``<20-digit base offset>.log`` and is empty or starts with a v2 batch
    header. A first header cut short, magic byte intact, is a torn tail, not a foreign file.
    """
    if not _SEGMENT_NAME.match(path.name):
        return f"its name is not <20-digit base offset>{LOG_SUFFIX}"
    with path.open("rb") as f:
        head = f.read(BATCH_HEADER_SIZE)
    if len(head) >= BATCH_HEADER_SIZE:
        try:
            read_header(head)
        except CorruptRecordError as e:
            return f"it does not start with a v2 record batch ({e})"
    elif len(head) > _MAGIC_POSITION and head[_MAGIC_POSITION] != MAGIC:
        return f"it does not start with a v2 record batch (magic {head[_MAGIC_POSITION]})"
    return None


def describe_segment(
    path: Path, *, records: bool = False
) -> Iterator[dict[str, Any] | TailProblem]:
    """Yield one dict per batch of the segment file at ``path``, then a `TailProblem` if the
    file ends in a torn or unparseable batch."""
    buf = memoryview(path.read_bytes())  # segments are bounded by segment.bytes
    size = len(buf)
    pos = 0
    while pos < size:
        if size - pos < BATCH_HEADER_SIZE:
            yield TailProblem(position=pos, size_bytes=size - pos, reason="torn header")
            return
        try:
            h = read_header(buf, pos)
        except CorruptRecordError as e:
            yield TailProblem(position=pos, size_bytes=size - pos, reason=str(e))
            return
        if size - pos < h.size_bytes:
            yield TailProblem(position=pos, size_bytes=size - pos, reason="torn batch")
            return
        valid = compute_crc(buf, pos, h.size_bytes) == h.crc
        entry: dict[str, Any] = {
            "base_offset": h.base_offset,
            "last_offset": h.last_offset,
            "count": h.record_count,
            "partition_leader_epoch": h.partition_leader_epoch,
            "producer_id": h.producer_id,
            "producer_epoch": h.producer_epoch,
            "base_sequence": h.base_sequence,
            "last_sequence": h.last_sequence,
            "is_transactional": h.is_transactional,
            "is_control": h.is_control,
            "position": pos,
            "base_timestamp_ms": h.base_timestamp_ms,
            "max_timestamp_ms": h.max_timestamp_ms,
            "delete_horizon_ms": h.delete_horizon_ms,
            "timestamp_type": h.timestamp_type.name,
            "size": h.size_bytes,
            "magic": h.magic,
            "compression": _codec_name(h.attributes & 0x07),
            "crc": h.crc,
            "crc_valid": valid,
        }
        if records and valid:
            try:
                entry["records"] = _records_of(buf[pos : pos + h.size_bytes])
            except KraftError as e:  # a CRC-valid batch whose records do not parse
                entry["records_error"] = e.message
        yield entry
        pos += h.size_bytes


def _records_of(batch: memoryview) -> list[dict[str, Any]]:
    return [
        {
            "offset": r.offset,
            "timestamp_ms": r.timestamp_ms,
            "key": None if r.key is None else r.key.decode("utf-8", "replace"),
            "value": None if r.value is None else r.value.decode("utf-8", "replace"),
            "headers": [
                [k, None if v is None else v.decode("utf-8", "replace")] for k, v in r.headers
            ],
        }
        for r in iter_records(batch)
    ]


def _codec_name(code: int) -> str:
    """The codec's name, or ``unknown(<id>)`` for an id no codec has (a corrupt batch)."""
    try:
        return Compression(code).name.lower()
    except ValueError:
        return f"unknown({code})"
