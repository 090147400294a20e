"""kio entities from plain values, and entities to chunks: the two helpers every converter uses.

kio (`docs/kafka-compatibility.md`) generates one frozen dataclass per message and version from
Kafka's JSON schemas. A converter describes a response once, as nested mappings keyed by kio's
field names, for the newest version; `build` instantiates it for the version the client asked
for, dropping the fields that version lacks and filling the ones it needs but the mapping does
not name with the schema default (or the type's zero). So no converter is written per version,
and no encoder but one (`produce_answer`, the common Produce answer): kio's writers encode.

`check_lengths` checks a request's lengths against its bytes before kio's native reader sees
them (see "lengths" below: it is generated Python, once per request class).

`to_chunks` encodes an entity into a list of byte strings. kio's writers call ``write`` once per
primitive and once per ``bytes``/``records`` field, so a record batch reaches the chunk list by
identity: a fetch response's segment bytes are never copied here (`frame_writer` sends them).
A ``records`` field may hold a `storage.file_region.FileRegion` (kio's writers take its
``len`` for the length prefix and ``write`` it): it reaches the chunk list as it is, and
`frame_writer` sends it from the file.
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
import types
import typing
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final, NoReturn, TypeVar

from kio.schema.errors import ErrorCode as KioErrorCode
from kio.serial import entity_reader, entity_writer

from storage.file_region import FileRegion

E = TypeVar("E")

_EPOCH = datetime.datetime.fromtimestamp(0, datetime.UTC)


Chunk = bytes | FileRegion
"""What an encoded frame is made of: bytes, and the file regions of a Fetch's records."""


class ChunkWriter:
    """A ``Writable`` for kio's writers that keeps every write as its own chunk."""

    __slots__ = ("chunks", "size")

    def __init__(self) -> None:
        self.chunks: list[Chunk] = []
        self.size = 0

    def write(self, data: Chunk) -> int:
        self.chunks.append(data)
        self.size += len(data)
        return len(data)

    def joined(self) -> bytes:
        """The chunks as one byte string: of an entity without a `FileRegion` (a request)."""
        return b"".join(typing.cast(list[bytes], self.chunks))


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
#
# `check_lengths` runs before kio's native reader on every request, so it is compiled: the first
# check of a class generates one Python function for it, straight-line code in the schema's field
# order, and later checks only call that function. Fixed-size fields cost nothing of their own:
# their sizes are added to the offset of the next length read (one bound check covers the run);
# an array of fixed-size items is checked and skipped in one step; nested structs and the items
# of an array are inlined into their parent's function (request schemas nest two deep at most),
# and a tag section with no tagged field (nearly all of them) costs one byte read. The source
# holds no name from the schema, only offsets and sizes.

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
_LENGTH_SIZES: Final[Mapping[str, int]] = {"string": 2, "bytes": 4, "records": 4}
"""The size of a non-compact length prefix (strings an int16, bytes an int32)."""

_Checker = Callable[[bytes | memoryview, int, int], int]


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
    checker = _CHECKERS.get(cls)
    if checker is None:
        checker = _CHECKERS[cls] = _compile(cls, None)
    return checker(data, offset, len(data))


_CHECKERS: dict[type[Any], _Checker] = {}


def _refuse(size: int, left: int) -> NoReturn:
    raise LengthError(f"a length of {size} with {max(left, 0)} bytes left")


def _refuse_items(count: int, item_size: int, left: int) -> NoReturn:
    raise LengthError(
        f"an array of {count} items of at least {item_size} bytes with {max(left, 0)} bytes left"
    )


def _uvarint_rest(data: bytes | memoryview, pos: int, end: int, first: int) -> tuple[int, int]:
    """An unsigned varint whose first byte (``first``, read) had its continuation bit."""
    value = first & 0x7F
    shift = 7
    while True:
        if pos >= end:
            _refuse(1, end - pos)
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise LengthError("an unsigned varint longer than 5 bytes")


def _uvarint(data: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    if pos >= end:
        _refuse(1, end - pos)
    first = data[pos]
    if first & 0x80:
        return _uvarint_rest(data, pos + 1, end, first)
    return first, pos + 1


def _check_tags(
    data: bytes | memoryview, pos: int, end: int, count: int, known: Mapping[int, _Checker]
) -> int:
    """The tagged fields (KIP-482) after their count's first byte (``count``, read and not 0):
    each one's size checked against the bytes left, and a known tag's field inside its size."""
    if count & 0x80:
        count, pos = _uvarint_rest(data, pos, end, count)
    if count > end - pos:  # every tagged field takes a byte at least
        _refuse_items(count, 1, end - pos)
    for _ in range(count):
        tag, pos = _uvarint(data, pos, end)
        size, pos = _uvarint(data, pos, end)
        if size > end - pos:
            _refuse(size, end - pos)
        if (checker := known.get(tag)) is not None:
            checker(data, pos, pos + size)
        pos += size
    return pos


_INT32_FROM = struct.Struct(">i").unpack_from


class _Source:
    """The lines of one generated checker, and the values its code names."""

    def __init__(self) -> None:
        self.lines = ["def check(data, pos, end):"]
        self.names: dict[str, Any] = {
            "_refuse": _refuse,
            "_refuse_items": _refuse_items,
            "_uvarint_rest": _uvarint_rest,
            "_check_tags": _check_tags,
            "_int32": _INT32_FROM,
        }

    def add(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def name(self, value: Any) -> str:
        name = f"_known_{len(self.names)}"
        self.names[name] = value
        return name


def _compile(cls: type[Any], tagged: tuple[_FieldPlan, bool] | None) -> _Checker:
    """A checker of ``cls`` (or, if ``tagged``, of that one field of ``cls`` with its
    compactness: the value of a tagged field, checked within its size)."""
    src = _Source()
    if tagged is None:
        skip = _emit_entity(src, cls, 1, 0)
    else:
        skip = _emit_field(src, tagged[0], tagged[1], 1, 0)
    _emit_skip(src, 1, skip)
    src.add(1, "if pos > end:")
    src.add(2, "_refuse(pos - end, 0)")  # fixed-size fields after the last length read
    src.add(1, "return pos")
    code = compile("\n".join(src.lines) + "\n", f"<check_lengths {cls.__qualname__}>", "exec")
    exec(code, src.names)  # NB: our own source, of offsets and sizes only
    checker: _Checker = src.names["check"]
    return checker


# The emitters below append the code of one part of a message to ``src``. ``skip`` is the size
# of the fixed-size fields before it that the code has not yet added to ``pos`` (nor checked:
# the next read's bound check, or the function's last one, covers them); each returns the skip
# after its part. The code reads every length into ``n``, which is free again once used (an
# array's loop took its count already).


def _encoding(cls: type[Any]) -> tuple[bool, bool]:
    """Whether ``cls`` is flexible (KIP-482: it ends with tagged fields) and whether its
    lengths are compact (uvarints)."""
    flexible = bool(getattr(cls, "__flexible__", False))
    # NB: a flexible request header keeps its client id a non-compact string (Kafka's schema
    # says flexibleVersions "none" for that one field).
    return flexible, flexible and cls.__name__ != "RequestHeader"


def _emit_entity(src: _Source, cls: type[Any], indent: int, skip: int) -> int:
    flexible, compact = _encoding(cls)
    known: dict[int, _Checker] = {}
    for plan in _plan(cls):
        if plan.tag is not None:
            known[plan.tag] = _compile(cls, (plan, flexible))
        else:
            skip = _emit_field(src, plan, compact, indent, skip)
    if flexible:
        _emit_byte(src, indent, skip)
        src.add(indent, "if n:")
        src.add(indent + 1, f"pos = _check_tags(data, pos, end, n, {src.name(known)})")
        skip = 0
    return skip


def _emit_field(src: _Source, plan: _FieldPlan, compact: bool, indent: int, skip: int) -> int:
    if not plan.is_array:
        if (size := _fixed_size(plan)) is not None:
            return skip + size
        if plan.nested is None:
            _emit_value(src, plan.kafka_type, compact, indent, skip)
            return 0
        if not plan.nullable:
            return _emit_entity(src, plan.nested, indent, skip)
        _emit_byte(src, indent, skip)  # a nullable struct: a presence byte, -1 for null
        src.add(indent, "if n < 0x80:")
        _emit_skip(src, indent + 1, _emit_entity(src, plan.nested, indent + 1, 0))
        return 0
    if compact:
        _emit_uvarint(src, indent, skip)
        src.add(indent, "if n > 1:")
        src.add(indent + 1, "n -= 1")
    else:
        _emit_int(src, 4, indent, skip)
        src.add(indent, "if n > 0:")
    if plan.nested is None:
        item_size = _FIXED_SIZES.get(plan.kafka_type)
    else:
        item_size = _entity_size(plan.nested)
    if item_size is not None:  # one step for all the items
        least = max(item_size, 1)
        src.add(indent + 1, f"if n * {least} > end - pos:")
        src.add(indent + 2, f"_refuse_items(n, {least}, end - pos)")
        src.add(indent + 1, f"pos += n * {item_size}")
        return 0
    least = _least_item_size(plan, compact)
    src.add(indent + 1, f"if n * {least} > end - pos:")
    src.add(indent + 2, f"_refuse_items(n, {least}, end - pos)")
    src.add(indent + 1, "for _ in range(n):")
    if plan.nested is not None:
        item_skip = _emit_entity(src, plan.nested, indent + 2, 0)
    else:
        _emit_value(src, plan.kafka_type, compact, indent + 2, 0)
        item_skip = 0
    _emit_skip(src, indent + 2, item_skip)
    return 0


def _emit_value(src: _Source, kafka_type: str, compact: bool, indent: int, skip: int) -> None:
    """A string, bytes or records value: its length, then that many bytes (none if null)."""
    if compact:
        _emit_uvarint(src, indent, skip)
        src.add(indent, "if n > 1:")
        src.add(indent + 1, "pos += n - 1")
        src.add(indent + 1, "if pos > end:")
        src.add(indent + 2, "_refuse(n - 1, end - pos + n - 1)")
        return
    size = _LENGTH_SIZES[kafka_type]
    _emit_int(src, size, indent, skip)
    src.add(indent, "if 0 < n < 0x8000:" if size == 2 else "if n > 0:")  # negative: null
    src.add(indent + 1, "pos += n")
    src.add(indent + 1, "if pos > end:")
    src.add(indent + 2, "_refuse(n, end - pos + n)")


def _emit_byte(src: _Source, indent: int, skip: int) -> None:
    src.add(indent, f"if {_at(skip)} >= end:")
    src.add(indent + 1, f"_refuse({skip + 1}, end - pos)")
    src.add(indent, f"n = data[{_at(skip)}]")
    src.add(indent, f"pos += {skip + 1}")


def _emit_uvarint(src: _Source, indent: int, skip: int) -> None:
    _emit_byte(src, indent, skip)
    src.add(indent, "if n & 0x80:")
    src.add(indent + 1, "n, pos = _uvarint_rest(data, pos, end, n)")


def _emit_int(src: _Source, size: int, indent: int, skip: int) -> None:
    """A big-endian int32 into ``n``, or an int16 unsigned (a negative one is 0x8000 or more)."""
    src.add(indent, f"if {_at(skip + size)} > end:")
    src.add(indent + 1, f"_refuse({skip + size}, end - pos)")
    if size == 2:
        src.add(indent, f"n = data[{_at(skip)}] << 8 | data[{_at(skip + 1)}]")
    else:
        src.add(indent, f"n = _int32(data, {_at(skip)})[0]")
    src.add(indent, f"pos += {skip + size}")


def _emit_skip(src: _Source, indent: int, skip: int) -> None:
    if skip:
        src.add(indent, f"pos += {skip}")
    elif src.lines[-1].endswith(":"):  # a block of no code: a struct of no fields
        src.add(indent, "pass")


def _at(skip: int) -> str:
    return f"pos + {skip}" if skip else "pos"


def _fixed_size(plan: _FieldPlan) -> int | None:
    """The size of a field that is always the same size, else None."""
    if plan.is_array:
        return None
    if plan.nested is None:
        return _FIXED_SIZES.get(plan.kafka_type)
    return None if plan.nullable else _entity_size(plan.nested)


def _entity_size(cls: type[Any]) -> int | None:
    """The size of an entity that is always the same size (a non-flexible one of fixed-size
    fields only), else None."""
    if getattr(cls, "__flexible__", False):
        return None
    sizes = [_fixed_size(plan) for plan in _plan(cls)]
    return None if None in sizes else sum(s for s in sizes if s is not None)


def _least_item_size(plan: _FieldPlan, compact: bool) -> int:
    """The fewest bytes an item of an array can take (1 at least, as Kafka's readers count)."""
    if plan.nested is None:
        return 1 if compact else _LENGTH_SIZES[plan.kafka_type]
    return max(_least_entity_size(plan.nested), 1)


def _least_entity_size(cls: type[Any]) -> int:
    """The fewest bytes a ``cls`` can take: a bound that must never exceed the truth (a null or
    empty length prefix, no tagged field), or a valid message would be refused."""
    flexible, compact = _encoding(cls)
    total = 1 if flexible else 0  # the tag section's count
    for plan in _plan(cls):
        if plan.tag is not None:
            continue
        if (size := _fixed_size(plan)) is not None:
            total += size
        elif plan.nested is not None and not plan.is_array:
            total += 1 if plan.nullable else _least_entity_size(plan.nested)
        elif compact:
            total += 1
        elif plan.is_array:
            total += 4
        else:
            total += _LENGTH_SIZES[plan.kafka_type]
    return total


__all__ = [
    "Chunk",
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
