"""Writing response frames to a plaintext connection without joining them: the record bytes of
a Fetch response go from the segment read to the kernel by identity.

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

SSL connections keep ``writelines``: an SSL transport's does not join (it encrypts each chunk,
which copies anyway).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Final

COALESCE_BELOW_BYTES: Final = 4096
"""Chunks shorter than this are joined with their neighbours; longer ones are sent by identity."""
_IOV_MAX: Final = min(os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024, 1024)

Piece = bytes | memoryview


def coalesce(chunks: Sequence[bytes], below: int = COALESCE_BELOW_BYTES) -> list[Piece]:
    """``chunks`` with each run of chunks shorter than ``below`` joined into one; a chunk of at
    least ``below`` bytes is kept as it is (the same object). Empty chunks are dropped."""
    out: list[Piece] = []
    run: list[bytes] = []
    for chunk in chunks:
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


async def write_frames(writer: asyncio.StreamWriter, fd: int, chunks: Sequence[bytes]) -> None:
    """Write ``chunks`` to the plaintext socket ``fd`` of ``writer`` (see the module docstring)
    and return once the transport holds none of them.

    Raises:
        OSError: the socket failed (the client reset or went away).
    """
    transport = writer.transport
    pieces = coalesce(chunks)
    if transport.get_write_buffer_size() == 0:
        pieces = _send_now(fd, pieces)
    for piece in pieces:
        transport.write(piece)
    await writer.drain()


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
