"""The console tools' line formats: Kafka's LineMessageReader and DefaultMessageFormatter."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kraft.cli.console_format import LineReader, RecordFormatter


@dataclass(frozen=True)
class Rec:
    topic: str = "t"
    partition: int = 3
    offset: int = 42
    timestamp: int = 1700000000000
    key: bytes | None = b"k"
    value: bytes | None = b"v"
    headers: tuple[tuple[str, bytes | None], ...] = (("a", b"1"), ("b", None))


def test_a_plain_line_is_the_value() -> None:
    parsed = LineReader.from_properties({}).parse(b"a\tb", 1)
    assert (parsed.key, parsed.value, parsed.headers, parsed.timestamp_ms) == (
        None,
        b"a\tb",
        (),
        None,
    )


def test_every_part_of_a_line_in_kafkas_order() -> None:
    reader = LineReader.from_properties(
        {"parse.timestamp": "true", "parse.headers": "true", "parse.key": "true",
         "key.separator": "=", "headers.separator": ";", "null.marker": "-"}
    )  # fmt: skip
    parsed = reader.parse(b"17\th:1;g\tk=v=w", 1)
    assert parsed.timestamp_ms == 17
    assert parsed.headers == (("h", b"1"), ("g", None))
    assert (parsed.key, parsed.value) == (b"k", b"v=w")
    assert reader.parse(b"18\t\t-=-", 2).key is None
    assert reader.parse(b"18\t\t-=-", 2).value is None


@pytest.mark.parametrize(
    ("properties", "line", "message"),
    [
        ({"parse.key": "true"}, b"no-tab", "line 7 has no key.separator"),
        ({"parse.timestamp": "true"}, b"soon\tv", "is not milliseconds"),
        ({"parse.timestamp": "true"}, b"-5\tv", "negative"),
        ({"parse.headers": "true"}, b":x\tv", "without a name"),
    ],
)
def test_a_line_that_does_not_fit_names_its_number(
    properties: dict[str, str], line: bytes, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        LineReader.from_properties(properties).parse(line, 7)


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"parse.kee": "true"}, "not a producer property"),
        ({"parse.key": "yes"}, "true or false"),
        ({"key.separator": ""}, "must not be empty"),
    ],
)
def test_bad_producer_properties_are_named(properties: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LineReader.from_properties(properties)


def test_the_formatter_prints_kafkas_fields_in_kafkas_order() -> None:
    every = {f"print.{f}": "true" for f in ("timestamp", "partition", "offset", "headers", "key")}
    line = RecordFormatter.from_properties(every).line(Rec())
    assert line == "CreateTime:1700000000000\tPartition:3\tOffset:42\ta:1,b:null\tk\tv"
    assert RecordFormatter.from_properties({}).line(Rec()) == "v"
    custom = RecordFormatter.from_properties(
        {"print.key": "true", "key.separator": " | ", "null.literal": "<none>"}
    )
    assert custom.line(Rec(key=None)) == "<none> | v"


def test_base64_and_hex_keep_any_bytes() -> None:
    raw = bytes(range(256))
    b64 = RecordFormatter.from_properties({}, "base64")
    assert b64.line(Rec(value=raw)) == __import__("base64").b64encode(raw).decode()
    assert RecordFormatter.from_properties({}, "hex").line(Rec(value=b"\xff\x00")) == "ff00"
    assert '"encoding": "base64"' in b64.json(Rec(value=raw))


def test_unknown_consumer_properties_are_named() -> None:
    with pytest.raises(ValueError, match="not a consumer property"):
        RecordFormatter.from_properties({"print.offsets": "true"})
