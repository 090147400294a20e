"""A Produce answer every partition of which succeeded, encoded straight to bytes.

That answer is the one a producer gets for nearly every request, and the listener's costliest
part of it was the encoding: kio's entity tree (`entities.build`, a frozen dataclass per topic
and partition, each field checked) and kio's writers (a Python call per field). With them the
listener spent 132-139 µs of CPU on a librdkafka Produce request, without them 45 (``python -m
kraft.bench.kafka_listener``, docs/benchmarks.md). Any other answer (an error, a refused
or unknown topic, a moved leader with its endpoints) goes through kio as before, so every
refusal and error code is encoded by the one path that encodes them.

The layout is Kafka's ``ProduceResponse.json`` for versions 3 to 13 (what `handlers` serves),
with the fields such an answer leaves at their defaults: no record errors, a null error
message, no ``current_leader`` nor ``node_endpoints`` (tagged fields left out), throttle time
0. kio stays the schema's one home: ``tests/kafka_wire/test_produce_answer.py`` checks these
bytes against kio's encoding of the same answer for every served version.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import Final

from storage.records import encode_unsigned_varint

FLEXIBLE_VERSION: Final = 9
"""Produce is flexible (compact lengths, tagged fields) from v9 (KIP-482)."""
PRODUCE_TOPIC_IDS_VERSION: Final = 13
"""Produce names its topics by id from this version (KIP-516)."""

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_V3_PARTITION = struct.Struct(">ihqq")  # index, error code 0, base offset, log append time
_V5_PARTITION = struct.Struct(">ihqqq")  # ... and the log start offset
_V8_TAIL: Final = b"\0\0\0\0\xff\xff"  # record_errors: [] ; error_message: null
_FLEXIBLE_TAIL: Final = b"\x01\x00\x00"  # compact [] ; compact null ; no tagged fields
_NO_TAGS: Final = b"\x00"
_THROTTLE_ZERO: Final = b"\0\0\0\0"

PartitionAnswer = tuple[int, int, int, int]
"""(partition index, base offset, log append time ms, log start offset) of a success."""
TopicAnswer = tuple[str, uuid.UUID | None, Sequence[PartitionAnswer]]
"""(topic name, topic id (v13+), its partitions' answers)."""


def encode_produce_success(version: int, topics: Sequence[TopicAnswer]) -> bytes:
    """The body of a Produce ``version`` (3-13) answer of ``topics``, every partition NONE."""
    flexible = version >= FLEXIBLE_VERSION
    tail = _FLEXIBLE_TAIL if flexible else _V8_TAIL if version >= 8 else b""
    out = bytearray(_count(len(topics), flexible))
    for name, topic_id, partitions in topics:
        if version >= PRODUCE_TOPIC_IDS_VERSION:
            out += (topic_id or uuid.UUID(int=0)).bytes
        else:
            encoded = name.encode()
            out += encode_unsigned_varint(len(encoded) + 1) if flexible else _I16.pack(len(encoded))
            out += encoded
        out += _count(len(partitions), flexible)
        for index, base_offset, append_time, start_offset in partitions:
            if version >= 5:
                out += _V5_PARTITION.pack(index, 0, base_offset, append_time, start_offset)
            else:
                out += _V3_PARTITION.pack(index, 0, base_offset, append_time)
            out += tail
        if flexible:
            out += _NO_TAGS
    out += _THROTTLE_ZERO
    if flexible:
        out += _NO_TAGS
    return bytes(out)


def _count(n: int, flexible: bool) -> bytes:
    return encode_unsigned_varint(n + 1) if flexible else _I32.pack(n)


__all__ = ["PRODUCE_TOPIC_IDS_VERSION", "PartitionAnswer", "TopicAnswer", "encode_produce_success"]
