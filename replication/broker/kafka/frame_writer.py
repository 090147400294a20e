"""Writing response frames to a plaintext connection without joining them: the record bytes of
a Fetch response go from the segment file to the socket with ``sendfile`` (a `FileRegion`), or,
as bytes, to the kernel by identity.

Python 3.11's selector transport has no ``writelines`` of its own: the inherited one joins the
list (``b"".join``), a copy of every response, record bytes included (3.12 added one on
``sendmsg``). Here the frame's chunks are *coalesced* (runs of chunks under
`COALESCE_BELOW_BYTES`, the sizes, headers and fields kio writes one primitive at a time, are
joined: cheap bytes, and no syscall per field), and the pieces go to the socket with one
``writev`` while the transport's buffer is empty, as much as the kernel takes. Only what it does
not take goes through the transport (``transport.write``, which copies it into its buffer; the
transport sends it as the socket drains, with no task hop per wake-up), and the connection waits
(``drain``, with its write buffer limits at 0) until the transport has sent it, so that the next
frame starts from an empty buffer again. Frames go in order: nothing is written directly while
the transport holds bytes.

*File regions* (Kafka's zero-copy transfer, ``FileRecords.writeTo``): a consumer's records on a
plaintext listener come as a `storage.file_region.FileRegion` of the segment
(`RequestContext.file_regions`). The bytes before it are written as above, the transport is
drained, and the region goes with ``os.sendfile`` from its descriptor; what the socket does
not take at once goes through ``loop.sendfile``, which waits for the socket to drain, as the
transport would. A region is never read into Python; each is closed once written (or when the
frame is dropped). A region the file no longer holds whole (truncated since the read) fails
the connection: its length is already on the wire.

SSL connections keep ``writelines`` and never get a region (`RequestContext.file_regions` is
False): an SSL transport's ``writelines`` does not join (it encrypts each chunk, which copies
anyway).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Final

from replication.broker.kafka.entities import Chunk
from storage.file_region import FileRegion

COALESCE_BELOW_BYTES: Final = 4096
"""Chunks shorter than this are joined with their neighbours; longer ones are sent by identity."""
_IOV_MAX: Final = min(os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024, 1024)

Piece = bytes | memoryview


def coalesce(
    chunks: Sequence[Chunk], below: int = COALESCE_BELOW_BYTES
) -> list[Piece | FileRegion]:
    """``chunks`` with each run of chunks shorter than ``below`` joined into one; a chunk of at
    least ``below`` bytes, and any region, is kept as it is (the same object). Empty chunks
    are dropped."""
    out: list[Piece | FileRegion] = []
    run: list[bytes] = []
    for chunk in chunks:
        if isinstance(chunk, FileRegion):
            if run:
                out.append(run[0] if len(run) == 1 else b"".join(run))
                run = []
            out.append(chunk)
            continue
        if len(chunk) < below:
            if chunk:
                run.append(chunk)
            continue
        if run:
            out.append(run[0] if len(run) == 1 else b"".join(run))
            run = []
        out.append(chunk)
    if run:
        out.append(run[0] if len(run) == 1 else b"".join(run))
    return out


def unsent(pieces: Sequence[Piece], sent: int) -> list[Piece]:
    """What is left of ``pieces`` after their first ``sent`` bytes went out (a piece cut in
    two continues as a memoryview: no copy)."""
    for i, piece in enumerate(pieces):
        size = len(piece)
        if sent < size:
            rest = list(pieces[i + 1 :])
            return [memoryview(piece)[sent:] if sent else piece, *rest]
        sent -= size
    return []


def prepare(writer: asyncio.StreamWriter) -> None:
    """Make ``drain`` wait until the transport's buffer is empty (write buffer limits 0), so
    that the next frame can be written from its own memory."""
    writer.transport.set_write_buffer_limits(high=0, low=0)


async def write_frames(writer: asyncio.StreamWriter, fd: int, chunks: Sequence[Chunk]) -> None:
    """Write ``chunks`` to the plaintext socket ``fd`` of ``writer`` (see the module docstring)
    and return once the transport holds none of them. Closes the regions among them.

    Raises:
        OSError: the socket failed (the client reset or went away), or a region's file was
            truncated under it.
    """
    try:
        run: list[Piece] = []
        for piece in coalesce(chunks):
            if isinstance(piece, FileRegion):
                _write(writer.transport, fd, run)
                run = []
                await writer.drain()  # the transport empty: the region's bytes come next
                await _send_region(writer, fd, piece)
            else:
                run.append(piece)
        _write(writer.transport, fd, run)
        await writer.drain()
    finally:
        for chunk in chunks:
            if isinstance(chunk, FileRegion):
                chunk.close()


def _write(transport: asyncio.WriteTransport, fd: int, pieces: list[Piece]) -> None:
    """Write ``pieces``: as much as the socket takes now if the transport holds nothing, the
    rest through the transport."""
    if pieces and transport.get_write_buffer_size() == 0:
        pieces = _send_now(fd, pieces)
    for piece in pieces:
        transport.write(piece)


async def _send_region(writer: asyncio.StreamWriter, fd: int, region: FileRegion) -> None:
    """``sendfile`` ``region`` to the socket ``fd``, whose transport holds nothing."""
    try:
        sent = os.sendfile(fd, region.fd, region.position, region.size)
    except (BlockingIOError, InterruptedError):
        sent = 0
    else:
        if sent == 0:
            raise _truncated(region, 0)
    if sent < region.size:  # the socket is full: wait for it as the transport would
        loop = asyncio.get_running_loop()
        try:
            rest = await loop.sendfile(
                writer.transport,
                region,  # type: ignore[arg-type]
                region.position + sent,
                region.size - sent,
                fallback=False,
            )
        except RuntimeError as e:  # a first sendfile that failed; a transport closing
            raise ConnectionError(f"sendfile failed: {e}") from e
        if sent + rest < region.size:
            raise _truncated(region, sent + rest)


def _truncated(region: FileRegion, sent: int) -> OSError:
    return OSError(f"{region} truncated under a Fetch after {sent} bytes were sent")


def _send_now(fd: int, pieces: list[Piece]) -> list[Piece]:
    """``writev`` as much of ``pieces`` as the kernel takes now; what is left."""
    while pieces:
        batch = pieces[:_IOV_MAX]
        try:
            sent = os.writev(fd, batch)
        except (BlockingIOError, InterruptedError):
            return pieces
        full = sent == sum(len(p) for p in batch)
        pieces = unsent(pieces, sent)
        if not full:
            return pieces
    return pieces


__all__ = ["COALESCE_BELOW_BYTES", "coalesce", "prepare", "unsent", "write_frames"]
