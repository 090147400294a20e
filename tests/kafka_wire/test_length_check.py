"""`check_lengths`, run on every request before kio's native reader (which allocates what an
array length claims): a well-formed request of every served API and version passes and ends
where kio ends; each of its lengths (array counts, strings, bytes, compact or not, tagged fields
known and unknown), set beyond the bytes left, is refused with `LengthError`."""

from __future__ import annotations

import dataclasses
import struct
import types
import typing
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replication.broker.kafka.apis import SUPPORTED_VERSIONS
from replication.broker.kafka.entities import (
    LengthError,
    build,
    check_lengths,
    read_entity,
    to_chunks,
)
from replication.broker.kafka.frames import request_class
from tests.kafka_wire.wire import request_frame

SERVED = [
    (key, version)
    for key, (low, high) in sorted(SUPPORTED_VERSIONS.items())
    for version in range(low, high + 1)
]
FETCH = 1


def checked(cls: type[Any], payload: bytes) -> int:
    """The offset after the header and body of ``payload``, as the listener checks them."""
    return check_lengths(cls, payload, check_lengths(cls.__header_schema__, payload, 0))


def kio_end(cls: type[Any], payload: bytes) -> int:
    _, offset = read_entity(cls.__header_schema__, payload, 0)
    return read_entity(cls, payload, offset)[1]


def filled(cls: type[Any], *, tagged: bool = True) -> Any:
    """A ``cls`` with every field set: arrays of two items, strings and bytes not empty,
    nullable fields not null, tagged fields (if ``tagged``) not their default."""
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.metadata.get("tag") is not None and not tagged:
            continue
        hint = hints[f.name]
        if isinstance(hint, types.UnionType):
            hint = next(a for a in typing.get_args(hint) if a is not type(None))
        if typing.get_origin(hint) is tuple:
            item = typing.get_args(hint)[0]
            values[f.name] = [_value(f, item, tagged) for _ in range(2)]
        else:
            values[f.name] = _value(f, hint, tagged)
    return build(cls, values)


def _value(f: dataclasses.Field[Any], hint: Any, tagged: bool) -> Any:
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return filled(hint, tagged=tagged)
    match f.metadata.get("kafka_type"):
        case "string":
            return "ab"
        case "bytes" | "records":
            return b"xyz"
        case "uuid":
            return uuid.UUID(int=0x1234)
        case "bool":
            return True
        case "float64":
            return 1.5
        case _:
            return 1


def encoded(entity: Any) -> bytes:
    return to_chunks(entity).joined()


@dataclasses.dataclass(frozen=True)
class Length:
    """A length field of a request body: ``at`` bytes into the body, ``size`` bytes long;
    ``bias`` is what the wire adds to it (1 for a compact length, whose 0 means null);
    ``value`` is the length the body gives it (None for a tagged field's size); ``in_tag``
    says it is inside a tagged field's value."""

    at: int
    size: int
    bias: int
    value: int | None
    where: str
    in_tag: bool = False


@dataclasses.dataclass(frozen=True)
class _Grown:
    """A body with one length-carrying value one longer than in the original."""

    body: Any
    size: int
    bias: int
    value: int
    tagged: bool
    where: str


def lengths(body: Any) -> Iterator[Length]:
    """Every length of ``body``, found as the first byte that changes when its value grows by
    one item (the length's last byte: lengths here are small). A tagged field's size (KIP-482:
    a uvarint) comes before its value's length and is what changes first: both are there."""
    base = encoded(body)
    for grown in _grown(body, "", in_tag=False):
        after = encoded(grown.body)
        changed = next(i for i in range(len(base)) if base[i] != after[i])
        if not grown.tagged:
            at = changed - (grown.size - 1)
            yield Length(at, grown.size, grown.bias, grown.value, grown.where)
            continue
        yield Length(changed, 1, 0, None, f"{grown.where} (tagged field size)")
        if "." not in grown.where:  # a tagged string of the body: its length follows
            yield Length(changed + 1, grown.size, grown.bias, grown.value, grown.where, True)


def _grown(entity: Any, path: str, *, in_tag: bool) -> Iterator[_Grown]:
    compact = bool(getattr(type(entity), "__flexible__", False))
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        where = f"{path}{f.name}"
        tagged = in_tag or f.metadata.get("tag") is not None
        longer: Any
        match value:
            case str():
                size, longer = 2, value + "c"
            case bytes():
                size, longer = 4, value + b"z"
            case tuple():
                size, longer = 4, (*value, value[0])
            case _ if dataclasses.is_dataclass(value):
                for inner in _grown(value, f"{where}.", in_tag=tagged):
                    outer = dataclasses.replace(entity, **{f.name: inner.body})
                    yield dataclasses.replace(inner, body=outer)
                continue
            case _:
                continue
        yield _Grown(
            dataclasses.replace(entity, **{f.name: longer}),
            1 if compact else size,
            int(compact),
            len(value),
            tagged,
            where,
        )
        for i, item in enumerate(value if isinstance(value, tuple) else ()):
            if not dataclasses.is_dataclass(item):
                continue
            for inner in _grown(item, f"{where}[{i}].", in_tag=tagged):
                items = (*value[:i], inner.body, *value[i + 1 :])
                outer = dataclasses.replace(entity, **{f.name: items})
                yield dataclasses.replace(inner, body=outer)


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def with_length(payload: bytes, at: int, length: Length, value: int) -> bytes:
    """``payload`` with ``length`` (at ``at``) set to ``value``."""
    if length.size == 1:
        raw = uvarint(value + length.bias)
    else:
        raw = struct.pack(">h" if length.size == 2 else ">i", value)
    return payload[:at] + raw + payload[at + length.size :]


def decoded(payload: bytes, at: int, length: Length) -> int:
    if length.size == 1:
        return payload[at] - length.bias
    return int.from_bytes(payload[at : at + length.size], "big", signed=True)


@pytest.mark.parametrize(("key", "version"), SERVED)
def test_every_length_of_a_served_request_beyond_the_bytes_left_is_refused(
    key: int, version: int
) -> None:
    cls = request_class(key, version)
    body = filled(cls)
    payload = request_frame(key, version, body)[4:]
    assert checked(cls, payload) == kio_end(cls, payload) == len(payload)
    body_at = len(payload) - len(encoded(body))
    for length in lengths(body):
        at = body_at + length.at
        if length.value is not None:  # the position is the length's
            assert decoded(payload, at, length) == length.value, length
        # The bytes after it (a uvarint grown to more bytes leaves as many: the frame grows).
        left = len(payload) - at - length.size
        huge = {1: 2**35 - 2, 2: 2**15 - 1, 4: 2**31 - 1}[length.size]
        for value in (left + 1, huge):
            # Refused at that length, not later by chance; a length inside a tagged field is
            # refused at the field's size, where a uvarint grown longer may already end.
            refused = "bytes left" if length.in_tag else f"^(a length|an array) of {value} "
            with pytest.raises(LengthError, match=refused):
                checked(cls, with_length(payload, at, length, value))


@pytest.mark.parametrize(("key", "version"), SERVED)
def test_every_served_request_cut_short_anywhere_is_refused(key: int, version: int) -> None:
    cls = request_class(key, version)
    payload = request_frame(key, version, filled(cls))[4:]
    for cut in range(len(payload)):
        with pytest.raises(LengthError):
            checked(cls, payload[:cut])


@pytest.mark.parametrize("version", [1, 2])
def test_a_request_header_client_id_longer_than_the_frame_is_refused(version: int) -> None:
    # Header v1 (non-flexible APIs: Metadata v1), v2 (flexible: Metadata v12); the client id
    # stays an int16-length string in both.
    cls = request_class(3, 1 if version == 1 else 12)
    payload = request_frame(3, 1 if version == 1 else 12, filled(cls), client_id="abc")[4:]
    assert payload[8:13] == b"\x00\x03abc"
    assert check_lengths(cls.__header_schema__, payload, 0) == 13 + (version == 2)
    for value in (len(payload) - 10 + 1, 2**15 - 1):
        with pytest.raises(LengthError):
            check_lengths(
                cls.__header_schema__, payload[:8] + struct.pack(">h", value) + payload[10:], 0
            )


@pytest.mark.parametrize(("key", "version"), [s for s in SERVED if request_class(*s).__flexible__])
def test_tagged_fields_of_unknown_tags_are_checked_against_the_bytes_left(
    key: int, version: int
) -> None:
    """KIP-482: an unknown tag is skipped by its size, which must fit."""
    cls = request_class(key, version)
    payload = request_frame(key, version, filled(cls, tagged=False))[4:]
    assert payload.endswith(b"\x00")  # the body's tag section: no tagged field
    head = payload[:-1]
    field = b"ab\x00"
    valid = head + b"\x01" + uvarint(99) + uvarint(len(field)) + field
    assert checked(cls, valid) == len(valid)
    for count, size, refused in (
        (1, len(field) + 1, f"a length of {len(field) + 1} "),
        (1, 2**32 - 1, f"a length of {2**32 - 1} "),
        (2, len(field), "bytes left"),  # the second tagged field is missing
        (2**32 - 1, 0, f"an array of {2**32 - 1} "),
    ):
        broken = head + uvarint(count) + uvarint(99) + uvarint(size) + field
        with pytest.raises(LengthError, match=refused):
            checked(cls, broken)


def test_an_array_of_fixed_size_items_one_item_too_long_is_refused() -> None:
    """Fetch v4's partitions (16 bytes each) end its frame: a count of one item more is
    refused with all but one byte of that item there, and passes with all of them. Fetch
    v12's forgotten partitions (compact, int32s): a count of one item more than the bytes left
    hold is refused."""
    cls = request_class(FETCH, 4)
    body = filled(cls)
    payload = request_frame(FETCH, 4, body)[4:]
    (length,) = [x for x in lengths(body) if x.where == "topics[1].partitions"]
    at = len(payload) - len(encoded(body)) + length.at
    assert len(payload) - at - length.size == 2 * 16  # its two items end the frame
    grown = with_length(payload, at, length, 3)
    with pytest.raises(LengthError, match="bytes left"):
        checked(cls, grown + b"\x01" * 15)
    assert checked(cls, grown + b"\x01" * 16) == len(grown) + 16

    cls = request_class(FETCH, 12)
    body = filled(cls)
    payload = request_frame(FETCH, 12, body)[4:]
    (length,) = [x for x in lengths(body) if x.where == "forgotten_topics_data[1].partitions"]
    at = len(payload) - len(encoded(body)) + length.at
    left = len(payload) - at - length.size
    with pytest.raises(LengthError, match="bytes left"):
        checked(cls, with_length(payload, at, length, left // 4 + 1))


def smallest(cls: type[Any], grow: tuple[str, ...] = (), items: int = 100) -> Any:
    """A ``cls`` at its smallest (nulls, empty strings and arrays, no tagged field), but for
    the array at the path ``grow`` (field names), which holds ``items`` smallest items (and
    each array on the way to it one item)."""
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.metadata.get("tag") is not None:
            continue
        hint = hints[f.name]
        nullable = isinstance(hint, types.UnionType)
        if nullable:
            hint = next(a for a in typing.get_args(hint) if a is not type(None))
        rest = grow[1:] if grow[:1] == (f.name,) else None
        item = typing.get_args(hint)[0] if typing.get_origin(hint) is tuple else None
        if item is not None and rest is not None:
            if rest:
                values[f.name] = [smallest(item, rest, items)]
            elif isinstance(item, type) and dataclasses.is_dataclass(item):
                values[f.name] = [smallest(item) for _ in range(items)]
            else:
                values[f.name] = [_empty(f) for _ in range(items)]
        elif nullable and rest is None:
            values[f.name] = None
        elif item is not None:
            values[f.name] = []
        elif isinstance(hint, type) and dataclasses.is_dataclass(hint):
            values[f.name] = smallest(hint, rest or (), items)
        else:
            values[f.name] = _empty(f)
    return build(cls, values)


def _empty(f: dataclasses.Field[Any]) -> Any:
    match f.metadata.get("kafka_type"):
        case "string":
            return ""
        case "bytes" | "records":
            return b""
        case "uuid":
            return uuid.UUID(int=0)
        case "bool":
            return False
        case _:
            return 0


def arrays(cls: type[Any], path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The path of every array of ``cls`` (tagged fields aside), nested ones too."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.metadata.get("tag") is not None:
            continue
        hint = hints[f.name]
        if isinstance(hint, types.UnionType):
            hint = next(a for a in typing.get_args(hint) if a is not type(None))
        if typing.get_origin(hint) is tuple:
            yield (*path, f.name)
            hint = typing.get_args(hint)[0]
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            yield from arrays(hint, (*path, f.name))


@pytest.mark.parametrize(("key", "version"), SERVED)
def test_arrays_of_the_smallest_items_pass(key: int, version: int) -> None:
    """An array count is refused when its items could not fit even at their smallest: this
    bound must never be above an item's true smallest size, or a valid request would be
    refused. Each array in turn holds 100 items at their smallest, in a request otherwise at
    its smallest, so the bytes after it are fewer than 100."""
    cls = request_class(key, version)
    for path in arrays(cls):
        payload = request_frame(key, version, smallest(cls, path))[4:]
        assert checked(cls, payload) == kio_end(cls, payload) == len(payload), path


FILLED = {served: request_frame(*served, filled(request_class(*served)))[4:] for served in SERVED}


@settings(max_examples=500, deadline=None)
@given(
    st.sampled_from(SERVED),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=3),
    st.integers(0, 7),
)
def test_a_corrupted_request_that_passes_the_check_is_read_by_kio_to_the_same_end(
    served: tuple[int, int], changes: list[tuple[int, int]], cut: int
) -> None:
    """Whatever bytes change (and are cut off the end), either the check refuses them, or
    kio reads the frame to where the check ends, or kio refuses a value (a Python exception,
    such as a string that is not UTF-8): kio never meets a length the check let past."""
    cls = request_class(*served)
    payload = bytearray(FILLED[served])
    for position, value in changes:
        payload[position % len(payload)] = value
    corrupted = bytes(payload[: len(payload) - cut])
    try:
        end = checked(cls, corrupted)
    except LengthError:
        return
    try:
        kio = kio_end(cls, corrupted)
    except Exception:  # a value kio refuses
        return
    assert kio == end
