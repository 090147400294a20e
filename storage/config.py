"""Per-log configuration: Kafka's topic-level log settings, converted from dotted keys in one place.

`LogConfig` holds snake_case fields; `LogConfig.from_properties` accepts Kafka's own keys
(``segment.bytes``, ``retention.ms``, ...) so a Kafka user's topic configs carry over. Every
value is validated here: the log itself trusts its config.

Durability knobs, as in Kafka: by default nothing is fsynced by the log (``flush.messages`` and
``flush.ms`` are "never": replication, not fsync, protects data, and the OS writes back pages);
the Raft log sets ``sync_every_append`` so an append is durable when it returns.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from storage.errors import InvalidConfigError

LONG_MAX = 2**63 - 1
"""Java's ``Long.MAX_VALUE``: Kafka's "never" for ``flush.messages`` and ``flush.ms``."""
INT_MAX = 2**31 - 1

SEGMENT_BYTES_MIN = 61
"""The smallest ``segment.bytes`` a log takes: a segment must hold one batch header (61 bytes)."""

_MIB = 1024 * 1024
_DAY_MS = 24 * 60 * 60 * 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class LogConfig:
    """The settings of one segmented log (a partition replica or the Raft metadata log).

    Invariants (checked in ``__post_init__``, raising `InvalidConfigError`):
    ``segment_bytes`` in [61, 2**31-1] (file positions are 4-byte index entries);
    ``retention_ms`` and ``retention_bytes`` >= -1 (-1: unlimited);
    ``flush_messages`` >= 1; ``segment_ms``, ``flush_ms`` >= 1 and 0; ...
    """

    # NB: Kafka's default is 1 GiB. kraft defaults to 64 MiB because recovery after an unclean
    # shutdown re-validates the unflushed segments in Python (CRC of every batch), and example
    # clusters run many partitions on one small machine: a smaller segment bounds both the
    # recovery scan and the disk held by an active segment that retention may not delete.
    segment_bytes: int = 64 * _MIB
    """``segment.bytes``: roll when an append would make the active segment larger."""
    segment_ms: int = 7 * _DAY_MS
    """``segment.ms``: roll when the active segment's first append is older than this."""
    segment_index_bytes: int = 10 * _MIB
    """``segment.index.bytes``: roll when the offset or time index would exceed this."""
    retention_ms: int = 7 * _DAY_MS
    """``retention.ms``: delete segments whose newest timestamp is older (-1: forever)."""
    retention_bytes: int = -1
    """``retention.bytes``: delete the oldest segments while the log is larger (-1: no limit)."""
    index_interval_bytes: int = 4096
    """``index.interval.bytes``: one offset (and time) index entry per this many bytes."""
    flush_messages: int = LONG_MAX
    """``flush.messages``: fsync after this many records since the last flush (default never)."""
    flush_ms: int = LONG_MAX
    """``flush.ms``: fsync when the last flush is older than this (default never)."""
    max_message_bytes: int = 1_048_588
    """``max.message.bytes``: the largest batch a leader accepts (Kafka's 1 MiB + 12 bytes)."""
    message_timestamp_before_max_ms: int = LONG_MAX
    """``message.timestamp.before.max.ms`` (KIP-937): a leader refuses a record whose
    CreateTime is more than this before its clock (INVALID_TIMESTAMP)."""
    message_timestamp_after_max_ms: int = LONG_MAX
    """``message.timestamp.after.max.ms`` (KIP-937): ... more than this after its clock. NB:
    Kafka 3.6's default; Kafka 4.0 lowered it to one hour."""
    sync_every_append: bool = False
    """kraft's ``sync.every.append``: fdatasync after every append call (the Raft log)."""

    def __post_init__(self) -> None:
        _check(self.segment_bytes, "segment.bytes", SEGMENT_BYTES_MIN, INT_MAX)
        _check(self.segment_ms, "segment.ms", 1, LONG_MAX)
        _check(self.segment_index_bytes, "segment.index.bytes", 12, INT_MAX)
        _check(self.retention_ms, "retention.ms", -1, LONG_MAX)
        _check(self.retention_bytes, "retention.bytes", -1, LONG_MAX)
        _check(self.index_interval_bytes, "index.interval.bytes", 0, INT_MAX)
        _check(self.flush_messages, "flush.messages", 1, LONG_MAX)
        _check(self.flush_ms, "flush.ms", 0, LONG_MAX)
        _check(self.max_message_bytes, "max.message.bytes", 0, INT_MAX)
        _check(self.message_timestamp_before_max_ms, "message.timestamp.before.max.ms", 0, LONG_MAX)
        _check(self.message_timestamp_after_max_ms, "message.timestamp.after.max.ms", 0, LONG_MAX)
        if not isinstance(self.sync_every_append, bool):
            raise InvalidConfigError(
                f"sync.every.append must be a bool: {self.sync_every_append!r}"
            )

    @classmethod
    def from_properties(
        cls, props: Mapping[str, str], *, base: LogConfig | None = None
    ) -> LogConfig:
        """Build a config from Kafka-style dotted keys (``{"segment.bytes": "1048576"}``).

        Args:
            props: keys from `PROPERTY_KEYS`; values as strings, as in a properties file.
            base: the config whose values are kept for absent keys (default: the defaults).

        Raises:
            InvalidConfigError: on an unknown key, a value that does not parse, or one out of
                its range.
        """
        changes: dict[str, Any] = {}
        for key, raw in props.items():
            field = PROPERTY_KEYS.get(key)
            if field is None:
                raise InvalidConfigError(f"unknown log config {key!r}")
            value = raw.strip()
            if field == "sync_every_append":
                if value.lower() not in ("true", "false"):
                    raise InvalidConfigError(f"{key} must be true or false: {raw!r}")
                changes[field] = value.lower() == "true"
                continue
            try:
                changes[field] = int(value)
            except ValueError:
                raise InvalidConfigError(f"{key} must be an integer: {raw!r}") from None
        return dataclasses.replace(base if base is not None else cls(), **changes)

    def to_properties(self) -> dict[str, str]:
        """The inverse of `from_properties` (every key, Kafka's spelling)."""
        out: dict[str, str] = {}
        for key, field in PROPERTY_KEYS.items():
            value = getattr(self, field)
            out[key] = str(value).lower() if isinstance(value, bool) else str(value)
        return out


PROPERTY_KEYS: dict[str, str] = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.index.bytes": "segment_index_bytes",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "max.message.bytes": "max_message_bytes",
    "message.timestamp.before.max.ms": "message_timestamp_before_max_ms",
    "message.timestamp.after.max.ms": "message_timestamp_after_max_ms",
    "sync.every.append": "sync_every_append",
}
"""Kafka's dotted key -> `LogConfig` field; the only place the two spellings meet."""


def validate_log_property(key: str, value: str) -> str | None:
    """Why a log would reject ``key=value`` (the checks of `LogConfig.from_properties`), or
    None when it takes it. The controller validates topic configs with this, so a value it
    accepts is one every broker's log takes."""
    try:
        LogConfig.from_properties({key: value})
    except InvalidConfigError as e:
        return e.message
    return None


def int_fields_from_properties(
    properties: Mapping[str, str], keys: Mapping[str, str]
) -> dict[str, int]:
    """The integer fields named by ``keys`` (Kafka key -> field name) found in ``properties``;
    other keys are ignored. Shared by the configs of every layer that read Kafka properties.

    Raises:
        InvalidConfigError: a value is not an integer.
    """
    out: dict[str, int] = {}
    for key, raw in properties.items():
        name = keys.get(key.strip())
        if name is None:
            continue
        try:
            out[name] = int(str(raw).strip())
        except ValueError:
            raise InvalidConfigError(f"{key}: not an integer: {raw!r}") from None
    return out


def _check(value: object, key: str, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidConfigError(f"{key} must be an integer: {value!r}")
    if not low <= value <= high:
        raise InvalidConfigError(f"{key} must be in [{low}, {high}]: {value}")


__all__ = [
    "INT_MAX",
    "LONG_MAX",
    "PROPERTY_KEYS",
    "SEGMENT_BYTES_MIN",
    "LogConfig",
    "int_fields_from_properties",
    "validate_log_property",
]
