"""The metadata record codec: `encode_record` / `decode_record`, versioned compact JSON.

These bytes are the values of records inside Raft log batches, so the format is part of the
on-disk contract. One record encodes as a JSON object::

    {"k": 5, "v": 0, "topic_id": "...", "partition": 0, "isr": [1, 2]}

- ``k`` is Kafka's ``apiKey`` for the record type (`RECORD_TYPE_IDS`, KIP-631);
- ``v`` is the record version (all records are at version 0 today);
- the remaining keys are the record's fields; a field equal to its default is omitted, which
  keeps `PartitionChangeRecord` deltas small. Enums are written as their Kafka numbers.

Decoding is strict and exact: ``decode_record(encode_record(r)) == r`` for every record, and
bad input raises a typed error instead of producing a half-built record:

- unknown type tag, missing or ill-typed field, unknown field, not JSON -> `InvalidRecordError`
- a version newer than this code knows -> `UnsupportedVersionError`
"""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from collections.abc import Mapping
from typing import Any, Final

from kraft.metadata.records import (
    RECORD_TYPE_IDS,
    RECORD_TYPES_BY_ID,
    BrokerFeature,
    Endpoint,
    MetadataRecord,
)
from storage.errors import InvalidRecordError, UnsupportedVersionError

RECORD_VERSIONS: Final[dict[int, int]] = {type_id: 0 for type_id in RECORD_TYPES_BY_ID}
"""The newest version of each record type (by type id) that this code reads and writes."""

_TYPE_KEY: Final = "k"
_VERSION_KEY: Final = "v"


def encode_record(record: MetadataRecord) -> bytes:
    """Encode one metadata record as compact UTF-8 JSON bytes."""
    return json.dumps(record_to_dict(record), separators=(",", ":"), sort_keys=True).encode()


def decode_record(data: bytes) -> MetadataRecord:
    """Decode bytes written by `encode_record`.

    Raises:
        InvalidRecordError: the bytes are not a well-formed record of a known type.
        UnsupportedVersionError: the record version is newer than this code.
    """
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidRecordError(f"metadata record is not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise InvalidRecordError("metadata record must be a JSON object")
    return record_from_dict(obj)


def record_to_dict(record: MetadataRecord) -> dict[str, Any]:
    """The JSON-ready form of a record (used by `encode_record` and by image snapshots)."""
    type_id = RECORD_TYPE_IDS[type(record)]
    out: dict[str, Any] = {_TYPE_KEY: type_id, _VERSION_KEY: RECORD_VERSIONS[type_id]}
    out.update(_fields_to_dict(record))
    return out


def record_from_dict(obj: Mapping[str, Any]) -> MetadataRecord:
    """Inverse of `record_to_dict`; raises like `decode_record`."""
    type_id = obj.get(_TYPE_KEY)
    if not isinstance(type_id, int) or isinstance(type_id, bool):
        raise InvalidRecordError(f"metadata record has no integer type tag: {type_id!r}")
    cls = RECORD_TYPES_BY_ID.get(type_id)
    if cls is None:
        raise InvalidRecordError(f"unknown metadata record type {type_id}")
    version = obj.get(_VERSION_KEY)
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise InvalidRecordError(f"{cls.__name__} has no valid version: {version!r}")
    if version > RECORD_VERSIONS[type_id]:
        raise UnsupportedVersionError(
            f"{cls.__name__} version {version} is newer than {RECORD_VERSIONS[type_id]}"
        )
    body = {k: v for k, v in obj.items() if k not in (_TYPE_KEY, _VERSION_KEY)}
    record = _dataclass_from_dict(cls, body)
    assert isinstance(record, cls)
    return record


# ---------------------------------------------------------------------------------------------
# Field conversion, driven by the dataclasses' type hints.


# NB: on the hot path of every metadata change (a fencing or a create writes thousands of
# records; every follower and broker decodes them), so each dataclass's fields and each type
# hint's converter are worked out once and cached.

_FieldSpec = tuple[str, Any, bool]
"""(name, default, has a default)"""
_FIELDS: dict[type, tuple[_FieldSpec, ...]] = {}
_SCALARS: Final = (int, str, bool, type(None))


def _fields(cls: type) -> tuple[_FieldSpec, ...]:
    specs = _FIELDS.get(cls)
    if specs is None:
        specs = tuple(
            (f.name, f.default, f.default is not dataclasses.MISSING)
            for f in dataclasses.fields(cls)
        )
        _FIELDS[cls] = specs
    return specs


def _fields_to_dict(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, default, has_default in _fields(type(obj)):
        value = getattr(obj, name)
        if has_default and value == default:
            continue  # NB: defaults are omitted; decoding fills them back in.
        out[name] = value if type(value) in _SCALARS else _value_to_json(value)
    return out


def _value_to_json(value: Any) -> Any:
    if isinstance(value, enum.IntEnum):
        return int(value)
    if isinstance(value, tuple):
        return [v if type(v) in _SCALARS else _value_to_json(v) for v in value]
    if dataclasses.is_dataclass(value):
        return _fields_to_dict(value)
    return value


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = typing.get_type_hints(cls)
        _HINTS[cls] = hints
    return hints


_Converter = typing.Callable[[Any, str], Any]
_DECODERS: dict[type, tuple[frozenset[str], tuple[tuple[str, bool, _Converter], ...]]] = {}


def _decoder(cls: type) -> tuple[frozenset[str], tuple[tuple[str, bool, _Converter], ...]]:
    decoder = _DECODERS.get(cls)
    if decoder is None:
        hints = _hints(cls)
        specs = _fields(cls)
        decoder = (
            frozenset(name for name, _, _ in specs),
            tuple((name, has_default, _converter(hints[name])) for name, _, has_default in specs),
        )
        _DECODERS[cls] = decoder
    return decoder


def _dataclass_from_dict(cls: type, body: Mapping[str, Any]) -> Any:
    names, fields = _decoder(cls)
    if not names.issuperset(body):
        unknown = set(body) - names
        raise InvalidRecordError(f"{cls.__name__} has unknown fields {sorted(unknown)}")
    kwargs: dict[str, Any] = {}
    for name, has_default, convert in fields:
        if name not in body:
            if not has_default:
                raise InvalidRecordError(f"{cls.__name__} is missing field {name!r}")
            continue
        kwargs[name] = convert(body[name], name)
    return cls(**kwargs)


def _value_from_json(hint: Any, raw: Any, where: str) -> Any:
    return _converter(hint)(raw, where)


_CONVERTERS: dict[Any, _Converter] = {}


def _converter(hint: Any) -> _Converter:
    """The function that checks and converts a JSON value to ``hint`` (cached per hint)."""
    convert = _CONVERTERS.get(hint)
    if convert is None:
        convert = _make_converter(hint)
        _CONVERTERS[hint] = convert
    return convert


def _make_converter(hint: Any) -> _Converter:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        nullable = type(None) in args
        (inner_hint,) = [a for a in args if a is not type(None)]
        inner = _converter(inner_hint)

        def optional(raw: Any, where: str) -> Any:
            if raw is None and nullable:
                return None
            return inner(raw, where)

        return optional
    if origin is tuple:
        (item_hint, _ellipsis) = typing.get_args(hint)
        item = _converter(item_hint)

        def sequence(raw: Any, where: str) -> Any:
            if not isinstance(raw, list):
                raise InvalidRecordError(f"field {where!r} must be a list, got {raw!r}")
            return tuple(item(v, where) for v in raw)

        return sequence
    if isinstance(hint, type) and issubclass(hint, enum.IntEnum):
        enum_type = hint

        def int_enum(raw: Any, where: str) -> Any:
            if not isinstance(raw, int) or isinstance(raw, bool):
                raise InvalidRecordError(f"field {where!r} must be an integer enum, got {raw!r}")
            try:
                return enum_type(raw)
            except ValueError:
                message = f"field {where!r}: {raw} is not a {enum_type.__name__}"
                raise InvalidRecordError(message) from None

        return int_enum
    if hint in (Endpoint, BrokerFeature):
        nested = hint

        def nested_record(raw: Any, where: str) -> Any:
            if not isinstance(raw, dict):
                raise InvalidRecordError(f"field {where!r} must be an object, got {raw!r}")
            return _dataclass_from_dict(nested, raw)

        return nested_record
    if hint is bool:

        def boolean(raw: Any, where: str) -> Any:
            if not isinstance(raw, bool):
                raise InvalidRecordError(f"field {where!r} must be a boolean, got {raw!r}")
            return raw

        return boolean
    if hint is int:

        def integer(raw: Any, where: str) -> Any:
            if type(raw) is not int:  # NB: not a bool (a subclass of int)
                raise InvalidRecordError(f"field {where!r} must be an integer, got {raw!r}")
            return raw

        return integer
    if hint is str:

        def string(raw: Any, where: str) -> Any:
            if not isinstance(raw, str):
                raise InvalidRecordError(f"field {where!r} must be a string, got {raw!r}")
            return raw

        return string
    raise AssertionError(f"codec does not know how to decode {hint!r}")  # programmer error


__all__ = [
    "RECORD_VERSIONS",
    "decode_record",
    "encode_record",
    "record_from_dict",
    "record_to_dict",
]
