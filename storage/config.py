"""Per-log configuration: Kafka's topic-level log settings, converted from dotted keys in one place.

`LogConfig` holds snake_case fields; `LogConfig.from_properties` accepts Kafka's own keys
(``segment.bytes``, ``retention.ms``, ...) so a Kafka user's topic configs carry over. The keys,
their defaults and their ranges come from the config registry (`storage.config_registry`);
every value is validated here: the log itself trusts its config.

Durability knobs, as in Kafka: by default nothing is fsynced by the log (``flush.messages`` and
``flush.ms`` are "never": replication, not fsync, protects data, and the OS writes back pages);
the Raft log sets ``sync_every_append`` so an append is durable when it returns.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from storage.config_key import ConfigType, split_list
from storage.config_registry import (
    DYNAMIC_BROKER_KEYS,
    INT_MAX,
    LOG_PROPERTY_FIELDS,
    LONG_MAX,
    NODE_KEYS,
    SEGMENT_BYTES_MIN,
    TOPIC_KEYS,
)
from storage.errors import InvalidConfigError

_KEY_OF_FIELD = {field: key for key, field in LOG_PROPERTY_FIELDS.items()}


def _default_text(field: str) -> str:
    """The registry's default of the `LogConfig` field ``field``, as stored."""
    default = TOPIC_KEYS[_KEY_OF_FIELD[field]].default
    assert default is not None, field
    return default


def _default(field: str) -> int:
    return int(_default_text(field))


def normalized_cleanup_policy(value: str) -> str:
    """``cleanup.policy`` as `LogConfig` holds it: its items sorted and unique
    (``delete,compact`` -> ``compact,delete``)."""
    return ",".join(sorted(set(split_list(value))))


@dataclass(frozen=True, slots=True, kw_only=True)
class LogConfig:
    """The settings of one segmented log (a partition replica or the Raft metadata log).

    Invariants (checked in ``__post_init__``, raising `InvalidConfigError`): every field is in
    its key's range in `storage.config_registry` (``segment_bytes`` in [61, 2**31-1], file
    positions being 4-byte index entries; ``retention_ms`` and ``retention_bytes`` >= -1, -1
    meaning unlimited; ``flush_messages`` >= 1; ...).
    """

    # NB: 64 MiB, not Kafka's 1 GiB: the registry (storage/config_topic_keys.py) says why.
    segment_bytes: int = _default("segment_bytes")
    """``segment.bytes``: roll when an append would make the active segment larger."""
    segment_ms: int = _default("segment_ms")
    """``segment.ms``: roll when the active segment's first append is older than this."""
    segment_index_bytes: int = _default("segment_index_bytes")
    """``segment.index.bytes``: roll when the offset or time index would exceed this."""
    retention_ms: int = _default("retention_ms")
    """``retention.ms``: delete segments whose newest timestamp is older (-1: forever)."""
    retention_bytes: int = _default("retention_bytes")
    """``retention.bytes``: delete the oldest segments while the log is larger (-1: no limit)."""
    index_interval_bytes: int = _default("index_interval_bytes")
    """``index.interval.bytes``: one offset (and time) index entry per this many bytes."""
    flush_messages: int = _default("flush_messages")
    """``flush.messages``: fsync after this many records since the last flush (default never)."""
    flush_ms: int = _default("flush_ms")
    """``flush.ms``: fsync when the last flush is older than this (default never)."""
    max_message_bytes: int = _default("max_message_bytes")
    """``max.message.bytes``: the largest batch a leader accepts (Kafka's 1 MiB + 12 bytes)."""
    message_timestamp_before_max_ms: int = _default("message_timestamp_before_max_ms")
    """``message.timestamp.before.max.ms`` (KIP-937): a leader refuses a record whose
    CreateTime is more than this before its clock (INVALID_TIMESTAMP)."""
    message_timestamp_after_max_ms: int = _default("message_timestamp_after_max_ms")
    """``message.timestamp.after.max.ms`` (KIP-937): ... more than this after its clock. NB:
    Kafka 3.6's default; Kafka 4.0 lowered it to one hour."""
    cleanup_policy: str = _default_text("cleanup_policy")
    """``cleanup.policy``: ``delete``, ``compact`` or ``compact,delete`` (normalized by
    `normalized_cleanup_policy`)."""
    delete_retention_ms: int = _default("delete_retention_ms")
    """``delete.retention.ms``: a compacted log keeps a tombstone this long after the first
    cleaner pass that kept it (KIP-534's delete horizon: `storage.compaction`)."""
    min_compaction_lag_ms: int = _default("min_compaction_lag_ms")
    """``min.compaction.lag.ms``: the cleaner leaves segments with younger records alone."""
    min_cleanable_dirty_ratio: float = float(_default_text("min_cleanable_dirty_ratio"))
    """``min.cleanable.dirty.ratio``: clean once dirty bytes / cleanable bytes reach this."""
    compression_type: str = _default_text("compression_type")
    """``compression.type``: ``producer`` keeps the producer's codec; any other codec name
    makes the leader recompress (``storage.compression.recompress_batch``)."""
    sync_every_append: bool = False
    """fdatasync after every append call (the Raft log). Not a config key: set in code."""

    def __post_init__(self) -> None:
        # The ranges are the registry's: the controller validates topic configs with the same.
        for key, field in PROPERTY_KEYS.items():
            definition, value = TOPIC_KEYS[key], getattr(self, field)
            match definition.type:
                case ConfigType.INT | ConfigType.LONG:
                    problem = definition.check_int(value)
                case ConfigType.DOUBLE:
                    problem = definition.check_double(value)
                case _:
                    problem = (
                        definition.validate(value)
                        if isinstance(value, str)
                        else f"{key} must be a string, got {value!r}"
                    )
            if problem is not None:
                raise InvalidConfigError(problem)
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
            kind = TOPIC_KEYS[key].type
            if kind is ConfigType.DOUBLE:
                try:
                    changes[field] = float(value)
                except ValueError:
                    raise InvalidConfigError(f"{key} must be a number: {raw!r}"[:200]) from None
            elif kind is ConfigType.LIST:
                changes[field] = normalized_cleanup_policy(value) if split_list(value) else value
            elif kind is ConfigType.STRING:
                changes[field] = value
            else:
                try:
                    changes[field] = int(value)
                except ValueError:
                    raise InvalidConfigError(f"{key} must be an integer: {raw!r}"[:200]) from None
        return dataclasses.replace(base if base is not None else cls(), **changes)

    @property
    def compact(self) -> bool:
        """``cleanup.policy`` includes ``compact``: the log cleaner runs on this log."""
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        """``cleanup.policy`` includes ``delete``: retention deletes old segments."""
        return "delete" in self.cleanup_policy.split(",")

    def to_properties(self) -> dict[str, str]:
        """The inverse of `from_properties` (every key, Kafka's spelling)."""
        out: dict[str, str] = {}
        for key, field in PROPERTY_KEYS.items():
            out[key] = str(getattr(self, field))
        return out


PROPERTY_KEYS: Mapping[str, str] = LOG_PROPERTY_FIELDS
"""Kafka's dotted key -> `LogConfig` field, derived from the registry (``owner="LogConfig"``).
``sync_every_append`` is no key: only the Raft store sets it, in code."""


def validate_log_property(key: str, value: str) -> str | None:
    """Why a log would reject ``key=value`` (the checks of `LogConfig.from_properties`), or
    None when it takes it. The ranges are the registry's, which the controller validates topic
    configs with, so a value it accepts is one every broker's log takes."""
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
    A node key of the registry (or a topic key's broker synonym) is held to its range there.

    Raises:
        InvalidConfigError: a value is not an integer, or is outside its key's range.
    """
    out: dict[str, int] = {}
    for key, raw in properties.items():
        name = keys.get(key.strip())
        if name is None or str(raw).strip() == "":
            continue  # absent or empty: the field's default
        try:
            value = int(str(raw).strip())
        except ValueError:
            raise InvalidConfigError(f"{key}: not an integer: {raw!r}") from None
        definition = NODE_KEYS.get(key.strip()) or DYNAMIC_BROKER_KEYS.get(key.strip())
        if definition is not None and (problem := definition.check_int(value)) is not None:
            raise InvalidConfigError(problem)
        out[name] = value
    return out


def bool_fields_from_properties(
    props: Mapping[str, str], keys: Mapping[str, str]
) -> dict[str, bool]:
    """The boolean fields named by ``keys`` (node keys of the registry) found in ``props``
    (``true``/``false``).

    Raises:
        InvalidConfigError: a value is neither.
    """
    out: dict[str, bool] = {}
    for key, name in keys.items():
        raw = str(props.get(key, "")).strip()
        if not raw:
            continue
        if (problem := NODE_KEYS[key].validate(raw)) is not None:
            raise InvalidConfigError(problem)
        out[name] = raw.lower() == "true"
    return out


__all__ = [
    "INT_MAX",
    "LONG_MAX",
    "PROPERTY_KEYS",
    "SEGMENT_BYTES_MIN",
    "LogConfig",
    "bool_fields_from_properties",
    "int_fields_from_properties",
    "normalized_cleanup_policy",
    "validate_log_property",
]
