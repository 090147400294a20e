"""kio entities from plain values, and entities to chunks: the two helpers every converter uses.

kio (`docs/kafka-compatibility.md`) generates one frozen dataclass per message and version from
Kafka's JSON schemas. A converter describes a response once, as nested mappings keyed by kio's
field names, for the newest version; `build` instantiates it for the version the client asked
for, dropping the fields that version lacks and filling the ones it needs but the mapping does
not name with the schema default (or the type's zero). So no converter is written per version,
and no encoder but one (`produce_answer`, the common Produce answer): kio's writers encode.

`to_chunks` encodes an entity into a list of byte strings. kio's writers call ``write`` once per
primitive and once per ``bytes``/``records`` field, so a record batch reaches the chunk list by
identity: a fetch response's segment bytes are never copied here (`frame_writer` sends them).
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
import types
import typing
import uuid
from collections.abc import Mapping
from typing import Any, Final, TypeVar

from kio.schema.errors import ErrorCode as KioErrorCode
from kio.serial import entity_reader, entity_writer

E = TypeVar("E")

_EPOCH = datetime.datetime.fromtimestamp(0, datetime.UTC)


class ChunkWriter:
    """A ``Writable`` for kio's writers that keeps every write as its own chunk."""

    __slots__ = ("chunks", "size")

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.size = 0

    def write(self, data: bytes) -> int:
        self.chunks.append(data)
        self.size += len(data)
        return len(data)


def to_chunks(entity: Any, out: ChunkWriter | None = None) -> ChunkWriter:
    """Encode ``entity`` (any kio entity) into ``out`` (a new writer if None)."""
    writer = out if out is not None else ChunkWriter()
    entity_writer(type(entity))(writer, entity)  # type: ignore[arg-type]
    return writer


def read_entity(cls: type[E], data: bytes | memoryview, offset: int) -> tuple[E, int]:
    """Decode one ``cls`` from ``data[offset:]``: the entity and the offset after it."""
    entity, size = entity_reader(cls)(data, offset)  # type: ignore[type-var]
    return entity, offset + size


def millis(value: datetime.timedelta | int | None) -> int:
    """A kio timedelta field as Kafka's milliseconds (-1 for None)."""
    if value is None:
        return -1
    if isinstance(value, int):
        return value
    return round(value.total_seconds() * 1000)


def timestamp_ms(value: datetime.datetime | None) -> int:
    """A kio datetime field as Kafka's epoch milliseconds (-1 for None)."""
    return -1 if value is None else round(value.timestamp() * 1000)


@dataclasses.dataclass(frozen=True, slots=True)
class _FieldPlan:
    name: str
    kafka_type: str
    nested: type[Any] | None
    """The entity type of a nested struct or of an array's items."""
    is_array: bool
    nullable: bool
    has_default: bool
    zero: Any
    tag: int | None = None
    """A tagged field's tag (flexible versions)."""


def build(cls: type[E], values: Mapping[str, Any]) -> E:
    """A ``cls`` from ``values`` (kio field names; nested mappings for nested structs).

    Keys ``cls`` has no field for are ignored (a field of another version); fields missing
    from ``values`` take the schema's default, else None if nullable, else the type's zero.
    Millisecond ints become timedeltas or datetimes, ints become error codes, strings become
    UUIDs, as each field's ``kafka_type`` says.
    """
    kwargs: dict[str, Any] = {}
    for plan in _plan(cls):
        if plan.name not in values:
            if not plan.has_default:
                kwargs[plan.name] = None if plan.nullable else plan.zero
            continue
        kwargs[plan.name] = _coerce(plan, values[plan.name])
    return cls(**kwargs)


def _coerce(plan: _FieldPlan, value: Any) -> Any:
    if value is None:
        return None if plan.nullable else plan.zero
    if plan.nested is not None:
        if plan.is_array:
            return tuple(
                item if isinstance(item, plan.nested) else build(plan.nested, item)
                for item in value
            )
        return value if isinstance(value, plan.nested) else build(plan.nested, value)
    match plan.kafka_type:
        case "error_code":
            return value if isinstance(value, KioErrorCode) else _kafka_error(int(value))
        case "timedelta_i32" | "timedelta_i64":
            if isinstance(value, datetime.timedelta):
                return value
            return datetime.timedelta(milliseconds=int(value))
        case "datetime_i64":
            if isinstance(value, datetime.datetime):
                return value
            if int(value) < 0:
                return None if plan.nullable else _EPOCH
            return _EPOCH + datetime.timedelta(milliseconds=int(value))
        case "uuid":
            if isinstance(value, uuid.UUID):
                return value
            return uuid.UUID(value) if value else (None if plan.nullable else uuid.UUID(int=0))
    if plan.is_array:
        return tuple(value)
    return value


def _kafka_error(code: int) -> KioErrorCode:
    """Kafka's error code; kraft's own codes (>= 1000, no Kafka client knows them) are sent
    as UNKNOWN_SERVER_ERROR."""
    try:
        return KioErrorCode(code)
    except ValueError:
        return KioErrorCode.unknown_server_error


_ZEROS: Mapping[str, Any] = {
    "bool": False,
    "bytes": b"",
    "records": b"",
    "string": "",
    "float64": 0.0,
    "error_code": KioErrorCode.none,
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "datetime_i64": _EPOCH,
    "uuid": uuid.UUID(int=0),
}


def null_field(entity: Any) -> str | None:
    """The path of the first field of ``entity`` (or of an entity nested in it) that is None
    though its schema says it is not nullable, or None. kio reads a null array or string (length
    -1) whatever the schema says; Kafka refuses it as malformed, and so do we (a handler would
    iterate it)."""
    for plan in _plan(type(entity)):
        value = getattr(entity, plan.name)
        if value is None:
            if not plan.nullable:
                return plan.name
            continue
        if plan.nested is None:
            continue
        for i, item in enumerate(value if plan.is_array else (value,)):
            if (inner := null_field(item)) is not None:
                return f"{plan.name}[{i}].{inner}" if plan.is_array else f"{plan.name}.{inner}"
    return None


_PLANS: dict[type[Any], tuple[_FieldPlan, ...]] = {}


def _plan(cls: type[Any]) -> tuple[_FieldPlan, ...]:
    plans = _PLANS.get(cls)
    if plans is None:
        plans = _PLANS[cls] = _make_plan(cls)
    return plans


def _make_plan(cls: type[Any]) -> tuple[_FieldPlan, ...]:
    hints = typing.get_type_hints(cls)
    plans = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        nullable = False
        args = typing.get_args(hint)
        if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
            rest = [a for a in args if a is not type(None)]
            nullable = len(rest) < len(args)
            hint = rest[0]
            args = typing.get_args(hint)
        is_array = typing.get_origin(hint) is tuple
        item = args[0] if is_array else hint
        nested = item if dataclasses.is_dataclass(item) and isinstance(item, type) else None
        kafka_type = f.metadata.get("kafka_type", "")
        has_default = (
            f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        )
        zero: Any = () if is_array else _ZEROS.get(kafka_type, 0)
        plans.append(
            _FieldPlan(
                f.name,
                kafka_type,
                nested,
                is_array,
                nullable,
                has_default,
                zero,
                f.metadata.get("tag"),
            )
        )
    return tuple(plans)


# -- lengths ---------------------------------------------------------------------------------------

_FIXED_SIZES: Final[Mapping[str, int]] = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "float64": 8,
    "uuid": 16,
    "error_code": 2,
    "timedelta_i32": 4,
    "timedelta_i64": 8,
    "datetime_i64": 8,
}
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class LengthError(ValueError):
    """A length in a message that the bytes after it cannot hold."""


def check_lengths(cls: type[Any], data: bytes | memoryview, offset: int) -> int:
    """Walk a ``cls`` encoded at ``data[offset:]`` and check that every array, string and
    bytes length fits in the bytes left, as Kafka's generated readers do ("Tried to allocate a
    collection of size N, but there are only M bytes remaining"); the offset after it.

    kio's native reader sizes an array by its length before reading an item, so a frame of a
    few hundred bytes claiming 2^35 items aborted the broker (a failed allocation is no Python
    exception; found by ``kraft fuzz --target kafka --seed 10``). Run this first.

    Raises:
        LengthError: a length exceeds the bytes left (or the bytes end early).
    """
    return _check_entity(cls, data, offset, len(data))


def _check_entity(cls: type[Any], data: bytes | memoryview, pos: int, end: int) -> int:
    flexible = bool(getattr(cls, "__flexible__", False))
    # NB: a flexible request header keeps its client id a non-compact string (Kafka's schema
    # says flexibleVersions "none" for that one field).
    compact = flexible and cls.__name__ != "RequestHeader"
    tagged: dict[int, _FieldPlan] = {}
    for plan in _plan(cls):
        if plan.tag is not None:
            tagged[plan.tag] = plan
        else:
            pos = _check_field(plan, compact, data, pos, end)
    if flexible:
        count, pos = _uvarint(data, pos, end)
        for _ in range(count):
            tag, pos = _uvarint(data, pos, end)
            size, pos = _uvarint(data, pos, end)
            _fits(size, pos, end)
            if (known := tagged.get(tag)) is not None:
                _check_field(known, flexible, data, pos, pos + size)
            pos += size
    return pos


def _check_field(
    plan: _FieldPlan, flexible: bool, data: bytes | memoryview, pos: int, end: int
) -> int:
    if not plan.is_array:
        if plan.nested is not None:
            if plan.nullable:  # a nullable struct: a presence byte, -1 for null
                _fits(1, pos, end)
                pos += 1
                if data[pos - 1] & 0x80:
                    return pos
            return _check_entity(plan.nested, data, pos, end)
        return _check_value(plan.kafka_type, flexible, data, pos, end)
    if flexible:
        raw, pos = _uvarint(data, pos, end)
        count = raw - 1
    else:
        count, pos = _int(_INT32, data, pos, end)
    if count <= 0:
        return pos
    _fits(count, pos, end)  # every item takes a byte at least
    size = _FIXED_SIZES.get(plan.kafka_type) if plan.nested is None else None
    if size is not None:
        _fits(count * size, pos, end)
        return pos + count * size
    for _ in range(count):
        if plan.nested is not None:
            pos = _check_entity(plan.nested, data, pos, end)
        else:
            pos = _check_value(plan.kafka_type, flexible, data, pos, end)
    return pos


def _check_value(
    kafka_type: str, flexible: bool, data: bytes | memoryview, pos: int, end: int
) -> int:
    size = _FIXED_SIZES.get(kafka_type)
    if size is None:
        if flexible:
            raw, pos = _uvarint(data, pos, end)
            size = raw - 1
        else:
            length = _INT16 if kafka_type == "string" else _INT32
            size, pos = _int(length, data, pos, end)
        size = max(size, 0)
    _fits(size, pos, end)
    return pos + size


def _fits(size: int, pos: int, end: int) -> None:
    if size > end - pos:
        raise LengthError(f"a length of {size} with {max(end - pos, 0)} bytes left")


def _int(codec: struct.Struct, data: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    _fits(codec.size, pos, end)
    return int(codec.unpack_from(data, pos)[0]), pos + codec.size


def _uvarint(data: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        _fits(1, pos, end)
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise LengthError("an unsigned varint longer than 5 bytes")


__all__ = [
    "ChunkWriter",
    "LengthError",
    "build",
    "check_lengths",
    "millis",
    "null_field",
    "read_entity",
    "timestamp_ms",
    "to_chunks",
]
