"""`FileQuorumStateStore`: a quorum-mode replica's Raft election state on disk.

Kafka's ``quorum-state`` file (KIP-595), one per quorum-mode partition directory, holding the
epoch the replica is in and the vote it cast in it, as JSON::

    {"data_version": 0, "leader_epoch": 7, "voted_id": 2}

It is written atomically and durably (temp file, fsync, rename, fsync the directory:
`storage.checkpoint.write_atomically`) before any message that depends on it leaves, so a
vote is never given twice in one epoch across a crash. A leftover ``quorum-state.tmp`` is an
unfinished write: the old file still holds the truth.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import final

from storage.checkpoint import write_atomically
from storage.errors import KafkaStorageError

QUORUM_STATE_FILE = "quorum-state"
_DATA_VERSION = 0


@final
class FileQuorumStateStore:
    """`replication.driver.QuorumStateStore` over ``<directory>/quorum-state``."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / QUORUM_STATE_FILE

    def read(self) -> tuple[int, int | None] | None:
        """``(epoch, voted_for)``, or None if never written.

        Raises:
            OSError: the file could not be read.
            KafkaStorageError: the file is not a quorum state (corrupt).
        """
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        try:
            data = json.loads(text)
            epoch = data["leader_epoch"]
            voted = data["voted_id"]
            version = data["data_version"]
        except (ValueError, KeyError, TypeError) as e:
            raise KafkaStorageError(f"corrupt quorum state file {self.path}: {e!r:.200}") from e
        if (
            version != _DATA_VERSION
            or not isinstance(epoch, int)
            or epoch < 0
            or not (voted is None or (isinstance(voted, int) and voted >= 0))
        ):
            raise KafkaStorageError(f"corrupt quorum state file {self.path}: {text[:200]!r}")
        return epoch, voted

    def write(self, epoch: int, voted_for: int | None) -> None:
        """Durable on return.

        Raises:
            OSError: the file could not be written.
        """
        data = {"data_version": _DATA_VERSION, "leader_epoch": epoch, "voted_id": voted_for}
        write_atomically(self.path, json.dumps(data, sort_keys=True).encode())


__all__ = ["QUORUM_STATE_FILE", "FileQuorumStateStore"]
