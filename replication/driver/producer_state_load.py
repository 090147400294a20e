"""Loading a replica's producer state: the latest usable snapshot plus the log after it.

`load_producer_state` is Kafka's ``UnifiedLog.rebuildProducerState`` / ``truncateAndReload``
over any `ProducerSnapshots` store (files in the broker: see
`replication.broker.replicas.producer_snapshots`; memory in the simulator: `MemorySnapshotStore`)
and any `ReplicaLog`: it starts from the latest snapshot that is valid and lies in [log start
offset, log end offset] and replays only the batch headers after it. A snapshot that fails its CRC
or does not parse is deleted and the next older one is tried; with none left the state is rebuilt
from the log start offset. So a corrupt snapshot costs a longer replay, never a crash."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import structlog

from replication.core import ProducerStateManager
from replication.driver.interface import ProducerSnapshots, ReplicaLog
from storage.errors import KafkaStorageError
from storage.records import BatchHeader, iter_batches

_log = structlog.get_logger("replication.driver.producer_state_load")


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerStateLoad:
    """How `load_producer_state` rebuilt the state."""

    snapshot_offset: int | None
    """The snapshot it started from; None: a replay from the log start offset."""
    batches_replayed: int
    """Batch headers read from the log after the snapshot."""
    corrupt_snapshots: int
    """Snapshots that failed to load (deleted)."""


def scan_headers(log: ReplicaLog, from_offset: int) -> Iterator[BatchHeader]:
    """Every batch header of ``log`` from ``from_offset`` to its end, in offset order."""
    offset = max(from_offset, log.log_start_offset)
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        if not data:
            return
        last = offset
        for _, header in iter_batches(data):
            yield header
            last = header.base_offset + header.last_offset_delta + 1
        if last <= offset:
            return
        offset = last


def load_producer_state(
    state: ProducerStateManager,
    log: ReplicaLog,
    store: ProducerSnapshots,
    directory: Path | None = None,
) -> ProducerStateLoad:
    """Replace ``state`` with the fold of ``log``: the latest usable snapshot in [log start
    offset, log end offset] plus the batches after it (see the module docstring). Deletes
    the snapshots outside that range and the corrupt ones.

    Raises:
        OSError: a snapshot file could not be read or deleted.
    """
    start, end = log.log_start_offset, log.log_end_offset
    store.delete_above(end)
    store.delete_below(start)
    corrupt = 0
    replayed = 0

    def counted(headers: Iterator[BatchHeader]) -> Iterator[BatchHeader]:
        nonlocal replayed
        for header in headers:
            replayed += 1
            yield header

    for offset in reversed(store.offsets):
        data = store.read(offset)
        try:
            if data is None:
                raise KafkaStorageError("snapshot file vanished")
            loaded = ProducerStateManager.from_snapshot(data)
            if loaded.map_end_offset != offset:
                raise KafkaStorageError(
                    f"snapshot covers offset {loaded.map_end_offset}, not its name's"
                )
        except KafkaStorageError as e:
            _log.warning(
                "producer_snapshot_corrupt",
                directory=str(directory),
                offset=offset,
                error=e.message,
            )
            store.delete([offset])
            corrupt += 1
            continue
        state.reload(data, counted(scan_headers(log, offset)))
        return ProducerStateLoad(
            snapshot_offset=offset, batches_replayed=replayed, corrupt_snapshots=corrupt
        )
    state.reload(None, counted(scan_headers(log, start)), start_offset=start)
    return ProducerStateLoad(
        snapshot_offset=None, batches_replayed=replayed, corrupt_snapshots=corrupt
    )


class MemorySnapshotStore:
    """`ProducerSnapshots` in memory: the simulator's disk (a snapshot write is atomic and
    durable, as the broker's temp-file-fsync-rename is, so it survives a power loss)."""

    def __init__(self) -> None:
        self._snapshots: dict[int, bytes] = {}
        self._offsets: list[int] = []

    @property
    def offsets(self) -> list[int]:
        return list(self._offsets)

    def __contains__(self, offset: object) -> bool:
        return offset in self._snapshots

    def write(self, offset: int, data: bytes) -> None:
        if offset not in self._snapshots:
            bisect.insort(self._offsets, offset)
        self._snapshots[offset] = data

    def read(self, offset: int) -> bytes | None:
        return self._snapshots.get(offset)

    def delete(self, offsets: Iterable[int]) -> int:
        doomed = [o for o in offsets if o in self._snapshots]
        for offset in doomed:
            del self._snapshots[offset]
            self._offsets.remove(offset)
        return len(doomed)

    def delete_below(self, offset: int) -> int:
        return self.delete([o for o in self._offsets if o < offset])

    def delete_above(self, offset: int) -> int:
        return self.delete([o for o in self._offsets if o > offset])

    def delete_all(self) -> int:
        return self.delete(list(self._offsets))


class MemoryCheckpoint:
    """`HighWatermarkCheckpoint` in memory (durable at once)."""

    def __init__(self, offset: int | None = None) -> None:
        self.offset = offset

    def read(self) -> int | None:
        return self.offset

    def write(self, offset: int) -> None:
        self.offset = offset


__all__ = [
    "MemoryCheckpoint",
    "MemorySnapshotStore",
    "ProducerStateLoad",
    "load_producer_state",
    "scan_headers",
]
