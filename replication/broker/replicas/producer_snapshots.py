"""Producer-state snapshot files beside a partition's segments (Kafka's ``<offset>.snapshot``).

Theory of operation
-------------------
`ProducerStateManager.snapshot` turns a partition's idempotent-producer state into bytes
(versioned, CRC-32C protected; see `replication.core.producer_state`). This module is the
shell side: one file per snapshot, named like a segment by the offset it covers
(``00000000000000001234.snapshot`` holds the fold of every batch below offset 1234, the
state's ``map_end_offset``), written atomically (temp file, fsync, rename, fsync the
directory), so a reader sees a whole snapshot or none. A leftover ``.snapshot.tmp`` is
removed by the log loader with the other temp files.

The replica's partition driver (`replication.driver`) takes a snapshot when its log rolls a
segment and on a clean shutdown; on open it calls `load_producer_state`
(`replication.driver.producer_state_load`, re-exported here), which starts from the latest
snapshot that is valid and lies in [log start offset, log end offset] and replays only the
batch headers after it (Kafka's ``UnifiedLog.rebuildProducerState`` / ``truncateAndReload``). A
snapshot that fails its CRC or does not parse is deleted and the next older one is tried; with
none left the state is rebuilt from the log start offset. So a corrupt file costs a longer
replay, never a crash.

Why the recovered log end offset bounds the choice (Kafka does the same): `SegmentedLog.open`
validates every batch above its recovery point (CRC and offset contiguity) and cuts the log
at the first bad one, so everything below the log end offset it reports is what was
appended; a snapshot above it is deleted. Truncation deletes the snapshots above the
truncation point *before* the log is cut (durably), so no snapshot ever describes a removed
suffix that later appends replaced. Retention deletes the snapshots below the new log start
offset (their base is gone: a replay from one would skip the deleted batches).

Not thread-safe: the replica's event loop owns it.
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Iterable
from pathlib import Path

from replication.driver.producer_state_load import (
    ProducerStateLoad,
    load_producer_state,
    scan_headers,
)
from storage.checkpoint import fsync_dir, write_atomically

SNAPSHOT_SUFFIX = ".snapshot"
_NAME = re.compile(r"^(\d{20})\.snapshot$")


def snapshot_file_name(offset: int) -> str:
    """``<offset, 20 digits>.snapshot``, like Kafka's and like the segment files."""
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


class ProducerSnapshotStore:
    """The ``*.snapshot`` files of one log directory (offsets cached in memory)."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        offsets: list[int] = []
        with os.scandir(directory) as entries:
            for entry in entries:
                m = _NAME.match(entry.name)
                if m is not None:
                    offsets.append(int(m.group(1)))
        self._offsets = sorted(offsets)

    @property
    def offsets(self) -> list[int]:
        """Every snapshot's offset, ascending."""
        return list(self._offsets)

    def path(self, offset: int) -> Path:
        return self._directory / snapshot_file_name(offset)

    def __contains__(self, offset: object) -> bool:
        return isinstance(offset, int) and offset in self._offsets

    def latest_at_or_below(self, offset: int) -> int | None:
        i = bisect.bisect_right(self._offsets, offset)
        return self._offsets[i - 1] if i else None

    def write(self, offset: int, data: bytes) -> None:
        """Write (or replace) the snapshot at ``offset``; durable on return.

        Raises:
            OSError: the file could not be written.
        """
        write_atomically(self.path(offset), data)
        if offset not in self._offsets:
            bisect.insort(self._offsets, offset)

    def read(self, offset: int) -> bytes | None:
        """The snapshot's bytes; None if its file has gone."""
        try:
            return self.path(offset).read_bytes()
        except FileNotFoundError:
            return None

    def delete(self, offsets: Iterable[int]) -> int:
        """Delete these snapshots (durably: the directory is fsynced); how many went."""
        doomed = [o for o in offsets if o in self._offsets]
        for offset in doomed:
            self._offsets.remove(offset)
            self.path(offset).unlink(missing_ok=True)
        if doomed:
            fsync_dir(self._directory)
        return len(doomed)

    def delete_below(self, offset: int) -> int:
        """Delete every snapshot whose offset is below ``offset`` (the new log start)."""
        return self.delete([o for o in self._offsets if o < offset])

    def delete_above(self, offset: int) -> int:
        """Delete every snapshot whose offset is above ``offset`` (a truncation point)."""
        return self.delete([o for o in self._offsets if o > offset])

    def delete_all(self) -> int:
        return self.delete(list(self._offsets))


__all__ = [
    "SNAPSHOT_SUFFIX",
    "ProducerSnapshotStore",
    "ProducerStateLoad",
    "load_producer_state",
    "scan_headers",
    "snapshot_file_name",
]
