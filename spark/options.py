"""The data source's options, parsed and checked once: Spark's Kafka source names and forms.

Spark hands a Python data source its options with lower-cased keys, so every key here is
matched case-insensitively: ``startingOffsets``, ``startingoffsets`` and ``STARTINGOFFSETS``
are one option. Values keep Kafka's forms:

- exactly one of ``subscribe`` (``"t1,t2"``), ``subscribePattern`` (a Python regex matched
  against whole topic names) and ``assign`` (``'{"t1":[0,1]}'``);
- ``startingOffsets``: ``earliest`` | ``latest`` | ``'{"t1":{"0":23,"1":-2}}'`` (-2 earliest,
  -1 latest); ``endingOffsets``: ``latest`` | JSON (batch only);
- ``startingTimestamp`` / ``endingTimestamp`` (ms, every partition) and
  ``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp`` (``'{"t1":{"0":1700000000000}}'``),
  resolved with ListOffsets by timestamp; a timestamp option wins over the offsets one, as in
  Kafka. ``startingOffsetsByTimestampStrategy``: ``error`` (default: no record at or after the
  timestamp fails the query) or ``latest``;
- ``minPartitions``, ``maxRecordsPerPartition``, ``maxOffsetsPerTrigger`` (streaming),
  ``failOnDataLoss`` (default true), ``includeHeaders`` (default false);
- ``kraft.bootstrap`` (or Kafka's ``kafka.bootstrap.servers``): ``host:port,...`` of brokers;
  ``kraft.fetch.max.bytes``: bytes one Fetch may return (default 4 MiB);
  ``kafka.client.rack`` (KIP-392): the executors' rack: they read from an in-sync replica
  there (`spark.fetcher.RangeFetcher`); ``kafka.isolation.level`` (KIP-98):
  ``read_uncommitted`` (default) or ``read_committed``: ``latest`` is then each partition's
  last stable offset (no open transaction's records are planned), and the executors drop the
  records of aborted transactions (a range's offsets then hold fewer records);
- TLS, as Spark's Kafka source passes ``kafka.``-prefixed client configs, with kraft's client
  names (kafka-python's, `kraft.security.tls.client_tls`): ``kafka.security.protocol``
  (``PLAINTEXT`` or ``SSL``), ``kafka.ssl.cafile``, ``kafka.ssl.certfile`` and
  ``kafka.ssl.keyfile`` (PEM files, readable where the driver and the executors run). The
  writer passes every ``kafka.*`` option to its `Producer`, so the same four work there.

Every bad value raises `ValueError` naming the option, before any task runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

from kraft.types import TopicPartition

if TYPE_CHECKING:
    from kraft.security.tls import TlsConfig

EARLIEST = -2
LATEST = -1
DEFAULT_FETCH_MAX_BYTES = 4 << 20

_BOOTSTRAP_KEYS = ("kraft.bootstrap", "kafka.bootstrap.servers", "bootstrap")
SECURITY_OPTIONS: Final = {
    "kafka.security.protocol": "security_protocol",
    "kafka.ssl.cafile": "ssl_cafile",
    "kafka.ssl.certfile": "ssl_certfile",
    "kafka.ssl.keyfile": "ssl_keyfile",
}
"""The reader's TLS options -> the client settings they set (kafka-python's names)."""


@dataclass(frozen=True, slots=True)
class Subscribe:
    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SubscribePattern:
    pattern: str

    def matches(self, topic: str) -> bool:
        return re.fullmatch(self.pattern, topic) is not None


@dataclass(frozen=True, slots=True)
class Assign:
    partitions: tuple[TopicPartition, ...]


Subscription = Subscribe | SubscribePattern | Assign


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetSpec:
    """Where a read starts (or ends) in each partition.

    A partition's position is its timestamp if one is given (``timestamps``, else
    ``timestamp_ms``), else its entry in ``offsets`` (an offset, or -2/-1), else ``default``.
    """

    default: int
    """`EARLIEST` or `LATEST`."""
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp_ms: int | None = None
    timestamps: Mapping[TopicPartition, int] = field(default_factory=dict)

    def timestamp_for(self, tp: TopicPartition) -> int | None:
        return self.timestamps.get(tp, self.timestamp_ms)

    def offset_for(self, tp: TopicPartition) -> int:
        """The offset or sentinel of ``tp`` when no timestamp applies."""
        return self.offsets.get(tp, self.default)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadOptions:
    bootstrap: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    timestamp_strategy: Literal["error", "latest"] = "error"
    fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES
    security: Mapping[str, str] = field(default_factory=dict)
    """The TLS client settings (kafka-python's names; empty: plaintext)."""
    client_rack: str = ""
    """``kafka.client.rack`` (KIP-392)."""
    read_committed: bool = False
    """``kafka.isolation.level=read_committed`` (KIP-98)."""

    def tls(self) -> TlsConfig | None:
        """The TLS config of `security` (None: plaintext); reads the PEM files.

        Raises:
            InvalidConfigError: a file cannot be read or is not PEM.
        """
        from kraft.security.tls import client_tls

        return client_tls(**self.security) if self.security else None

    @classmethod
    def parse(cls, options: Mapping[str, Any], *, streaming: bool = False) -> ReadOptions:
        """Check and parse a reader's options (keys in any case).

        Raises:
            ValueError: a missing, conflicting or malformed option.
        """
        opts = lower_keys(options)
        starting = _offset_spec(
            opts, "startingoffsets", default=LATEST if streaming else EARLIEST, ending=False
        )
        ending = _offset_spec(opts, "endingoffsets", default=LATEST, ending=True)
        if streaming and any(k in opts for k in ("endingoffsets", "endingtimestamp")):
            raise ValueError("endingOffsets and endingTimestamp are for batch queries only")
        strategy = opts.get("startingoffsetsbytimestampstrategy", "error").lower()
        if strategy not in ("error", "latest"):
            raise ValueError(
                f"startingOffsetsByTimestampStrategy must be error or latest, not {strategy!r}"
            )
        return cls(
            bootstrap=bootstrap_option(opts),
            subscription=_subscription(opts),
            starting=starting,
            ending=ending,
            min_partitions=_positive_int(opts, "minpartitions"),
            max_records_per_partition=_positive_int(opts, "maxrecordsperpartition"),
            max_offsets_per_trigger=_positive_int(opts, "maxoffsetspertrigger"),
            fail_on_data_loss=_bool(opts, "failondataloss", True),
            include_headers=_bool(opts, "includeheaders", False),
            timestamp_strategy="error" if strategy == "error" else "latest",
            fetch_max_bytes=_positive_int(opts, "kraft.fetch.max.bytes") or DEFAULT_FETCH_MAX_BYTES,
            security=security_options(opts),
            client_rack=opts.get("kafka.client.rack", "").strip(),
            read_committed=_isolation(opts),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteOptions:
    bootstrap: str
    topic: str | None
    """The ``topic`` option: overrides a ``topic`` column, as in Kafka's sink."""
    producer: Mapping[str, str]
    """``kafka.*`` options other than the bootstrap, passed to the `Producer` (``linger.ms``)."""

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> WriteOptions:
        """Raises: ValueError: no bootstrap, or an empty topic."""
        opts = lower_keys(options)
        topic = opts.get("topic")
        if topic is not None and not topic.strip():
            raise ValueError("the topic option is empty")
        producer = {
            k.removeprefix("kafka."): v
            for k, v in opts.items()
            if k.startswith("kafka.") and k != "kafka.bootstrap.servers"
        }
        return cls(
            bootstrap=bootstrap_option(opts),
            topic=None if topic is None else topic.strip(),
            producer=producer,
        )


def security_options(opts: Mapping[str, str]) -> dict[str, str]:
    """The TLS options (`SECURITY_OPTIONS`), checked: the files are read once here, on the
    driver, so a bad one fails the query before any task runs.

    Raises:
        ValueError: a bad protocol, a certificate without its key, an unreadable or non-PEM
            file (the message names the option).
    """
    from kraft.security.tls import client_tls
    from storage.errors import InvalidConfigError

    security = {name: opts[key].strip() for key, name in SECURITY_OPTIONS.items() if key in opts}
    if not security:
        return {}
    try:
        client_tls(**security)
    except InvalidConfigError as e:
        message = e.message
        for key, name in SECURITY_OPTIONS.items():
            message = message.replace(name, key)
        raise ValueError(f"option {message}") from None
    return security


def _isolation(opts: Mapping[str, str]) -> bool:
    """``kafka.isolation.level``: True for read_committed."""
    level = opts.get("kafka.isolation.level", "read_uncommitted").strip().lower()
    if level not in ("read_uncommitted", "read_committed"):
        raise ValueError(
            f"kafka.isolation.level must be read_uncommitted or read_committed, not {level!r}"
        )
    return level == "read_committed"


def lower_keys(options: Mapping[str, Any]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def bootstrap_option(opts: Mapping[str, str]) -> str:
    for key in _BOOTSTRAP_KEYS:
        value = opts.get(key, "").strip()
        if value:
            return value
    raise ValueError(
        "option kraft.bootstrap (or kafka.bootstrap.servers) is required: host:port,..."
    )


def _subscription(opts: Mapping[str, str]) -> Subscription:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if len(given) != 1:
        raise ValueError(
            "exactly one of the options subscribe, subscribePattern and assign is required, "
            f"got {given or 'none'}"
        )
    key = given[0]
    value = opts[key].strip()
    if key == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in value.split(",") if t.strip()))
        if not topics:
            raise ValueError("subscribe names no topic")
        return Subscribe(topics)
    if key == "subscribepattern":
        try:
            re.compile(value)
        except re.error as e:
            raise ValueError(f"subscribePattern {value!r} is not a valid regex: {e}") from e
        return SubscribePattern(value)
    data = _json(value, "assign")
    tps: list[TopicPartition] = []
    if not isinstance(data, dict) or not data:
        raise ValueError(f'assign must be like {{"topic":[0,1]}}, not {value!r}')
    for topic, parts in data.items():
        if not isinstance(parts, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts
        ):
            raise ValueError(f"assign: partitions of {topic!r} must be a list of ints >= 0")
        tps.extend(TopicPartition(topic, p) for p in parts)
    return Assign(tuple(dict.fromkeys(tps)))


def _offset_spec(opts: Mapping[str, str], key: str, *, default: int, ending: bool) -> OffsetSpec:
    prefix = "ending" if ending else "starting"
    timestamp_ms = _int(opts, f"{prefix}timestamp")
    if timestamp_ms is not None and timestamp_ms < 0:
        raise ValueError(f"{prefix}Timestamp must be >= 0, not {timestamp_ms}")
    timestamps: dict[TopicPartition, int] = {}
    by_ts = opts.get(f"{prefix}offsetsbytimestamp")
    if by_ts is not None:
        timestamps = _partition_json(by_ts, f"{prefix}OffsetsByTimestamp", minimum=0)
    raw = opts.get(key)
    if raw is None:
        return OffsetSpec(default=default, timestamp_ms=timestamp_ms, timestamps=timestamps)
    word = raw.strip().lower()
    if word == "earliest":
        if ending:
            raise ValueError("endingOffsets cannot be earliest")
        return OffsetSpec(default=EARLIEST, timestamp_ms=timestamp_ms, timestamps=timestamps)
    if word == "latest":
        return OffsetSpec(default=LATEST, timestamp_ms=timestamp_ms, timestamps=timestamps)
    name = f"{prefix}Offsets"
    offsets = _partition_json(raw, name, minimum=EARLIEST)
    if ending and EARLIEST in offsets.values():
        raise ValueError(f"{name}: -2 (earliest) is not allowed as an ending offset")
    return OffsetSpec(
        default=default, offsets=offsets, timestamp_ms=timestamp_ms, timestamps=timestamps
    )


def _partition_json(raw: str, name: str, *, minimum: int) -> dict[TopicPartition, int]:
    data = _json(raw, name)
    example = '{"topic":{"0":23,"1":-2}}'
    if not isinstance(data, dict):
        raise ValueError(f"{name} must be earliest, latest or JSON like {example}, not {raw!r}")
    out: dict[TopicPartition, int] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise ValueError(f"{name}: {topic!r} must map partitions to numbers, like {example}")
        for partition, value in parts.items():
            try:
                p = int(partition)
            except ValueError:
                raise ValueError(f"{name}: partition {partition!r} is not a number") from None
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum or p < 0:
                raise ValueError(f"{name}: bad value {value!r} for {topic}-{partition}")
            out[TopicPartition(topic, p)] = value
    return out


def _json(raw: str, name: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(f"{name} is not valid JSON ({e}): {raw!r}") from None


def _int(opts: Mapping[str, str], key: str) -> int | None:
    raw = opts.get(key)
    if raw is None:
        return None
    try:
        return int(raw.strip())
    except ValueError:
        raise ValueError(f"option {key} must be an integer, not {raw!r}") from None


def _positive_int(opts: Mapping[str, str], key: str) -> int | None:
    value = _int(opts, key)
    if value is not None and value < 1:
        raise ValueError(f"option {key} must be >= 1, not {value}")
    return value


def _bool(opts: Mapping[str, str], key: str, default: bool) -> bool:
    raw = opts.get(key)
    if raw is None:
        return default
    word = raw.strip().lower()
    if word not in ("true", "false"):
        raise ValueError(f"option {key} must be true or false, not {raw!r}")
    return word == "true"


__all__ = [
    "EARLIEST",
    "LATEST",
    "Assign",
    "OffsetSpec",
    "ReadOptions",
    "Subscribe",
    "SubscribePattern",
    "Subscription",
    "WriteOptions",
    "bootstrap_option",
    "lower_keys",
    "security_options",
]
