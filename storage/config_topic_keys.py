"""The topic keys of the config registry (`storage.config_registry`): Kafka's topic-level
configs (``TopicConfig``), set per topic by CreateTopics or IncrementalAlterConfigs, or for
every topic by their broker synonym (``log.retention.ms`` for ``retention.ms``).

One `ConfigKey` per key, declared with `_topic`; `storage.config_registry` derives everything
else (the synonyms' broker keys, `LogConfig`'s fields, validation, the docs table).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from storage.config_key import (
    LONG_MAX,
    SEGMENT_BYTES_MIN,
    ConfigKey,
    ConfigType,
    Reader,
    Scope,
)

_MIB = 1024 * 1024
_DAY_MS = 24 * 60 * 60 * 1000
_B = frozenset({Reader.BROKER})
_C = frozenset({Reader.CONTROLLER})
_T = ConfigType
_LOG = "LogConfig"


def _topic(
    name: str,
    type_: ConfigType,
    default: str,
    doc: str,
    *,
    readers: frozenset[Reader] = _B,
    synonym: str | None = None,
    owner: str | None = None,
    min_value: int | None = None,
    max_value: int | None = None,
    choices: Iterable[str] | None = None,
    unsupported: Iterable[str] = (),
    unsupported_reason: str = "",
    shown_default: str | None = None,
    kraft_only: bool = False,
) -> ConfigKey:
    return ConfigKey(
        name=name,
        scope=Scope.TOPIC,
        type=type_,
        default=default,
        readers=readers,
        doc=doc,
        min_value=min_value,
        max_value=max_value,
        choices=frozenset(choices) if choices is not None else None,
        unsupported=frozenset(unsupported),
        unsupported_reason=unsupported_reason,
        synonym=synonym,
        owner=owner,
        field=name.replace(".", "_") if owner is not None else None,
        shown_default=shown_default,
        kraft_only=kraft_only,
    )


# NB: Kafka's default is 1 GiB. kraft defaults to 64 MiB because recovery after an unclean
# shutdown re-validates the unflushed segments in Python (CRC of every batch), and example
# clusters run many partitions on one small machine: a smaller segment bounds both the
# recovery scan and the disk held by an active segment that retention may not delete.
_SEGMENT_BYTES_DEFAULT = 64 * _MIB

TOPIC_REGISTRY: Final[tuple[ConfigKey, ...]] = (
    _topic(
        "min.insync.replicas",
        _T.INT,
        "1",
        "acks=all produces need this many ISR members, and the high watermark does not advance "
        "below it; a change reaches the running leader at once. At most the replication factor "
        "(INVALID_CONFIG at create and alter)",
        synonym="min.insync.replicas",
        owner="ReplicationConfig",
        min_value=1,
    ),
    _topic(
        "unclean.leader.election.enable",
        _T.BOOLEAN,
        "false",
        "read by the controller at each election: elect an out-of-sync replica rather than "
        "leave a partition offline",
        readers=_C,
        synonym="unclean.leader.election.enable",
    ),
    _topic(
        "retention.ms",
        _T.LONG,
        str(7 * _DAY_MS),
        "segments whose newest record is older are deleted; -1: forever",
        synonym="log.retention.ms",
        owner=_LOG,
        min_value=-1,
        shown_default="604800000 (7 days)",
    ),
    _topic(
        "retention.bytes",
        _T.LONG,
        "-1",
        "the oldest segments are deleted while the log is larger; -1: no limit",
        synonym="log.retention.bytes",
        owner=_LOG,
        min_value=-1,
    ),
    _topic(
        "segment.bytes",
        _T.INT,
        str(_SEGMENT_BYTES_DEFAULT),
        "roll the active segment before it grows past this; at least 61 (one batch header)",
        synonym="log.segment.bytes",
        owner=_LOG,
        min_value=SEGMENT_BYTES_MIN,
        shown_default="67108864 (64 MiB; Kafka: 1 GiB, see below)",
    ),
    _topic(
        "segment.ms",
        _T.LONG,
        str(7 * _DAY_MS),
        "roll a segment this old",
        synonym="log.roll.ms",
        owner=_LOG,
        min_value=1,
        shown_default="604800000 (7 days)",
    ),
    _topic(
        "segment.index.bytes",
        _T.INT,
        str(10 * _MIB),
        "roll when the offset or time index would exceed this; reaches only segments created "
        "after a change",
        synonym="log.index.size.max.bytes",
        owner=_LOG,
        min_value=12,
        shown_default="10485760 (10 MiB)",
    ),
    _topic(
        "index.interval.bytes",
        _T.INT,
        "4096",
        "one offset (and time) index entry per this many bytes",
        synonym="log.index.interval.bytes",
        owner=_LOG,
        min_value=0,
    ),
    # NB: Kafka takes any value >= 0, but below one batch header (61 bytes) no batch fits:
    # the topic would refuse every produce, so kraft refuses the config instead.
    _topic(
        "max.message.bytes",
        _T.INT,
        "1048588",
        "the largest batch a leader accepts (MESSAGE_TOO_LARGE); at least 61",
        synonym="message.max.bytes",
        owner=_LOG,
        min_value=SEGMENT_BYTES_MIN,
    ),
    _topic(
        "message.timestamp.before.max.ms",
        _T.LONG,
        str(LONG_MAX),
        "a leader refuses a batch with a CreateTime more than this before its clock "
        "(INVALID_TIMESTAMP; KIP-937)",
        synonym="log.message.timestamp.before.max.ms",
        owner=_LOG,
        min_value=0,
        shown_default="9223372036854775807 (never)",
    ),
    # NB: Kafka 3.6's default; Kafka 4.0 lowered it to one hour.
    _topic(
        "message.timestamp.after.max.ms",
        _T.LONG,
        str(LONG_MAX),
        "... more than this after its clock",
        synonym="log.message.timestamp.after.max.ms",
        owner=_LOG,
        min_value=0,
        shown_default="9223372036854775807 (never; Kafka 4.0: one hour)",
    ),
    _topic(
        "flush.messages",
        _T.LONG,
        str(LONG_MAX),
        "fsync after this many records since the last flush",
        synonym="log.flush.interval.messages",
        owner=_LOG,
        min_value=1,
        shown_default="9223372036854775807 (never)",
    ),
    _topic(
        "flush.ms",
        _T.LONG,
        str(LONG_MAX),
        "fsync when the last flush is older than this, checked on append and, for an idle log, "
        "by the broker's tick at that deadline",
        synonym="log.flush.interval.ms",
        owner=_LOG,
        min_value=0,
        shown_default="9223372036854775807 (never)",
    ),
    _topic(
        "cleanup.policy",
        _T.LIST,
        "delete",
        "`delete`: retention deletes old segments. `compact`: the log cleaner keeps the latest "
        "record of each key (docs/compaction.md). `compact,delete`: both",
        synonym="log.cleanup.policy",
        owner=_LOG,
        choices=("delete", "compact"),
    ),
    _topic(
        "delete.retention.ms",
        _T.LONG,
        str(_DAY_MS),
        "compacted topics: how long a tombstone (a record with a null value) is kept after the "
        "first cleaner pass that kept it (KIP-534), so a consumer reading from the start sees "
        "the delete",
        synonym="log.cleaner.delete.retention.ms",
        owner=_LOG,
        min_value=0,
        shown_default="86400000 (1 day)",
    ),
    _topic(
        "min.compaction.lag.ms",
        _T.LONG,
        "0",
        "compacted topics: a segment whose newest record is younger than this is not cleaned",
        synonym="log.cleaner.min.compaction.lag.ms",
        owner=_LOG,
        min_value=0,
    ),
    _topic(
        "min.cleanable.dirty.ratio",
        _T.DOUBLE,
        "0.5",
        "compacted topics: clean a log once its not-yet-cleaned (dirty) bytes are at least this "
        "share of its cleanable bytes",
        synonym="log.cleaner.min.cleanable.ratio",
        owner=_LOG,
        min_value=0,
        max_value=1,
    ),
    _topic(
        "compression.type",
        _T.STRING,
        "producer",
        "`producer`: batches are stored as the producer compressed them. `uncompressed`, "
        "`gzip`, `snappy`, `lz4`, `zstd`: the leader recompresses a batch that arrives in "
        "another codec (offsets, timestamps and producer fields kept)",
        synonym="compression.type",
        owner=_LOG,
        choices=("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
    ),
    _topic(
        "message.timestamp.type",
        _T.STRING,
        "CreateTime",
        "`CreateTime`: timestamps are stored as the producer set them. `LogAppendTime` is "
        "refused (INVALID_CONFIG)",
        synonym="log.message.timestamp.type",
        choices=("CreateTime", "LogAppendTime"),
        unsupported=("LogAppendTime",),
        unsupported_reason="the leader does not stamp its append time",
    ),
    # kraft's own: how a partition replicates (DESIGN.md "Quorum mode").
    _topic(
        "replication.mode",
        _T.STRING,
        "isr",
        "`isr`: leader and followers with an ISR. `quorum`: each partition is a Raft group of "
        "its replicas (commit on a majority, leader by vote). Chosen at creation: changing it "
        "later is refused (INVALID_CONFIG), and so are `min.insync.replicas` and "
        "`unclean.leader.election.enable` on a quorum topic (they do not apply)",
        choices=("isr", "quorum"),
        kraft_only=True,
    ),
    _topic(
        "quorum.write.caching",
        _T.BOOLEAN,
        "false",
        "quorum-mode topics only: acknowledge acks=all once a majority has *received* a batch, "
        "before it is fsynced (Redpanda's write caching); a correlated power loss of a majority "
        "can then lose acknowledged writes",
        kraft_only=True,
    ),
)
"""Every topic key; any other is INVALID_CONFIG on a topic."""


__all__ = ["TOPIC_REGISTRY"]
