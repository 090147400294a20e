"""Config definitions: the keys kraft understands, their Kafka defaults and their validation.

Keys keep Kafka's names. A topic's *effective* value is resolved the way Kafka does it, first
match wins:

1. the topic's own dynamic config (``ConfigRecord(TOPIC, name, key)``);
2. the cluster-wide dynamic broker default (``ConfigRecord(BROKER, "", synonym)``), where the
   synonym is the broker key for the same setting (``retention.ms`` <- ``log.retention.ms``);
3. the static default in `TOPIC_CONFIGS`.

The log settings (``segment.bytes``, ``retention.*``, ``flush.*``, ``max.message.bytes``, ...)
take their defaults from `storage.config.LogConfig`, the one source of truth, and a value is
valid only if the log takes it (`storage.config.validate_log_property`): the controller never
accepts a value a broker's log would have to skip.

Values are stored as strings, as in Kafka; `ConfigDef.validate` checks a value and the typed
helpers (`parse_bool`, `parse_int`) read one.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from kraft.metadata.records import ConfigResourceType
from storage.config import PROPERTY_KEYS, SEGMENT_BYTES_MIN, LogConfig, validate_log_property
from storage.records import BATCH_HEADER_SIZE

_LONG_MAX: Final = 2**63 - 1
_INT_MAX: Final = 2**31 - 1
_LOG_DEFAULTS: Final = LogConfig().to_properties()
"""The log's own defaults, under the topic keys: the defaults of the log settings below."""

CONFIG_VALUE_MAX_CHARS: Final = 4096
"""The longest config value the controller stores (INVALID_CONFIG beyond). Kafka has no such
bound of its own (only the request size), but every value becomes a metadata record that each
controller and broker keeps forever; kraft's keys all take short values. With at most
10,000 records per operation (`kraft.controller.limits`), one batch stays below ~40 MiB."""

QUOTE_MAX_CHARS: Final = 100
"""How much of a peer's input an error message quotes (`quoted`)."""


def quoted(value: str, limit: int = QUOTE_MAX_CHARS) -> str:
    """``repr(value)``, cut to about ``limit`` characters: error messages never echo unbounded
    input back to the sender (or into the logs)."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value)} characters)"


class ConfigType(enum.Enum):
    BOOLEAN = "boolean"
    INT = "int"
    LONG = "long"
    STRING = "string"
    LIST = "list"


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigDef:
    """One config key: its type, default, allowed values and broker-level synonym."""

    name: str
    type: ConfigType
    default: str
    min_value: int | None = None
    choices: frozenset[str] | None = None
    broker_synonym: str | None = None
    log_key: str | None = None
    """The `storage.config.LogConfig` key this setting is (validated by the log's rules too)."""

    def validate(self, value: str) -> str | None:
        """Return why ``value`` is invalid for this key, or ``None`` when it is valid."""
        if len(value) > CONFIG_VALUE_MAX_CHARS:
            return (
                f"{self.name}: a value of {len(value)} characters is longer than "
                f"{CONFIG_VALUE_MAX_CHARS}"
            )
        match self.type:
            case ConfigType.BOOLEAN:
                if value.strip().lower() not in ("true", "false"):
                    return f"{self.name} must be true or false, got {quoted(value)}"
            case ConfigType.INT | ConfigType.LONG:
                try:
                    number = int(value.strip())
                except ValueError:
                    return f"{self.name} must be an integer, got {quoted(value)}"
                top = _INT_MAX if self.type is ConfigType.INT else _LONG_MAX
                if number > top or (self.min_value is not None and number < self.min_value):
                    return f"{self.name} must be in [{self.min_value}, {top}], got {number}"
            case ConfigType.STRING:
                if self.choices is not None and value not in self.choices:
                    return f"{self.name} must be one of {sorted(self.choices)}, got {quoted(value)}"
            case ConfigType.LIST:
                items = split_list(value)
                if self.choices is not None:
                    bad = [item for item in items if item not in self.choices]
                    if bad or not items:
                        return (
                            f"{self.name} items must be in {sorted(self.choices)}: {quoted(value)}"
                        )
        if self.log_key is not None:
            problem = validate_log_property(self.log_key, value)
            if problem is not None:
                return problem if self.log_key == self.name else f"{self.name}: {problem}"
        return None


def _topic(
    name: str,
    type_: ConfigType,
    default: str,
    *,
    min_value: int | None = None,
    choices: tuple[str, ...] | None = None,
    broker_synonym: str | None = None,
) -> ConfigDef:
    return ConfigDef(
        name=name,
        type=type_,
        default=default,
        min_value=min_value,
        choices=frozenset(choices) if choices is not None else None,
        broker_synonym=broker_synonym,
        log_key=name if name in PROPERTY_KEYS else None,
    )


_T = ConfigType
TOPIC_CONFIGS: Final[Mapping[str, ConfigDef]] = {
    d.name: d
    for d in (
        _topic("cleanup.policy", _T.LIST, "delete", choices=("delete", "compact")),
        _topic(
            "compression.type",
            _T.STRING,
            "producer",
            choices=("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
        ),
        _topic(
            "flush.messages",
            _T.LONG,
            _LOG_DEFAULTS["flush.messages"],
            min_value=1,
            broker_synonym="log.flush.interval.messages",
        ),
        _topic(
            "flush.ms",
            _T.LONG,
            _LOG_DEFAULTS["flush.ms"],
            min_value=0,
            broker_synonym="log.flush.interval.ms",
        ),
        # NB: Kafka takes any value >= 0, but below one batch header (61 bytes) no batch fits:
        # the topic would refuse every produce, so kraft refuses the config instead.
        _topic(
            "max.message.bytes",
            _T.INT,
            _LOG_DEFAULTS["max.message.bytes"],
            min_value=BATCH_HEADER_SIZE,
            broker_synonym="message.max.bytes",
        ),
        _topic(
            "message.timestamp.after.max.ms",
            _T.LONG,
            _LOG_DEFAULTS["message.timestamp.after.max.ms"],
            min_value=0,
            broker_synonym="log.message.timestamp.after.max.ms",
        ),
        _topic(
            "message.timestamp.before.max.ms",
            _T.LONG,
            _LOG_DEFAULTS["message.timestamp.before.max.ms"],
            min_value=0,
            broker_synonym="log.message.timestamp.before.max.ms",
        ),
        _topic(
            "message.timestamp.type",
            _T.STRING,
            "CreateTime",
            choices=("CreateTime", "LogAppendTime"),
            broker_synonym="log.message.timestamp.type",
        ),
        _topic(
            "min.insync.replicas", _T.INT, "1", min_value=1, broker_synonym="min.insync.replicas"
        ),
        # kraft's own: how a partition replicates (DESIGN.md "Quorum mode").
        _topic("replication.mode", _T.STRING, "isr", choices=("isr", "quorum")),
        _topic(
            "retention.bytes",
            _T.LONG,
            _LOG_DEFAULTS["retention.bytes"],
            min_value=-1,
            broker_synonym="log.retention.bytes",
        ),
        _topic(
            "retention.ms",
            _T.LONG,
            _LOG_DEFAULTS["retention.ms"],
            min_value=-1,
            broker_synonym="log.retention.ms",
        ),
        # NB: kraft's log defaults to 64 MiB segments, not Kafka's 1 GiB (storage/config.py).
        _topic(
            "segment.bytes",
            _T.INT,
            _LOG_DEFAULTS["segment.bytes"],
            min_value=SEGMENT_BYTES_MIN,
            broker_synonym="log.segment.bytes",
        ),
        _topic(
            "segment.ms",
            _T.LONG,
            _LOG_DEFAULTS["segment.ms"],
            min_value=1,
            broker_synonym="log.roll.ms",
        ),
        _topic(
            "unclean.leader.election.enable",
            _T.BOOLEAN,
            "false",
            broker_synonym="unclean.leader.election.enable",
        ),
    )
}
"""Topic-level keys kraft understands; any other topic key is INVALID_CONFIG."""

BROKER_CONFIGS: Final[Mapping[str, ConfigDef]] = {
    d.broker_synonym: ConfigDef(
        name=d.broker_synonym,
        type=d.type,
        default=d.default,
        min_value=d.min_value,
        choices=d.choices,
        log_key=d.log_key,
    )
    for d in TOPIC_CONFIGS.values()
    if d.broker_synonym is not None
}
"""Dynamic broker keys (per broker or cluster default): the synonyms of the topic keys."""

_TOPIC_BY_BROKER_SYNONYM: Final[Mapping[str, str]] = {
    d.broker_synonym: d.name for d in TOPIC_CONFIGS.values() if d.broker_synonym is not None
}

CLUSTER_DEFAULT_RESOURCE: Final = ""
"""``resource_name`` of the cluster-wide broker defaults (Kafka's convention)."""


def config_defs(resource_type: ConfigResourceType) -> Mapping[str, ConfigDef]:
    """The known keys of a resource type."""
    return TOPIC_CONFIGS if resource_type is ConfigResourceType.TOPIC else BROKER_CONFIGS


def validate_config(resource_type: ConfigResourceType, key: str, value: str) -> str | None:
    """Return why ``key=value`` is invalid for ``resource_type``, or ``None`` when valid."""
    definition = config_defs(resource_type).get(key)
    if definition is None:
        return f"unknown {resource_type.name.lower()} config {quoted(key)}"
    return definition.validate(value)


def resolve_topic_configs(
    topic_overrides: Mapping[str, str], cluster_defaults: Mapping[str, str]
) -> dict[str, str]:
    """Every topic key with its effective value (topic override > cluster default > default)."""
    out = {name: d.default for name, d in TOPIC_CONFIGS.items()}
    for broker_key, value in cluster_defaults.items():
        topic_key = _TOPIC_BY_BROKER_SYNONYM.get(broker_key)
        if topic_key is not None:
            out[topic_key] = value
    out.update(topic_overrides)
    return out


def split_list(value: str) -> list[str]:
    """Kafka's LIST type: comma-separated, whitespace-trimmed, empty items dropped."""
    return [item.strip() for item in value.split(",") if item.strip()]


def parse_bool(value: str) -> bool:
    return value.strip().lower() == "true"


def parse_int(value: str) -> int:
    return int(value.strip())


__all__ = [
    "BROKER_CONFIGS",
    "CLUSTER_DEFAULT_RESOURCE",
    "CONFIG_VALUE_MAX_CHARS",
    "TOPIC_CONFIGS",
    "ConfigDef",
    "ConfigType",
    "config_defs",
    "parse_bool",
    "parse_int",
    "quoted",
    "resolve_topic_configs",
    "split_list",
    "validate_config",
]
