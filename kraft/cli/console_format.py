"""The console tools' line formats, with Kafka's ``--property`` names (pure: bytes in, bytes out).

`LineReader` splits a ``kraft produce`` input line as Kafka's console producer
(``LineMessageReader``) does; `RecordFormatter` prints a consumed record as Kafka's console
consumer (``DefaultMessageFormatter``) does.

Producer properties:

==========================  =========  ==================================================
``parse.key``               false      the line holds ``KEY<key.separator>VALUE``
``key.separator``           ``\\t``
``parse.headers``           false      the line starts ``HEADERS<headers.delimiter>``
``headers.delimiter``       ``\\t``    ``HEADERS`` is ``k:v,k:v`` (``headers.separator``,
``headers.separator``       ``,``      ``headers.key.separator``); a header without a
``headers.key.separator``   ``:``      separator has a null value
``null.marker``             (none)     a key or value equal to it is sent as null
``parse.timestamp``         false      kraft's: the line starts ``MILLIS<timestamp.separator>``
``timestamp.separator``     ``\\t``    (Kafka's console producer has no timestamp field)
==========================  =========  ==================================================

Order in a line: timestamp, headers, key, value.

Consumer properties: ``print.timestamp``, ``print.partition``, ``print.offset``,
``print.headers``, ``print.key`` (all false), ``print.value`` (true), ``key.separator``
(``\\t``: between every printed field), ``headers.separator`` (``,``), ``null.literal``
(``null``). Fields print in Kafka's order: ``CreateTime:MS``, ``Partition:P``, ``Offset:O``,
headers, key, value. ``--encoding base64|hex`` makes keys, values and header values
binary-safe (``utf8``, the default, replaces invalid bytes).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Protocol

ENCODINGS: Final = ("utf8", "base64", "hex")

PRODUCER_PROPERTIES: Final = frozenset(
    {
        "parse.key",
        "key.separator",
        "parse.headers",
        "headers.delimiter",
        "headers.separator",
        "headers.key.separator",
        "null.marker",
        "parse.timestamp",
        "timestamp.separator",
    }
)
CONSUMER_PROPERTIES: Final = frozenset(
    {
        "print.timestamp",
        "print.partition",
        "print.offset",
        "print.headers",
        "print.key",
        "print.value",
        "key.separator",
        "headers.separator",
        "null.literal",
    }
)

Headers = tuple[tuple[str, bytes | None], ...]


class Record(Protocol):
    """What the formatter reads of a consumed record (`replication.clients.ConsumerRecord`)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> tuple[tuple[str, bytes | None], ...]: ...


def _flag(properties: Mapping[str, str], name: str, default: bool) -> bool:
    raw = properties.get(name)
    if raw is None:
        return default
    if raw.lower() not in ("true", "false"):
        raise ValueError(f"--property {name}: expected true or false, got {raw[:40]!r}")
    return raw.lower() == "true"


def _separator(properties: Mapping[str, str], name: str, default: str) -> bytes:
    value = properties.get(name, default)
    if not value:
        raise ValueError(f"--property {name} must not be empty")
    return value.encode()


def _check_names(properties: Mapping[str, str], known: frozenset[str], tool: str) -> None:
    for name in properties:
        if name not in known:
            raise ValueError(
                f"--property {name[:60]!r} is not a {tool} property (known: "
                f"{', '.join(sorted(known))})"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedLine:
    timestamp_ms: int | None
    headers: Headers
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True, slots=True)
class LineReader:
    """Splits one producer input line (without its newline) into a record's parts."""

    parse_key: bool = False
    key_separator: bytes = b"\t"
    parse_headers: bool = False
    headers_delimiter: bytes = b"\t"
    headers_separator: bytes = b","
    headers_key_separator: bytes = b":"
    null_marker: bytes | None = None
    parse_timestamp: bool = False
    timestamp_separator: bytes = b"\t"

    @staticmethod
    def from_properties(properties: Mapping[str, str]) -> LineReader:
        """Raises ValueError naming an unknown property or a bad value."""
        _check_names(properties, PRODUCER_PROPERTIES, "producer")
        null_marker = properties.get("null.marker")
        return LineReader(
            parse_key=_flag(properties, "parse.key", False),
            key_separator=_separator(properties, "key.separator", "\t"),
            parse_headers=_flag(properties, "parse.headers", False),
            headers_delimiter=_separator(properties, "headers.delimiter", "\t"),
            headers_separator=_separator(properties, "headers.separator", ","),
            headers_key_separator=_separator(properties, "headers.key.separator", ":"),
            null_marker=None if null_marker is None else null_marker.encode(),
            parse_timestamp=_flag(properties, "parse.timestamp", False),
            timestamp_separator=_separator(properties, "timestamp.separator", "\t"),
        )

    def parse(self, line: bytes, number: int) -> ParsedLine:
        """Raises ValueError naming the line when a separator it needs is missing."""
        rest = line
        timestamp_ms: int | None = None
        if self.parse_timestamp:
            text, rest = self._split(rest, self.timestamp_separator, number, "timestamp.separator")
            try:
                timestamp_ms = int(text)
            except ValueError:
                raise ValueError(
                    f"line {number}: timestamp {text[:30]!r} is not milliseconds"
                ) from None
            if timestamp_ms < 0:
                raise ValueError(f"line {number}: timestamp {timestamp_ms} is negative")
        headers: Headers = ()
        if self.parse_headers:
            text, rest = self._split(rest, self.headers_delimiter, number, "headers.delimiter")
            headers = self._headers(text, number)
        key: bytes | None = None
        if self.parse_key:
            key, rest = self._split(rest, self.key_separator, number, "key.separator")
            key = self._nullable(key)
        return ParsedLine(
            timestamp_ms=timestamp_ms, headers=headers, key=key, value=self._nullable(rest)
        )

    def _nullable(self, data: bytes) -> bytes | None:
        return None if self.null_marker is not None and data == self.null_marker else data

    def _headers(self, text: bytes, number: int) -> Headers:
        if not text:
            return ()
        out: list[tuple[str, bytes | None]] = []
        for item in text.split(self.headers_separator):
            name, sep, value = item.partition(self.headers_key_separator)
            if not name:
                raise ValueError(f"line {number}: a header without a name")
            try:
                header_name = name.decode()
            except UnicodeDecodeError:
                raise ValueError(f"line {number}: a header name is not UTF-8") from None
            out.append((header_name, self._nullable(value) if sep else None))
        return tuple(out)

    @staticmethod
    def _split(data: bytes, separator: bytes, number: int, name: str) -> tuple[bytes, bytes]:
        head, sep, tail = data.partition(separator)
        if not sep:
            raise ValueError(f"line {number} has no {name} {separator.decode()!r}")
        return head, tail


@dataclass(frozen=True, slots=True)
class RecordFormatter:
    """Prints one consumed record as one line (Kafka's DefaultMessageFormatter), or as JSON."""

    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    separator: str = "\t"
    headers_separator: str = ","
    null_literal: str = "null"
    encoding: str = "utf8"

    @staticmethod
    def from_properties(properties: Mapping[str, str], encoding: str = "utf8") -> RecordFormatter:
        """Raises ValueError naming an unknown property or a bad value."""
        _check_names(properties, CONSUMER_PROPERTIES, "consumer")
        if encoding not in ENCODINGS:
            raise ValueError(f"--encoding must be one of {', '.join(ENCODINGS)}")
        return RecordFormatter(
            print_timestamp=_flag(properties, "print.timestamp", False),
            print_partition=_flag(properties, "print.partition", False),
            print_offset=_flag(properties, "print.offset", False),
            print_headers=_flag(properties, "print.headers", False),
            print_key=_flag(properties, "print.key", False),
            print_value=_flag(properties, "print.value", True),
            separator=properties.get("key.separator", "\t"),
            headers_separator=properties.get("headers.separator", ","),
            null_literal=properties.get("null.literal", "null"),
            encoding=encoding,
        )

    def bytes_text(self, data: bytes | None) -> str | None:
        """``data`` in the chosen encoding (None stays None)."""
        if data is None:
            return None
        if self.encoding == "base64":
            return base64.b64encode(data).decode()
        if self.encoding == "hex":
            return data.hex()
        return data.decode("utf-8", errors="replace")

    def line(self, record: Record) -> str:
        fields: list[str] = []
        if self.print_timestamp:
            fields.append(f"CreateTime:{record.timestamp}")
        if self.print_partition:
            fields.append(f"Partition:{record.partition}")
        if self.print_offset:
            fields.append(f"Offset:{record.offset}")
        if self.print_headers:
            headers = self.headers_separator.join(
                f"{name}:{self._text(value)}" for name, value in record.headers
            )
            fields.append(headers or "NO_HEADERS")
        if self.print_key:
            fields.append(self._text(record.key))
        if self.print_value:
            fields.append(self._text(record.value))
        return self.separator.join(fields)

    def json(self, record: Record) -> str:
        """One JSON object with every field; bytes in the chosen encoding."""
        return json.dumps(
            {
                "topic": record.topic,
                "partition": record.partition,
                "offset": record.offset,
                "timestamp": record.timestamp,
                "headers": [[name, self.bytes_text(value)] for name, value in record.headers],
                "key": self.bytes_text(record.key),
                "value": self.bytes_text(record.value),
                "encoding": self.encoding,
            }
        )

    def _text(self, data: bytes | None) -> str:
        text = self.bytes_text(data)
        return self.null_literal if text is None else text


__all__ = [
    "CONSUMER_PROPERTIES",
    "ENCODINGS",
    "PRODUCER_PROPERTIES",
    "LineReader",
    "ParsedLine",
    "RecordFormatter",
]
