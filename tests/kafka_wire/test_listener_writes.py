"""How the listener writes responses (`replication.broker.kafka.frame_writer`): Fetch responses of
several partitions and megabytes of records arrive whole and in request order when the socket
takes them a little at a time, and their record bytes reach the socket without a copy."""

from __future__ import annotations

import asyncio
import os
import random
import socket
import struct
from pathlib import Path
from typing import Any

import pytest

from kraft.bench import kafka_listener
from replication.broker.kafka import frame_writer
from replication.broker.kafka.frame_writer import coalesce, unsent, write_frames
from storage.file_region import FileRegion
from tests.kafka_wire.test_listener import serving
from tests.kafka_wire.wire import decode_response, request_frame
from tests.storage.test_log_builders import LogBuilder, make_batch

pytestmark = pytest.mark.timeout(60)

FETCH = 1
VERSION = 12  # topics by name, flexible


class RecordsApi(kafka_listener.RecordsApi):
    """The bench's stand-in, Fetch only: each partition answers with
    ``records[(topic, partition)]``; any other call fails the test."""

    def __init__(self, records: dict[tuple[str, int], bytes]) -> None:
        super().__init__(lambda topic, partition: records[topic, partition])

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected call of {name}")


def _fetch_frame(correlation_id: int, partitions: dict[str, list[int]]) -> bytes:
    body = {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 30,
        "session_id": 0,
        "session_epoch": -1,  # no session
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {"partition": i, "fetch_offset": 0, "partition_max_bytes": 1 << 30}
                    for i in indexes
                ],
            }
            for topic, indexes in partitions.items()
        ],
    }
    return request_frame(FETCH, VERSION, body, correlation_id=correlation_id)


async def _read_frames(reader: asyncio.StreamReader, count: int) -> list[bytes]:
    frames = []
    for _ in range(count):
        (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 20))
        frames.append(await asyncio.wait_for(reader.readexactly(size), 20))
    return frames


def _records(rng: random.Random, size: int) -> bytes:
    return rng.randbytes(size)


def test_pipelined_fetch_responses_of_megabytes_arrive_whole_and_in_order() -> None:
    rng = random.Random(7)
    records = {
        ("a", 0): _records(rng, 3 << 20),
        ("a", 1): _records(rng, 100),  # a small one between large ones: coalesced
        ("a", 2): _records(rng, 1 << 20),
        ("b", 0): b"",
        ("b", 1): _records(rng, (2 << 20) + 7),
    }
    wanted = {"a": [0, 1, 2], "b": [0, 1]}

    async def run() -> None:
        api = RecordsApi(records)
        async with serving(api) as (_, port):  # type: ignore[arg-type]
            client = socket.socket()
            client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a slow reader
            client.setblocking(False)
            await asyncio.get_running_loop().sock_connect(client, ("127.0.0.1", port))
            reader, writer = await asyncio.open_connection(sock=client, limit=1 << 16)
            try:
                writer.write(b"".join(_fetch_frame(c, wanted) for c in range(40, 44)))
                await writer.drain()
                frames = await _read_frames(reader, 4)
            finally:
                writer.close()
        answers = [decode_response(FETCH, VERSION, f) for f in frames]
        assert [c for c, _ in answers] == [40, 41, 42, 43]
        for _, body in answers:
            got = {
                (t.topic, p.partition_index): p.records
                for t in body.responses
                for p in t.partitions
            }
            assert got == records

    asyncio.run(run())


def test_a_fetch_response_s_records_reach_the_socket_by_identity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    large = os.urandom(256 * 1024)
    written: list[Any] = []
    real_writev = os.writev

    def spying_writev(fd: int, buffers: Any) -> int:
        written.extend(buffers)
        return real_writev(fd, buffers)

    monkeypatch.setattr(os, "writev", spying_writev)

    async def run() -> None:
        api = RecordsApi({("a", 0): large, ("a", 1): b"x" * 10})
        async with serving(api) as (_, port):  # type: ignore[arg-type]
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                writer.write(_fetch_frame(5, {"a": [0, 1]}))
                [frame] = await _read_frames(reader, 1)
            finally:
                writer.close()
        assert decode_response(FETCH, VERSION, frame)[0] == 5
        assert any(b is large for b in written), "the records were copied before the socket"

    asyncio.run(run())


def test_frames_written_through_a_small_send_buffer_arrive_as_joined() -> None:
    """`write_frames` on a socket whose send buffer is 4 KiB (every frame is a partial send),
    three frames written one after the other as the listener does."""
    rng = random.Random(3)
    frames = [
        [b"\0\0", rng.randbytes(5000), b"\1" * 3, rng.randbytes(300_000), b"", b"\2"],
        [rng.randbytes(10) for _ in range(2000)],  # many small chunks: one piece
        [rng.randbytes(70_000), rng.randbytes(4096), rng.randbytes(4095)],
    ]
    expected = b"".join(b"".join(f) for f in frames)

    async def run() -> None:
        ours, theirs = socket.socketpair()
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        ours.setblocking(False)
        theirs.setblocking(False)
        loop = asyncio.get_running_loop()
        _, writer = await asyncio.open_connection(sock=ours)
        frame_writer.prepare(writer)

        async def send() -> None:
            for f in frames:
                await write_frames(writer, ours.fileno(), f)
            writer.close()

        async def receive() -> bytes:
            data = bytearray()
            while chunk := await loop.sock_recv(theirs, 1000):
                data += chunk
            return bytes(data)

        _, received = await asyncio.wait_for(asyncio.gather(send(), receive()), 30)
        theirs.close()
        assert received == expected

    asyncio.run(run())


def test_coalesce_joins_runs_of_small_chunks_and_keeps_large_ones() -> None:
    big = b"B" * 4096
    out = coalesce([b"a", b"", b"b", big, b"c", big, big], below=4096)
    assert out == [b"ab", big, b"c", big, big]
    assert out[1] is big and out[3] is big
    assert coalesce([], below=10) == []
    assert coalesce([b"abc"], below=2) == [b"abc"]


@pytest.mark.parametrize("sent", [0, 1, 2, 3, 4, 5, 9, 10])
def test_unsent_cuts_anywhere(sent: int) -> None:
    pieces = [b"ab", b"cde", b"", b"fghij"]
    joined = b"".join(pieces)
    assert b"".join(bytes(p) for p in unsent(pieces, sent)) == joined[sent:]


def _region(directory: Path, name: str, data: bytes, position: int, size: int) -> FileRegion:
    """A region of a new file holding ``data`` (its descriptor the region's own)."""
    path = directory / name
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    return FileRegion(fd, position, size)


def test_frames_with_file_regions_through_a_small_send_buffer_arrive_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`write_frames` of frames mixing bytes and file regions on a socket whose send buffer is
    4 KiB: each region is a partial ``sendfile`` that waits for the socket, and the bytes
    arrive in order. The regions are closed once written."""
    rng = random.Random(5)
    files = [rng.randbytes(600_000), rng.randbytes(90_000)]
    regions = [
        _region(tmp_path, "a", files[0], 1000, 500_000),
        _region(tmp_path, "b", files[1], 0, 90_000),
        _region(tmp_path, "c", files[0], 7, 3),  # a small one: sent as a region too
    ]
    frames: list[list[Any]] = [
        [b"\0\0", rng.randbytes(5000), regions[0], b"\1" * 3, regions[2], b"\2"],
        [rng.randbytes(10) for _ in range(200)],
        [regions[1], rng.randbytes(70_000)],
    ]
    expected = b"".join(
        b"".join(c if isinstance(c, bytes) else c.read() for c in f) for f in frames
    )
    partial: list[int] = []
    real_sendfile = os.sendfile

    def spying_sendfile(out_fd: int, in_fd: int, offset: int | None, count: int) -> int:
        sent = real_sendfile(out_fd, in_fd, offset, count)
        if sent < count:
            partial.append(sent)
        return sent

    monkeypatch.setattr(os, "sendfile", spying_sendfile)

    async def run() -> None:
        ours, theirs = socket.socketpair()
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        ours.setblocking(False)
        theirs.setblocking(False)
        loop = asyncio.get_running_loop()
        _, writer = await asyncio.open_connection(sock=ours)
        frame_writer.prepare(writer)

        async def send() -> None:
            for f in frames:
                await write_frames(writer, ours.fileno(), f)
            writer.close()

        async def receive() -> bytes:
            data = bytearray()
            while chunk := await loop.sock_recv(theirs, 1000):
                data += chunk
            return bytes(data)

        _, received = await asyncio.wait_for(asyncio.gather(send(), receive()), 30)
        theirs.close()
        assert received == expected

    asyncio.run(run())
    assert len(partial) >= 5  # the socket took the regions a little at a time
    assert all(r.fd == -1 for r in regions)


def test_a_region_truncated_under_its_send_fails_the_write(tmp_path: Path) -> None:
    """A region whose file holds fewer bytes than it says (truncated since the read) is not
    sent short: the length prefix is on the wire, so the write fails (the listener closes)."""
    region = _region(tmp_path, "a", b"x" * 100, 0, 100)
    os.truncate(tmp_path / "a", 40)

    async def run() -> None:
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
        _, writer = await asyncio.open_connection(sock=ours)
        frame_writer.prepare(writer)
        try:
            with pytest.raises(OSError, match="truncated"):
                await write_frames(writer, ours.fileno(), [b"\0\0\0\x64", region])
        finally:
            writer.close()
            theirs.close()

    asyncio.run(run())
    assert region.fd == -1


def test_a_fetch_sends_its_records_from_a_deleted_segment_with_sendfile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plaintext Fetch whose records are regions of a real log's segments: the segments are
    deleted after the read (retention racing the send) and the client still gets the read's
    bytes, sent with ``sendfile``, none of them through ``writev``."""
    log = LogBuilder(tmp_path).with_config(segment_bytes=300_000).build()
    rng = random.Random(11)
    for _ in range(120):
        log.append(make_batch(4, 1000, fill=rng.randrange(0x41, 0x5B)))
    expected = {("a", 0): log.read(0, 400_000), ("a", 1): log.read(300, 120_000)}
    regions = {("a", 0): log.read_region(0, 400_000), ("a", 1): log.read_region(300, 120_000)}
    assert all(isinstance(r, FileRegion) for r in regions.values())
    assert len(log.segments) > 1

    def records(topic: str, partition: int) -> Any:
        region = regions[topic, partition]
        log.close()
        for path in tmp_path.glob("*.log"):  # retention deletes the segments meanwhile
            path.unlink()
        return region

    sent: list[int] = []
    written: list[Any] = []
    real_sendfile, real_writev = os.sendfile, os.writev

    def spying_sendfile(out_fd: int, in_fd: int, offset: int | None, count: int) -> int:
        n = real_sendfile(out_fd, in_fd, offset, count)
        sent.append(n)
        return n

    def spying_writev(fd: int, buffers: Any) -> int:
        written.extend(bytes(b) for b in buffers)
        return real_writev(fd, buffers)

    monkeypatch.setattr(os, "sendfile", spying_sendfile)
    monkeypatch.setattr(os, "writev", spying_writev)

    async def run() -> bytes:
        async with serving(kafka_listener.RecordsApi(records)) as (_, port):  # type: ignore[arg-type]
            client = socket.socket()
            client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a slow reader
            client.setblocking(False)
            await asyncio.get_running_loop().sock_connect(client, ("127.0.0.1", port))
            reader, writer = await asyncio.open_connection(sock=client, limit=1 << 16)
            try:
                writer.write(_fetch_frame(9, {"a": [0, 1]}))
                [frame] = await _read_frames(reader, 1)
            finally:
                writer.close()
        return frame

    frame = asyncio.run(run())
    correlation_id, body = decode_response(FETCH, VERSION, frame)
    assert correlation_id == 9
    got = {(t.topic, p.partition_index): p.records for t in body.responses for p in t.partitions}
    assert got == expected
    assert sum(sent) == sum(len(r) for r in expected.values())
    assert sum(len(b) for b in written) < 1000  # the fields only
    assert all(r.fd == -1 for r in regions.values() if isinstance(r, FileRegion))
