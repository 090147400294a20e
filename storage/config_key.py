"""`ConfigKey`: one config key of the registry (`storage.config_registry`), and its validator.

A key knows its Kafka name, type, default (a string, as Kafka stores configs), range, allowed
values and the values kraft does not implement yet, who reads it, its broker synonym when it is
a topic key, the config class and field it fills, and its doc line. `ConfigKey.validate` is pure:
it returns why a value is refused (INVALID_CONFIG at the controller, exit 1 at a node's start),
quoting at most `QUOTE_MAX_CHARS` of the value.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

LONG_MAX: Final = 2**63 - 1
"""Java's ``Long.MAX_VALUE``: Kafka's "never" for ``flush.messages`` and ``flush.ms``."""
INT_MAX: Final = 2**31 - 1
SEGMENT_BYTES_MIN: Final = 61
"""The smallest ``segment.bytes`` a log takes: a segment must hold one batch header (61 bytes)."""

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


def split_list(value: str) -> list[str]:
    """Kafka's LIST type: comma-separated, whitespace-trimmed, empty items dropped."""
    return [item.strip() for item in value.split(",") if item.strip()]


class ConfigType(enum.Enum):
    BOOLEAN = "boolean"
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    STRING = "string"
    LIST = "list"


class Scope(enum.Enum):
    """The namespace of a key."""

    TOPIC = "topic"
    """Set per topic (CreateTopics, IncrementalAlterConfigs on a topic)."""
    NODE = "node"
    """A broker's or a controller's properties file (and flags)."""


class Reader(enum.Enum):
    """Which process acts on a key."""

    BROKER = "broker"
    CONTROLLER = "controller"


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigKey:
    """One config key (see the module doc)."""

    name: str
    """Kafka's dotted name."""
    scope: Scope
    type: ConfigType
    default: str | None
    """As Kafka stores it; None: required, or no value (``shown_default`` says which)."""
    readers: frozenset[Reader]
    doc: str
    """The meaning, one line, as docs/operations.md shows it."""
    min_value: int | None = None
    max_value: int | None = None
    """None: the type's own bound (``Integer.MAX_VALUE``, ``Long.MAX_VALUE``)."""
    choices: frozenset[str] | None = None
    """The values Kafka allows (STRING, or the items of a LIST)."""
    unsupported: frozenset[str] = frozenset()
    """Of ``choices``, those kraft does not implement yet: refused, never stored and ignored."""
    unsupported_reason: str = ""
    synonym: str | None = None
    """A topic key's broker key: its cluster-wide (dynamic) and per-broker default."""
    owner: str | None = None
    """The config class that holds the value (`LogConfig`, `RaftConfig`, ...)."""
    field: str | None = None
    """Its snake_case field in ``owner``."""
    shown_default: str | None = None
    """The default column of the docs when it is not just ``default``."""
    kraft_only: bool = False
    """A key of kraft's own, not Kafka's."""
    per_listener: bool = False
    """A listener may set its own value, ``listener.name.<listener>.<name>`` (Kafka's
    listener prefix; `storage.config_registry.listener_key`)."""

    @property
    def bounds(self) -> tuple[int, int]:
        """The inclusive range of an INT or LONG key."""
        top = INT_MAX if self.type is ConfigType.INT else LONG_MAX
        low = self.min_value if self.min_value is not None else -top - 1
        return low, self.max_value if self.max_value is not None else top

    def check_int(self, value: object) -> str | None:
        """Why the integer ``value`` is out of range, or None."""
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{self.name} must be an integer, got {value!r}"
        low, high = self.bounds
        if not low <= value <= high:
            return f"{self.name} must be in [{low}, {high}], got {value}"
        return None

    def check_double(self, value: object) -> str | None:
        """Why the real ``value`` is out of range (``min_value``/``max_value``, inclusive), or
        None."""
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            return f"{self.name} must be a number, got {value!r}"
        low = self.min_value if self.min_value is not None else float("-inf")
        high = self.max_value if self.max_value is not None else float("inf")
        if not low <= value <= high:
            return f"{self.name} must be in [{low}, {high}], got {value}"
        return None

    def validate(self, value: str) -> str | None:
        """Why ``value`` is invalid for this key, or None when it is valid."""
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
                return self.check_int(number)
            case ConfigType.DOUBLE:
                try:
                    real = float(value.strip())
                except ValueError:
                    return f"{self.name} must be a number, got {quoted(value)}"
                return self.check_double(real)
            case ConfigType.STRING:
                if self.choices is not None and value not in self.choices:
                    return f"{self.name} must be one of {sorted(self.choices)}, got {quoted(value)}"
                if value in self.unsupported:
                    return self._not_supported(value)
            case ConfigType.LIST:
                items = split_list(value)
                if self.choices is not None:
                    bad = [item for item in items if item not in self.choices]
                    if bad or not items:
                        return (
                            f"{self.name} items must be in {sorted(self.choices)}: {quoted(value)}"
                        )
                for item in items:
                    if item in self.unsupported:
                        return self._not_supported(item)
        return None

    def _not_supported(self, value: str) -> str:
        accepted = sorted((self.choices or frozenset()) - self.unsupported)
        return (
            f"{self.name}={value} is not supported yet ({self.unsupported_reason}); "
            f"accepted: {', '.join(accepted)}"
        )


def node_key(
    name: str,
    type_: ConfigType,
    default: str | None,
    doc: str,
    *,
    readers: frozenset[Reader],
    owner: str | None = None,
    field: str | None = None,
    min_value: int | None = None,
    max_value: int | None = None,
    shown_default: str | None = None,
    kraft_only: bool = False,
    choices: Iterable[str] | None = None,
    unsupported: Iterable[str] = (),
    unsupported_reason: str = "",
    per_listener: bool = False,
) -> ConfigKey:
    """A `Scope.NODE` key (the node key tables' one constructor)."""
    return ConfigKey(
        name=name,
        scope=Scope.NODE,
        choices=frozenset(choices) if choices is not None else None,
        unsupported=frozenset(unsupported),
        unsupported_reason=unsupported_reason,
        type=type_,
        default=default,
        readers=readers,
        doc=doc,
        min_value=min_value,
        max_value=max_value,
        owner=owner,
        field=field,
        shown_default=shown_default,
        kraft_only=kraft_only,
        per_listener=per_listener,
    )


__all__ = [
    "CONFIG_VALUE_MAX_CHARS",
    "INT_MAX",
    "LONG_MAX",
    "QUOTE_MAX_CHARS",
    "SEGMENT_BYTES_MIN",
    "ConfigKey",
    "ConfigType",
    "Reader",
    "Scope",
    "node_key",
    "quoted",
    "split_list",
]
