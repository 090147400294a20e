"""`FileRegion`: a run of whole batches of a segment file, sent from the file without reading it
(Kafka's ``FileRecords.slice``).

A consumer's Fetch on a plaintext Kafka listener asks the log for a region instead of bytes
(`storage.log.SegmentedLog.read_region`); the listener writes the response's other fields and
then hands the region to the kernel with ``os.sendfile``
(`replication.broker.kafka.frame_writer`), so its bytes never enter Python.

The region owns a duplicate of the segment's descriptor (``os.dup``) from the read until it is
closed: a segment deleted (retention, a compaction's swap) after the read stays readable through
it, as Kafka keeps the file open, and the region never covers bytes past what the read decided.
A truncation of the segment below the region's end (a replica cut back under its high
watermark: an unclean leader election) leaves it short; the sender then fails the connection,
as Kafka's does ("size of FileRecords has been truncated").

`Records`, bytes or a region, is what the log's readers return.
"""

from __future__ import annotations

import os
from typing import Final, TypeAlias


class FileRegion:
    """``size`` bytes at ``position`` of the file open as ``fd`` (owned: `close` closes it):
    whole batches, whose offsets are below ``next_offset`` (for a read_committed Fetch's
    aborted transactions, `replication.broker.replicas.stable_reads.aborted_in`)."""

    __slots__ = ("fd", "next_offset", "position", "size")

    mode: Final = "rb"
    """For ``loop.sendfile``, which wants a file open in binary mode."""

    def __init__(self, fd: int, position: int, size: int, next_offset: int = -1) -> None:
        self.fd = fd
        self.position = position
        self.size = size
        self.next_offset = next_offset

    @classmethod
    def of(cls, fd: int, position: int, size: int, next_offset: int) -> FileRegion:
        """A region of the file open as ``fd`` (not owned: the region holds its own dup)."""
        return cls(os.dup(fd), position, size, next_offset)

    def __len__(self) -> int:
        return self.size

    def fileno(self) -> int:
        return self.fd

    def read(self) -> bytes:
        """The region's bytes (for a sender that cannot use the file: TLS, gRPC, tests).

        Raises:
            EOFError: the file is shorter than the region now (truncated since the read).
            OSError: the read failed.
        """
        data = os.pread(self.fd, self.size, self.position)
        while len(data) < self.size:
            more = os.pread(self.fd, self.size - len(data), self.position + len(data))
            if not more:
                raise EOFError(f"region of {self.size} bytes truncated to {len(data)}")
            data += more
        return data

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)

    def __del__(self) -> None:
        # NB: a response dropped before it was written (a long poll's earlier pass, a connection
        # that failed) closes its regions here: CPython frees it at once.
        self.close()

    def __repr__(self) -> str:
        return f"FileRegion(fd={self.fd}, position={self.position}, size={self.size})"


Records: TypeAlias = bytes | FileRegion
"""Whole batches, as bytes or as a `FileRegion` of a segment."""


def records_bytes(records: Records) -> bytes:
    """``records`` as bytes (a region read, and closed)."""
    if isinstance(records, FileRegion):
        try:
            return records.read()
        finally:
            records.close()
    return records


__all__ = ["FileRegion", "Records", "records_bytes"]
