"""Hostile Kafka-protocol request frames, generated from kio's request schemas.

`KafkaPayloadFuzzer` turns a `random.Random` into request frames for the Kafka listener:

- `request`: a structurally valid request of one API key and version (a kio request entity
  with random field values, encoded by kio): values weighted towards the ones that break code
  (0, -1, the integer extremes, empty, 10,000-character and reserved names, unknown topic ids,
  long arrays, nulls where nullable), topic names often of topics that exist (so the handlers
  get past "unknown topic"), record batches valid or broken (wrong CRC, wrong length,
  truncated, garbage). Waiting fields (a Fetch's ``max_wait``, a Produce's ``timeout``, ...)
  stay short, since a broker waits as long as it is asked to;
- `mutated`: a valid frame broken at the frame layer, of one of `MUTATIONS`.

Pure: no sockets, no clock; every byte comes from the generator, so one call replays from
its seed (`replication.nemesis.kafka_fuzz`).
"""

from __future__ import annotations

import dataclasses
import datetime
import random
import struct
import typing
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final, final

from kio.index import load_request_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2

from replication.broker.kafka.entities import to_chunks
from replication.nemesis.fuzz_messages import STRING_EDGES
from storage.records import build_batch

MUTATIONS: Final = (
    "bit_flips",
    "truncated",
    "size_short",
    "size_long",
    "size_over_max",
    "size_negative",
    "size_tiny",
    "unknown_api_key",
    "unserved_version",
    "garbage_header",
    "garbage",
    "after_valid",
)
"""Frame-level breakage: flipped bits; a frame cut short; a size prefix smaller or larger than
the frame; a size over ``socket.request.max.bytes``, negative, or smaller than a header; an API
key the broker does not serve; a served key at a version it does not serve; random bytes after
the API key and version; random bytes; any of these pipelined behind a valid request."""

CLOSE_AT_ONCE: Final = frozenset({"size_over_max", "size_negative", "size_tiny", "unknown_api_key"})
"""Mutations the broker must answer by closing the connection without waiting for more
bytes (the others may leave it waiting for the rest of a frame: the client half-closes)."""

_INT_EDGES: Final = {
    "int8": (0, 1, -1, 127, -128),
    "int16": (0, 1, -1, 2**15 - 1, -(2**15), 255),
    "int32": (0, 1, -1, 2**31 - 1, -(2**31), 2**30, 65536),
    "int64": (0, 1, -1, 2**63 - 1, -(2**63), 2**32, 2**53 + 1),
}
_INT_BITS: Final = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint16": 16}
_WAIT_FIELDS: Final = frozenset({"max_wait", "timeout", "timeout_ms", "rebalance_timeout"})
"""Fields a broker waits on: kept in `_WAIT_MS` (a 24-day ``max_wait`` is not a hang)."""
_WAIT_MS: Final = (-1, 0, 1, 10, 100, 500)
_ARRAY_LENGTHS: Final = (0, 1, 1, 2, 3, 50)
_ARRAY_BUDGET: Final = 400
"""Array elements per request, all depths together (a long array of long arrays would cost
the fuzzer more than the broker)."""
_SIZE = struct.Struct(">i")


@final
class KafkaPayloadFuzzer:
    """Request frames from one generator (see the module docstring)."""

    def __init__(self, rng: random.Random, topics: Sequence[str] = ()) -> None:
        self.rng = rng
        self._topics = tuple(topics)
        self._budget = _ARRAY_BUDGET

    # --- valid requests ----------------------------------------------------------------------

    def request(self, api_key: int, version: int, correlation_id: int) -> tuple[Any, bytes]:
        """A random request entity of ``api_key`` at ``version`` and its frame."""
        self._budget = _ARRAY_BUDGET
        cls = load_request_schema(api_key, version)
        body = self.entity(cls)
        return body, frame(api_key, version, body, correlation_id, self._client_id())

    def entity(self, cls: type[Any], depth: int = 0) -> Any:
        """A ``cls`` (any kio entity) with random field values."""
        hints = _hints(cls)
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            values[f.name] = self._value(f, hints[f.name], depth)
        return cls(**values)

    def _value(self, f: dataclasses.Field[Any], hint: Any, depth: int) -> Any:
        rng = self.rng
        nullable = False
        if isinstance(hint, _UNION_TYPES) or typing.get_origin(hint) is typing.Union:
            args = typing.get_args(hint)
            rest = [a for a in args if a is not type(None)]
            nullable = len(rest) < len(args)
            hint = rest[0]
        if nullable and rng.random() < 0.1:
            return None
        if typing.get_origin(hint) is tuple:
            item = typing.get_args(hint)[0]
            length = min(rng.choice(_ARRAY_LENGTHS), max(self._budget, 0))
            if depth >= 3:
                length = min(length, 1)
            self._budget -= length
            return tuple(self._item(f, item, depth) for _ in range(length))
        if dataclasses.is_dataclass(hint) and isinstance(hint, type):
            return self.entity(hint, depth + 1)
        return self._primitive(f.name, f.metadata.get("kafka_type", ""), nullable)

    def _item(self, f: dataclasses.Field[Any], item: Any, depth: int) -> Any:
        if dataclasses.is_dataclass(item) and isinstance(item, type):
            return self.entity(item, depth + 1)
        return self._primitive(f.name, f.metadata.get("kafka_type", ""), False)

    def _primitive(self, name: str, kafka_type: str, nullable: bool) -> Any:
        rng = self.rng
        if kafka_type in _INT_BITS:
            bits = _INT_BITS[kafka_type]
            if kafka_type == "uint16":
                return rng.choice((0, 1, 2**16 - 1, rng.randrange(2**16)))
            if rng.random() < 0.6:
                return rng.choice(_INT_EDGES[kafka_type])
            if rng.random() < 0.5:
                return rng.randrange(-1, 100)
            return rng.randrange(-(2 ** (bits - 1)), 2 ** (bits - 1))
        match kafka_type:
            case "bool":
                return rng.random() < 0.5
            case "string":
                return self._string(name)
            case "bytes":
                return rng.choice((b"", b"\0", rng.randbytes(rng.randrange(64))))
            case "records":
                return self.records(nullable)
            case "uuid":
                choice = rng.random()
                if choice < 0.3:
                    return uuid.UUID(int=0)
                return uuid.UUID(int=rng.getrandbits(128))
            case "float64":
                return rng.choice((0.0, -1.0, 1e308, rng.random()))
            case "timedelta_i32" | "timedelta_i64":
                if name in _WAIT_FIELDS:
                    return datetime.timedelta(milliseconds=rng.choice(_WAIT_MS))
                high = 2**31 - 1 if kafka_type == "timedelta_i32" else 2**40
                ms = rng.choice((0, -1, 1, 1000, high, rng.randrange(high)))
                return datetime.timedelta(milliseconds=ms)
            case "datetime_i64":
                ms = rng.choice((0, 1, 2**41, rng.randrange(2**42)))
                return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
        raise ValueError(f"no generator for kafka_type {kafka_type!r} (field {name})")

    def _string(self, name: str) -> str:
        rng = self.rng
        roll = rng.random()
        if self._topics and roll < 0.4 and ("topic" in name or name == "name"):
            return rng.choice(self._topics)
        if roll < 0.7:
            return rng.choice(STRING_EDGES)
        alphabet = "abcXYZ-._09\u00e9\x00"
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 40)))

    def records(self, nullable: bool = True) -> bytes | None:
        """A record batch, valid or broken, or none."""
        rng = self.rng
        values = [rng.randbytes(rng.randrange(0, 200)) for _ in range(rng.randrange(1, 5))]
        batch = build_batch(values, timestamp_ms=rng.choice((0, 1_700_000_000_000, -1)))
        match rng.randrange(8):
            case 0 | 1 | 2:
                return batch
            case 3:  # wrong CRC
                broken = bytearray(batch)
                broken[-1] ^= 0xFF
                return bytes(broken)
            case 4:  # wrong batch length
                broken = bytearray(batch)
                struct.pack_into(">i", broken, 8, rng.choice((-1, 0, 2**31 - 1, 12)))
                return bytes(broken)
            case 5:
                return batch[: rng.randrange(len(batch))]
            case 6:
                return rng.randbytes(rng.randrange(0, 300))
            case _:
                return None if nullable else b""

    def _client_id(self) -> str | None:
        return self.rng.choice(("kraft-fuzz", "", None, "x" * 1000))

    # --- broken frames -----------------------------------------------------------------------

    def mutated(
        self,
        valid: bytes,
        supported: Mapping[int, tuple[int, int]],
        max_request_bytes: int,
        kind: str | None = None,
    ) -> tuple[str, bytes]:
        """``(kind, bytes)``: ``valid`` (a whole frame) broken as ``kind`` says."""
        rng = self.rng
        kind = kind or rng.choice(MUTATIONS)
        body = valid[4:]
        match kind:
            case "bit_flips":
                broken = bytearray(body)
                for _ in range(rng.randrange(1, 9)):
                    bit = rng.randrange(len(broken) * 8)
                    broken[bit // 8] ^= 1 << (bit % 8)
                return kind, _SIZE.pack(len(broken)) + bytes(broken)
            case "truncated":
                return kind, valid[: rng.randrange(1, len(valid))]
            case "size_short":
                return kind, _SIZE.pack(rng.randrange(8, max(9, len(body)))) + body
            case "size_long":
                extra = rng.choice((1, 100, 65536, max_request_bytes - len(body)))
                return kind, _SIZE.pack(len(body) + max(extra, 1)) + body
            case "size_over_max":
                size = rng.choice((max_request_bytes + 1, 2**31 - 1))
                return kind, _SIZE.pack(size) + body[: rng.randrange(len(body) + 1)]
            case "size_negative":
                size = rng.choice((-1, -(2**31), -rng.randrange(1, 2**31)))
                return kind, _SIZE.pack(size) + body
            case "size_tiny":
                size = rng.randrange(0, 8)
                return kind, _SIZE.pack(size) + body[:size]
            case "unknown_api_key":
                key = rng.choice((-1, -(2**15), 2**15 - 1, 1000, 67, *range(20, 80)))
                while key in supported:
                    key = rng.randrange(-(2**15), 2**15)
                return kind, _SIZE.pack(len(body)) + struct.pack(">h", key) + body[2:]
            case "unserved_version":
                key = struct.unpack_from(">h", body, 0)[0]
                low, high = supported[key]
                version = rng.choice((low - 1, high + 1, -1, 2**15 - 1, high + 100))
                version = max(-(2**15), min(2**15 - 1, version))
                return kind, _SIZE.pack(len(body)) + body[:2] + struct.pack(">h", version) + body[
                    4:
                ]
            case "garbage_header":
                junk = rng.randbytes(rng.randrange(0, 64))
                if rng.random() < 0.5:  # a client id length that lies
                    junk = struct.pack(">h", rng.choice((-2, 30000, 2**15 - 1))) + junk
                header = body[:8] + junk
                return kind, _SIZE.pack(len(header)) + header
            case "garbage":
                junk = rng.randbytes(rng.randrange(0, 512))
                return kind, _SIZE.pack(len(junk)) + junk
            case "after_valid":
                inner, broken_frame = self.mutated(
                    valid, supported, max_request_bytes, rng.choice(MUTATIONS[:-1])
                )
                return f"after_valid+{inner}", valid + broken_frame
        raise ValueError(f"unknown mutation {kind!r}")


def frame(
    api_key: int, version: int, body: Any, correlation_id: int, client_id: str | None
) -> bytes:
    """The size-prefixed frame of request entity ``body``."""
    header_cls = type(body).__header_schema__
    fields: dict[str, Any] = {
        "request_api_key": api_key,
        "request_api_version": version,
        "correlation_id": correlation_id,
        "client_id": client_id,
    }
    if header_cls is RequestHeaderV2:
        header: Any = RequestHeaderV2(**fields)
    else:
        header = RequestHeaderV1(**fields)
    chunks = to_chunks(header)
    to_chunks(body, chunks)
    return _SIZE.pack(chunks.size) + chunks.joined()


_UNION_TYPES: Final = (type(int | None),)
_HINTS: dict[type[Any], dict[str, Any]] = {}


def _hints(cls: type[Any]) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


__all__ = ["CLOSE_AT_ONCE", "MUTATIONS", "KafkaPayloadFuzzer", "frame"]
