"""Small checkpoint files written atomically: temp file, fsync, rename, fsync the directory.

Formats follow Kafka's ``CheckpointFile``: a version line, a count line, then one entry per
line. A reader sees either the old or the new content, never a mix (rename is atomic), and a
checkpoint is durable when the write function returns.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from storage.errors import KafkaStorageError

CHECKPOINT_VERSION = 0


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """Make creations, renames and deletions of entries in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_synced(path: Path, data: bytes) -> None:
    """Create or truncate ``path``, write ``data`` and fsync it (not its directory entry)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``; durable (file and directory entry) on return."""
    tmp = path.with_name(path.name + ".tmp")
    write_synced(tmp, data)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_entries(path: Path, entries: Sequence[Sequence[int]]) -> None:
    """Write a Kafka-style checkpoint of integer tuples (one space-separated line each)."""
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines.extend(" ".join(str(v) for v in entry) for entry in entries)
    write_atomically(path, ("\n".join(lines) + "\n").encode())


def read_entries(path: Path, width: int) -> list[tuple[int, ...]] | None:
    """Read a checkpoint written by `write_entries`; None if the file does not exist.

    Raises:
        KafkaStorageError: if the file is malformed (wrong version, count or width).
    """
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    lines = text.splitlines()
    try:
        if int(lines[0]) != CHECKPOINT_VERSION:
            raise KafkaStorageError(f"unknown checkpoint version in {path}: {lines[0]!r}")
        count = int(lines[1])
        entries = [tuple(int(v) for v in line.split()) for line in lines[2 : 2 + count]]
    except (IndexError, ValueError) as e:
        raise KafkaStorageError(f"malformed checkpoint file {path}: {e}") from e
    if len(entries) != count or any(len(e) != width for e in entries):
        raise KafkaStorageError(f"malformed checkpoint file {path}")
    return entries


def read_offset(path: Path) -> int | None:
    """Read a single-offset checkpoint; None if it does not exist."""
    entries = read_entries(path, 1)
    if entries is None:
        return None
    if len(entries) != 1:
        raise KafkaStorageError(f"expected one offset in {path}")
    return entries[0][0]


def write_offset(path: Path, offset: int) -> None:
    write_entries(path, [(offset,)])


class FileCheckpoint:
    """A file holding one offset (a replica's ``high-watermark-checkpoint``, Kafka's
    replication-offset-checkpoint, one file per replica)."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def read(self) -> int | None:
        return read_offset(self._path)

    def write(self, offset: int) -> None:
        write_offset(self._path, offset)


__all__ = [
    "FileCheckpoint",
    "fsync_dir",
    "read_entries",
    "read_offset",
    "write_atomically",
    "write_entries",
    "write_offset",
]
