"""Proto <-> dataclass conversion for the controller APIs: the one place their protos are touched.

The controller's requests and responses (`kraft.controller.messages`) and the shell-answered
reads defined here are frozen dataclasses whose field names are the proto field names of
``proto/kraft/v1/controller.proto``. So one converter, driven by the dataclasses' type hints,
maps every message both ways:

==============================  =========================================================
dataclass field                 proto field
==============================  =========================================================
``int`` / ``str`` / ``bool``    the scalar
``ErrorCode``                   ``kraft.v1.ErrorCode`` (an unknown code decodes as
                                UNKNOWN_SERVER_ERROR)
other ``IntEnum``               ``int32`` with Kafka's numbers
``X | None`` (scalar)           ``optional X`` (presence = not None)
``tuple[T, ...]``               ``repeated T``
``tuple[tuple[int, ...], ...]`` ``repeated Int32List``
``tuple[T, ...] | None``        a singular wrapper message with ``repeated T items``
``Mapping[str, str]``           ``map<string, string>``
a dataclass                     the message of the same name
==============================  =========================================================

Contract: ``decode(encode(m), type(m)) == m`` for every message (tested with hypothesis).
Every response also carries a `CurrentLeader` (who the answering controller believes is the
active controller): `encode_response` adds it and `decode_response` returns it next to the
response, so a client can follow a NOT_CONTROLLER redirect.

Raises:
    InvalidRequestError: from `decode`, when an enum field holds a value this code does not
        know (a newer or broken peer).
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from collections.abc import Mapping
from types import NoneType, UnionType
from typing import Any, TypeVar

from google.protobuf.message import Message

from kraft._generated import controller_pb2 as pb
from kraft.raft.messages import CurrentLeader
from storage.errors import ErrorCode, InvalidRequestError
from storage.file_region import FileRegion

T = TypeVar("T")

# -- the converter ---------------------------------------------------------------------------------


def encode(message: Any) -> Message:
    """The proto message (of the same name in ``controller.proto``) for a dataclass message."""
    out: Message = getattr(pb, type(message).__name__)()
    fill_message(out, message)
    return out


def decode(message: Message, cls: type[T]) -> T:
    """The dataclass ``cls`` for a proto message (fields of the proto not in ``cls`` are
    ignored, e.g. ``current_leader``).

    Raises:
        InvalidRequestError: an enum field holds an unknown value.
    """
    return read_message(message, cls)


def encode_response(response: Any, current_leader: CurrentLeader) -> Message:
    """`encode`, plus the answering controller's view of the active controller."""
    out = encode(response)
    fill_message(out.current_leader, current_leader)  # type: ignore[attr-defined]
    return out


def decode_response(message: Message, cls: type[T]) -> tuple[T, CurrentLeader]:
    """`decode` a response, and return its `CurrentLeader` hint with it."""
    return read_message(message, cls), read_message(message.current_leader, CurrentLeader)  # type: ignore[attr-defined]


_HINTS: dict[type, tuple[tuple[str, Any], ...]] = {}


def _hints(cls: type) -> tuple[tuple[str, Any], ...]:
    """(field name, resolved type hint) of a dataclass, cached per class."""
    cached = _HINTS.get(cls)
    if cached is None:
        hints = typing.get_type_hints(cls)
        cached = _HINTS[cls] = tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls))
    return cached


def _strip_optional(hint: Any) -> tuple[Any, bool]:
    if isinstance(hint, UnionType) or typing.get_origin(hint) is typing.Union:
        # NB: records as a FileRegion are for sendfile on a Kafka listener; none reaches gRPC
        members = typing.get_args(hint)
        args = [a for a in members if a is not NoneType and a is not FileRegion]
        assert len(args) == 1, f"unsupported union {hint}"
        return args[0], NoneType in members
    return hint, False


def _is_tuple(hint: Any) -> bool:
    return typing.get_origin(hint) is tuple


def _is_mapping(hint: Any) -> bool:
    return typing.get_origin(hint) in (Mapping, dict)


def fill_message(out: Any, obj: Any) -> None:
    for name, hint in _hints(type(obj)):
        value = getattr(obj, name)
        base, _ = _strip_optional(hint)
        if value is None:
            continue  # optional: leave the field unset (no presence)
        if _is_tuple(base):
            field = out.DESCRIPTOR.fields_by_name[name]
            item_hint = typing.get_args(base)[0]
            if field.is_repeated:
                _extend(getattr(out, name), value, item_hint)
            else:  # a nullable list: a singular wrapper message
                wrapper = getattr(out, name)
                wrapper.SetInParent()
                _extend(wrapper.items, value, item_hint)
        elif _is_mapping(base):
            getattr(out, name).update(value)
        elif dataclasses.is_dataclass(base):
            sub = getattr(out, name)
            sub.SetInParent()
            fill_message(sub, value)
        elif isinstance(value, enum.Enum):
            setattr(out, name, int(value.value))
        else:
            setattr(out, name, value)


def _extend(repeated: Any, items: tuple[Any, ...], item_hint: Any) -> None:
    if _is_tuple(item_hint):
        inner = typing.get_args(item_hint)[0]
        for item in items:
            _extend(repeated.add().items, item, inner)
    elif dataclasses.is_dataclass(item_hint):
        for item in items:
            fill_message(repeated.add(), item)
    else:
        repeated.extend(int(i.value) if isinstance(i, enum.Enum) else i for i in items)


def read_message(message: Any, cls: type[T]) -> T:
    kwargs: dict[str, Any] = {}
    for name, hint in _hints(cls):
        base, optional = _strip_optional(hint)
        field = message.DESCRIPTOR.fields_by_name[name]
        repeated = field.is_repeated
        if optional and not repeated and not message.HasField(name):
            kwargs[name] = None
            continue
        value = getattr(message, name)
        if _is_tuple(base):
            items = value if repeated else value.items
            item_hint = typing.get_args(base)[0]
            kwargs[name] = tuple(_item(i, item_hint) for i in items)
        elif _is_mapping(base):
            kwargs[name] = dict(value)
        else:
            kwargs[name] = _item(value, base)
    return cls(**kwargs)


def _item(value: Any, hint: Any) -> Any:
    if _is_tuple(hint):
        inner = typing.get_args(hint)[0]
        return tuple(_item(i, inner) for i in value.items)
    if dataclasses.is_dataclass(hint):
        return read_message(value, hint)  # type: ignore[arg-type]
    if hint is ErrorCode:
        try:
            return ErrorCode(value)
        except ValueError:
            return ErrorCode.UNKNOWN_SERVER_ERROR
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except ValueError:
            raise InvalidRequestError(f"unknown {hint.__name__} value {value}") from None
    return value


__all__ = [
    "decode",
    "decode_response",
    "encode",
    "encode_response",
]
