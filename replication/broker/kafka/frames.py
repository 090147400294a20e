"""The Kafka protocol's framing, sans-IO (as h11 is): bytes in, requests out, responses out in
order. No sockets, no clock, no event loop: the listener (`replication.broker.kafka.listener`)
feeds it what it reads and writes what it returns.

Theory of operation
-------------------
Every request and response is a frame: a 4-byte big-endian size, then that many bytes
(Kafka's ``NetworkReceive``). A request frame starts with its header: API key (int16), API
version (int16), correlation id (int32), client id (nullable string), and, for a flexible
version (request header v2), tagged fields. The body follows, in the version's schema.

`KafkaConnection.receive_data` buffers bytes; `next_event` returns the next `Request` (kio's
header and body entities, decoded), `NEED_DATA`, or a `Closed` with the reason the connection
must close (Kafka closes rather than answers):

- a frame size over ``socket.request.max.bytes`` (Kafka's ``InvalidReceiveException``), or < 0;
- an API key this broker does not serve (Kafka: ``InvalidRequestException``, closed);
- a version of a served API outside its range, except ApiVersions (below);
- a header or body that does not parse (bytes after the body are ignored, as Kafka does), or
  that has a null where its schema allows none (kio reads one; the handlers would iterate it).

*ApiVersions of an unknown version* (KIP-511): a client newer than the broker sends its own
newest ApiVersions; the broker answers in the v0 format (the one every client can read) with
UNSUPPORTED_VERSION and its ranges, and the client retries with a version it finds there.
`next_event` returns such a request as a `Request` with ``body=None`` and ``unsupported=True``.

*Order.* Kafka answers a connection's requests in the order they came (clients pipeline and
match by correlation id, librdkafka insists on the order). Requests are numbered as they are
decoded; `send` takes a response (or `skip`, for a Produce with acks=0, which Kafka does not
answer) in any order and returns the frames that may go out now, earliest first.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from kio.index import load_request_schema, load_response_schema
from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.static.primitive import i32

from kraft.transport.unreachable import KAFKA_LISTENER_REPLY
from replication.broker.kafka.entities import (
    Chunk,
    ChunkWriter,
    check_lengths,
    null_field,
    read_entity,
    to_chunks,
)

DEFAULT_MAX_REQUEST_BYTES: Final = 104_857_600
"""Kafka's ``socket.request.max.bytes`` default (100 MiB)."""
API_VERSIONS_KEY: Final = 18
_SIZE = struct.Struct(">i")
_HEADER_PREFIX = struct.Struct(">hhi")
_END_OF_STREAM = "end of stream"


@dataclass(frozen=True, slots=True)
class Request:
    """One decoded request. ``sequence`` orders its response among the connection's."""

    sequence: int
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str
    body: Any
    """The kio request entity; None for an unsupported ApiVersions version."""
    unsupported: bool = False


@dataclass(frozen=True, slots=True)
class Closed:
    """The connection must close; ``reason`` says why (for the log), after ``reply`` is sent
    (a line for a client of another protocol, so that it can say where it is; usually none)."""

    reason: str
    reply: bytes = b""


class NeedData:
    """More bytes are needed before the next request."""


@dataclass(frozen=True, slots=True)
class Encoded:
    """A response body a handler encoded itself (`replication.broker.kafka.apis.produce_answer`),
    sent as it is after the response header."""

    body: bytes


NEED_DATA: Final = NeedData()
Event = Request | Closed | NeedData


@dataclass(slots=True)
class _Pending:
    chunks: list[Chunk] | None = None
    """The encoded frame once its response is ready; [] when nothing is sent (acks=0)."""
    done: bool = False


@dataclass(slots=True)
class KafkaConnection:
    """One client connection's framing state (see the module docstring)."""

    supported: Mapping[int, tuple[int, int]]
    """API key -> (min version, max version) served: what ApiVersions advertises."""
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    _buffer: bytearray = field(default_factory=bytearray)
    _closed: Closed | None = None
    _next_sequence: int = 0
    _next_to_send: int = 0
    _pending: dict[int, _Pending] = field(default_factory=dict)

    def receive_data(self, data: bytes) -> None:
        """Bytes read from the socket (b"" at end of stream)."""
        if not data and self._closed is None:
            self._closed = Closed(_END_OF_STREAM)
        self._buffer += data

    def next_event(self) -> Event:
        """The next request, NEED_DATA, or Closed (and Closed ever after)."""
        if self._closed is not None and self._closed.reason != _END_OF_STREAM:
            return self._closed
        event = self._parse()
        if event is NEED_DATA and self._closed is not None:
            return self._closed  # end of stream: a partial frame is dropped
        return event

    def _parse(self) -> Event:
        if len(self._buffer) < 4:
            return NEED_DATA
        (size,) = _SIZE.unpack_from(self._buffer, 0)
        if size < _HEADER_PREFIX.size or size > self.max_request_bytes:
            foreign = foreign_protocol(bytes(self._buffer[:4]))
            if foreign is not None:
                return self._close(*foreign)
            return self._close(
                f"frame of {size} bytes outside [{_HEADER_PREFIX.size}, "
                f"{self.max_request_bytes}] (socket.request.max.bytes)"
            )
        if len(self._buffer) < 4 + size:
            return NEED_DATA
        with memoryview(self._buffer) as view:
            frame = bytes(view[4 : 4 + size])  # the one copy of the request
        del self._buffer[: 4 + size]
        return self._decode(frame)

    def _close(self, reason: str, reply: bytes = b"") -> Closed:
        self._closed = Closed(reason, reply)
        self._buffer.clear()
        return self._closed

    def _decode(self, frame: bytes) -> Event:
        api_key, version, correlation_id = _HEADER_PREFIX.unpack_from(frame, 0)
        served = self.supported.get(api_key)
        if served is None:
            return self._close(f"unknown or unserved API key {api_key}")
        if not served[0] <= version <= served[1]:
            if api_key != API_VERSIONS_KEY:
                return self._close(f"API key {api_key} version {version} is not served")
            # KIP-511: read nothing more (the header's layout may be one we do not know).
            return self._new_request(api_key, version, correlation_id, "", None, True)
        try:
            body_cls = request_class(api_key, version)
            # NB: lengths first: kio's native reader trusts them (see `check_lengths`).
            check_lengths(body_cls, frame, check_lengths(body_cls.__header_schema__, frame, 0))
            header, offset = read_entity(body_cls.__header_schema__, frame, 0)
            body, end = read_entity(body_cls, frame, offset)
        except Exception as e:  # any decoding failure closes, as Kafka does
            return self._close(f"malformed request (API key {api_key} v{version}): {e!r:.200}")
        if (null := null_field(body)) is not None:
            return self._close(
                f"malformed request (API key {api_key} v{version}): {null} is null, which its "
                f"schema does not allow"
            )
        # NB: bytes after the body are ignored, as Kafka's broker ignores them (librdkafka
        # 2.16's Metadata v12 carries three).
        del end
        client_id = getattr(header, "client_id", None) or ""
        return self._new_request(api_key, version, correlation_id, client_id, body, False)

    def _new_request(
        self,
        api_key: int,
        version: int,
        correlation_id: int,
        client_id: str,
        body: Any,
        unsupported: bool,
    ) -> Request:
        sequence = self._next_sequence
        self._next_sequence += 1
        self._pending[sequence] = _Pending()
        return Request(sequence, api_key, version, correlation_id, client_id, body, unsupported)

    @property
    def in_flight(self) -> int:
        """Requests decoded whose frames have not been returned by `send` or `skip` yet."""
        return len(self._pending)

    @property
    def sent(self) -> int:
        """How many requests (from the first) have had their frames returned."""
        return self._next_to_send

    def send(self, request: Request, response: Any) -> list[Chunk]:
        """Encode ``response`` (a kio entity of ``request``'s API and version) and return every
        frame that may now be written, in request order (maybe none yet, maybe several)."""
        header_cls = type(response).__header_schema__
        writer = ChunkWriter()
        writer.write(b"\0\0\0\0")  # the size, patched below
        to_chunks(build_header(header_cls, request.correlation_id), writer)
        to_chunks(response, writer)
        writer.chunks[0] = _SIZE.pack(writer.size - 4)
        return self._ready(request.sequence, writer.chunks)

    def send_encoded(self, request: Request, body: bytes) -> list[Chunk]:
        """As `send`, for a response body already encoded in ``request``'s version."""
        header_cls = response_class(request.api_key, request.api_version).__header_schema__
        header = _SIZE.pack(request.correlation_id)
        if header_cls is ResponseHeaderV1:
            header += b"\0"  # no tagged fields
        size = _SIZE.pack(len(header) + len(body))
        return self._ready(request.sequence, [size, header, body])

    def skip(self, request: Request) -> list[Chunk]:
        """No response for ``request`` (Produce with acks=0); returns the frames now due."""
        return self._ready(request.sequence, [])

    def unsupported_api_versions(self, request: Request) -> list[Chunk]:
        """KIP-511: the v0 ApiVersions answer with UNSUPPORTED_VERSION and our ranges."""
        response = ApiVersionsResponseV0(
            error_code=KioErrorCode.unsupported_version,
            api_keys=api_version_entries(self.supported, ApiVersionV0),
        )
        writer = ChunkWriter()
        writer.write(b"\0\0\0\0")
        to_chunks(ResponseHeaderV0(correlation_id=i32(request.correlation_id)), writer)
        to_chunks(response, writer)
        writer.chunks[0] = _SIZE.pack(writer.size - 4)
        return self._ready(request.sequence, writer.chunks)

    def _ready(self, sequence: int, chunks: list[Chunk]) -> list[Chunk]:
        pending = self._pending.get(sequence)
        assert pending is not None and not pending.done, f"request {sequence} answered twice"
        pending.chunks, pending.done = chunks, True
        out: list[Chunk] = []
        while (head := self._pending.get(self._next_to_send)) is not None and head.done:
            out.extend(head.chunks or ())
            del self._pending[self._next_to_send]
            self._next_to_send += 1
        return out


_HTTP1_REPLY: Final = (
    b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(KAFKA_LISTENER_REPLY), KAFKA_LISTENER_REPLY)
)

_FOREIGN_PREFIXES: Final = (
    (
        b"PRI ",
        "an HTTP/2 client (gRPC: kraft's own clients?) on a Kafka listener; kraft's clients "
        "connect to the broker's gRPC port (`kraft cluster env` prints both)",
        KAFKA_LISTENER_REPLY,  # a gRPC client reads it as a bad first frame and names it
    ),
    (
        b"\x16\x03",
        "a TLS handshake on a PLAINTEXT listener; the client has security.protocol=SSL: point "
        "it at an SSL listener or use PLAINTEXT",
        b"",
    ),
    *(
        (
            method,
            "an HTTP/1 request on a Kafka listener (a browser, curl, a health check?)",
            _HTTP1_REPLY,
        )
        for method in (b"GET ", b"POST", b"HEAD", b"PUT ")
    ),
)


def foreign_protocol(prefix: bytes) -> tuple[str, bytes] | None:
    """What another protocol's first four bytes say about the client that sent them (the
    reason to log) and what to answer it before closing, or None: read as a Kafka frame's size
    they are out of range, and the size alone explains nothing."""
    for start, meaning, reply in _FOREIGN_PREFIXES:
        if prefix.startswith(start):
            return meaning, reply
    return None


def build_header(header_cls: type[Any], correlation_id: int) -> Any:
    if header_cls is ResponseHeaderV1:
        return ResponseHeaderV1(correlation_id=i32(correlation_id))
    return ResponseHeaderV0(correlation_id=i32(correlation_id))


def api_version_entries(
    supported: Mapping[int, tuple[int, int]], entry: Callable[..., Any]
) -> tuple[Any, ...]:
    return tuple(
        entry(api_key=key, min_version=low, max_version=high)
        for key, (low, high) in sorted(supported.items())
    )


@functools.cache
def request_class(api_key: int, version: int) -> type[Any]:
    """kio's request schema of an API version. Cached: kio resolves it by a dynamic import
    on every call (about 50-170 µs, twice per request before the cache).

    Raises:
        UnknownEntity, UnknownAPIKey: kio knows no such schema (not cached).
    """
    return load_request_schema(api_key, version)


@functools.cache
def response_class(api_key: int, version: int) -> type[Any]:
    """kio's response schema of an API version (cached, as `request_class`)."""
    return load_response_schema(api_key, version)


__all__ = [
    "API_VERSIONS_KEY",
    "DEFAULT_MAX_REQUEST_BYTES",
    "NEED_DATA",
    "Closed",
    "Encoded",
    "Event",
    "KafkaConnection",
    "NeedData",
    "Request",
    "api_version_entries",
    "foreign_protocol",
    "request_class",
    "response_class",
]
