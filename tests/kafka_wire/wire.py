"""A Kafka client's side of the wire for tests: request frames in, responses decoded (kio)."""

from __future__ import annotations

import socket
import struct
from collections.abc import Sequence
from typing import Any, cast

from kio.index import load_request_schema, load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0

from replication.broker.kafka.entities import Chunk, build, read_entity, to_chunks


def request_frame(
    api_key: int,
    version: int,
    body: Any,
    *,
    correlation_id: int = 1,
    client_id: str | None = "test",
) -> bytes:
    """One size-prefixed request frame; ``body`` a kio request entity or a mapping of its
    fields (built for ``version``)."""
    cls = load_request_schema(api_key, version)
    entity = body if isinstance(body, cls) else build(cls, body)
    header_cls = cls.__header_schema__
    header = build(
        header_cls,
        {
            "request_api_key": api_key,
            "request_api_version": version,
            "correlation_id": correlation_id,
            "client_id": client_id,
        },
    )
    assert header_cls in (RequestHeaderV1, RequestHeaderV2)
    payload = to_chunks(header).joined() + to_chunks(entity).joined()
    return struct.pack(">i", len(payload)) + payload


def frame_bytes(chunks: Sequence[Chunk]) -> bytes:
    """Encoded frames as one byte string (frames without a `FileRegion`)."""
    return b"".join(cast(Sequence[bytes], chunks))


def split_frames(data: bytes) -> list[bytes]:
    """The frames of ``data`` (whole frames only), without their size prefixes."""
    out = []
    while len(data) >= 4:
        (size,) = struct.unpack_from(">i", data, 0)
        out.append(data[4 : 4 + size])
        data = data[4 + size :]
    return out


def decode_response(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, kio response entity) of one response frame (without its size)."""
    cls = load_response_schema(api_key, version)
    header, offset = read_entity(cls.__header_schema__, frame, 0)
    body, _ = read_entity(cls, frame, offset)
    return int(header.correlation_id), body


def correlation_id(frame: bytes) -> int:
    header, _ = read_entity(ResponseHeaderV0, frame, 0)
    return int(header.correlation_id)


def call(address: str, api_key: int, version: int, body: dict[str, Any]) -> Any:
    """One request to one Kafka listener (``host:port``); its decoded response."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(request_frame(api_key, version, body))
        data = b""
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
            chunk = sock.recv(65536)
            assert chunk, "connection closed"
            data += chunk
    return decode_response(api_key, version, data[4:])[1]
