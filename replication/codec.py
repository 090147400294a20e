"""Proto <-> dataclass conversion for the broker APIs: the one place broker protos are touched.

The dataclasses of `replication.messages` carry the names and field names of
``proto/kraft/v1/broker.proto``, so this module reuses the by-name converter of
`kraft.transport.controller_codec` (``fill_message`` / ``read_message``, driven by type hints)
with the broker's generated module. The mapping table in that module's docstring holds here
too; in particular ``X | None`` of a dataclass is a singular message field whose presence
means "set" (the ``current_leader`` and ``diverging_epoch`` hints), and ``bytes`` fields
(``records``) are copied as they are: the codec never parses record batches.
"""

from __future__ import annotations

from typing import Any, TypeVar

from google.protobuf.message import Message

from kraft._generated import broker_pb2 as pb

# NB: the generic converter's helpers are module-private there; they are the approach the
# controller codec documents and tests, shared here rather than copied.
from kraft.transport.controller_codec import fill_message, read_message

T = TypeVar("T")


def encode(message: Any) -> Message:
    """The proto message of the same name in ``broker.proto`` for a dataclass message."""
    out: Message = getattr(pb, type(message).__name__)()
    fill_message(out, message)
    return out


def decode(message: Message, cls: type[T]) -> T:
    """The dataclass ``cls`` for a proto message.

    An unknown `ErrorCode` decodes as UNKNOWN_SERVER_ERROR (a newer broker's code).
    """
    return read_message(message, cls)


def decode_bytes(data: bytes, cls: type[T]) -> T:
    """`decode` from serialized proto bytes (the message type is the one named like ``cls``)."""
    proto: Message = getattr(pb, cls.__name__).FromString(data)
    return read_message(proto, cls)


__all__ = ["decode", "decode_bytes", "encode"]
