"""Hostile request payloads for every RPC, generated from the proto descriptors.

`PayloadFuzzer` turns a `random.Random` into the bytes of one request to a method, of one of
these kinds (`PAYLOAD_KINDS`):

- ``fields``: a message of the method's input type with random field values, weighted
  towards the values that break code: 0, -1, the int32 and int64 extremes, huge sizes and
  offsets, NaN and infinities, empty and 10,000-character strings, reserved topic names,
  unknown enum values, long repeated fields, nested messages; ``bytes`` fields get record
  batches, valid or broken (wrong CRC, wrong length, truncated, garbage);
- ``garbage``: bytes that are not the message (random, or a valid message of another type);
- ``truncated``: a valid random message cut short;
- ``oversized``: a message over the servers' request limit (100 MiB), rare and costly.

Everything is drawn from the one generator, so a seed replays a run; the test suite drives the
generator from hypothesis (``st.randoms()``), which also shrinks a failing case.
"""

from __future__ import annotations

import contextlib
import random
from typing import Any, Final, final

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from storage.records import build_batch

PAYLOAD_KINDS: Final = ("fields", "garbage", "truncated")
"""The kinds drawn by default; ``oversized`` is asked for explicitly (it costs 100 MiB)."""

OVERSIZED_BYTES: Final = 100 * 1024 * 1024 + 1024

REPEATED_BUDGET: Final = 2_000
"""Elements of repeated fields in one payload, all fields and depths together: a long field
(200 or 1,000 elements) still comes at any depth, but 1,000 nested messages no longer each
carry 1,000 more (payloads of 30 MB that cost the fuzzer more than the fuzzed node)."""

INT32_EDGES: Final = (0, 1, -1, 2**31 - 1, -(2**31), 2**30, 255, 65536)
INT64_EDGES: Final = (*INT32_EDGES, 2**63 - 1, -(2**63), 2**32, 2**53 + 1)
UINT32_EDGES: Final = (0, 1, 2**32 - 1, 2**31)
UINT64_EDGES: Final = (0, 1, 2**64 - 1, 2**63)
FLOAT_EDGES: Final = (0.0, -1.0, float("inf"), float("-inf"), float("nan"), 1e308, -1e-308)
STRING_EDGES: Final = (
    "",
    "a",
    "x" * 10_000,
    "__cluster_metadata",
    "__consumer_offsets",
    "../../etc/passwd",
    "\x00",
    "topic with spaces",
    "\u00e9\u4e2d\U0001f600",
    "a" * 250,
)

_TYPE = FieldDescriptor


@final
class PayloadFuzzer:
    """Request payloads from one generator (see the module docstring)."""

    def __init__(self, rng: random.Random, *, max_depth: int = 3) -> None:
        self.rng = rng
        self._max_depth = max_depth
        self._budget = REPEATED_BUDGET

    # --- payloads ----------------------------------------------------------------------------

    def payload(self, descriptor: Descriptor, kind: str | None = None) -> tuple[str, bytes]:
        """``(kind, bytes)`` of one request of type ``descriptor``."""
        kind = kind or self.rng.choice(PAYLOAD_KINDS)
        self._budget = REPEATED_BUDGET
        match kind:
            case "fields":
                return kind, self.message(descriptor).SerializeToString()
            case "garbage":
                if self.rng.random() < 0.5:
                    return kind, self.rng.randbytes(self.rng.choice((1, 7, 64, 4096)))
                return kind, self._bytes_value()
            case "truncated":
                data = self.message(descriptor).SerializeToString()
                return kind, data[: self.rng.randrange(len(data))] if data else b"\x0a"
            case "oversized":
                return kind, b"\x0a" + _varint(OVERSIZED_BYTES) + bytes(OVERSIZED_BYTES)
        raise ValueError(f"unknown payload kind {kind!r}")

    def message(self, descriptor: Descriptor, depth: int = 0) -> Message:
        """A message of type ``descriptor`` with random field values."""
        message = GetMessageClass(descriptor)()
        for field in descriptor.fields:
            if self.rng.random() < 0.3:
                continue  # left unset
            # A value protobuf itself refuses (out of range...) leaves the field unset.
            with contextlib.suppress(ValueError, TypeError, OverflowError):
                self._fill(message, field, depth)
        return message

    # --- fields ------------------------------------------------------------------------------

    def _fill(self, message: Message, field: FieldDescriptor, depth: int) -> None:
        is_repeated = field.is_repeated
        if field.type == _TYPE.TYPE_MESSAGE:
            nested = field.message_type
            assert nested is not None
            if depth >= self._max_depth or nested.GetOptions().map_entry:
                return  # maps are left empty (no map fields on the wire today)
            if is_repeated:
                container = getattr(message, field.name)
                for _ in range(self._count()):
                    container.add().CopyFrom(self.message(nested, depth + 1))
            else:
                getattr(message, field.name).CopyFrom(self.message(nested, depth + 1))
            return
        if is_repeated:
            getattr(message, field.name).extend(self._scalar(field) for _ in range(self._count()))
        else:
            setattr(message, field.name, self._scalar(field))

    def _count(self) -> int:
        roll = self.rng.random()
        count = self.rng.choice((200, 1000)) if roll < 0.05 else self.rng.randrange(0, 5)
        count = min(count, self._budget)
        self._budget -= count
        return count

    def _scalar(self, field: FieldDescriptor) -> Any:
        rng = self.rng
        match field.type:
            case _TYPE.TYPE_INT32 | _TYPE.TYPE_SINT32 | _TYPE.TYPE_SFIXED32:
                return self._int(INT32_EDGES, -(2**31), 2**31 - 1)
            case _TYPE.TYPE_INT64 | _TYPE.TYPE_SINT64 | _TYPE.TYPE_SFIXED64:
                return self._int(INT64_EDGES, -(2**63), 2**63 - 1)
            case _TYPE.TYPE_UINT32 | _TYPE.TYPE_FIXED32:
                return self._int(UINT32_EDGES, 0, 2**32 - 1)
            case _TYPE.TYPE_UINT64 | _TYPE.TYPE_FIXED64:
                return self._int(UINT64_EDGES, 0, 2**64 - 1)
            case _TYPE.TYPE_BOOL:
                return rng.random() < 0.5
            case _TYPE.TYPE_FLOAT | _TYPE.TYPE_DOUBLE:
                return rng.choice(FLOAT_EDGES) if rng.random() < 0.6 else rng.uniform(-1e9, 1e9)
            case _TYPE.TYPE_STRING:
                if rng.random() < 0.6:
                    return rng.choice(STRING_EDGES)
                return "".join(chr(rng.randrange(32, 0x2FFF)) for _ in range(rng.randrange(40)))
            case _TYPE.TYPE_BYTES:
                return self._bytes_value()
            case _TYPE.TYPE_ENUM:
                assert field.enum_type is not None
                values = [v.number for v in field.enum_type.values]
                return rng.choice(values) if rng.random() < 0.7 else rng.choice((-1, 99, 2**31 - 1))
        raise ValueError(f"unsupported field type {field.type}")

    def _int(self, edges: tuple[int, ...], low: int, high: int) -> int:
        roll = self.rng.random()
        if roll < 0.5:
            return self.rng.choice(edges)
        if roll < 0.75:
            return self.rng.randrange(0, 10)
        return self.rng.randint(low, high)

    def _bytes_value(self) -> bytes:
        """Record batches, valid or broken, or plain garbage."""
        rng = self.rng
        batch = build_batch(
            [rng.randbytes(rng.randrange(0, 200)) for _ in range(rng.randrange(1, 5))],
            timestamp_ms=rng.choice((0, -1, 1_700_000_000_000, 2**62)),
            base_offset=rng.choice((0, 5, 2**40)),
            producer_id=rng.choice((-1, 0, 7, 2**62)),
            producer_epoch=rng.choice((-1, 0, 32767)),
            base_sequence=rng.choice((-1, 0, 2**31 - 1)),
        )
        match rng.randrange(7):
            case 0:
                return batch
            case 1:  # wrong CRC
                data = bytearray(batch)
                data[-1] ^= 0xFF
                return bytes(data)
            case 2:  # a batch length that lies (longer, then shorter)
                data = bytearray(batch)
                data[8:12] = rng.choice((2**31 - 1, 0, 5, len(batch) * 2)).to_bytes(4, "big")
                return bytes(data)
            case 3:  # truncated
                return batch[: rng.randrange(1, len(batch))]
            case 4:  # two batches, the second broken
                return batch + batch[: rng.randrange(1, len(batch))]
            case 5:
                return b""
            case _:
                return rng.randbytes(rng.randrange(1, 300))


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


__all__ = ["OVERSIZED_BYTES", "PAYLOAD_KINDS", "REPEATED_BUDGET", "PayloadFuzzer"]
