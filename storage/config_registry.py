"""The config registry: every key kraft's topics, brokers and controllers read, each once.

A key is a `ConfigKey`: Kafka's dotted name, its type, its default (a string, as Kafka stores
configs), its validator (range, allowed values, values not supported yet), which layer reads
it, its broker synonym when it is a topic key, the snake_case field it fills, and its doc line.
Everything else is derived from `REGISTRY`:

- ``storage.config.PROPERTY_KEYS`` (the log settings of `LogConfig`) and `LogConfig`'s ranges;
- the broker's static log defaults (``log.retention.ms`` -> ``retention.ms``: `BROKER_LOG_KEYS`)
  and the controller's dynamic broker keys (`DYNAMIC_BROKER_KEYS`, the synonyms);
- the controller's topic-config validation (`validate`, via ``kraft.metadata.configs``);
- the field tables of `RaftConfig`, `ReplicationConfig`, `ControllerConfig` and the node
  configs (`node_property_fields`);
- the configuration tables of ``docs/operations.md`` (`storage.config_docs`; a test holds them
  equal).

`LogConfig` takes its defaults from here too. `RaftConfig`, `ReplicationConfig`,
`ControllerConfig` and the node configs keep a literal default on each field (a frozen
dataclass reads best that way), and ``tests/test_config_registry.py`` holds every one equal to
the registry's, and every field of theirs to a registry key. The `ConfigKey` class and its
validator are in `storage.config_key`.

Where it lives, and why here. Dependencies point ``storage <- kraft <- replication <- spark``
(``tests/test_contract.py``), and the lowest reader is storage's `LogConfig`, so the one table
sits at the bottom, as Kafka keeps ``TopicConfig`` and ``ConfigDef`` in its clients module, the
bottom of its own graph. The registry is data plus pure validation: it imports nothing of the
layers that read it, and names their config classes only as strings (``owner``).

Two namespaces, as in Kafka: *topic* keys (set per topic, or by default through their broker
synonym) and *node* keys (a broker's or a controller's properties file). A name is unique in its
namespace; a topic key's synonym may share its name (``min.insync.replicas``). The producer and
consumer settings keep their own dataclasses (``replication/clients/config.py``): they are a
third namespace (``compression.type`` means another thing there) and already derive their keys
from their fields.

Values Kafka has that kraft does not implement yet are refused (INVALID_CONFIG, "not supported
yet") rather than stored and ignored: ``message.timestamp.type=LogAppendTime``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from storage.config_key import (
    CONFIG_VALUE_MAX_CHARS,
    INT_MAX,
    LONG_MAX,
    SEGMENT_BYTES_MIN,
    ConfigKey,
    ConfigType,
    Reader,
    Scope,
    quoted,
    split_list,
)

_MIB = 1024 * 1024
_DAY_MS = 24 * 60 * 60 * 1000
_B = frozenset({Reader.BROKER})
_C = frozenset({Reader.CONTROLLER})
_BC = frozenset({Reader.BROKER, Reader.CONTROLLER})


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


def _node(
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
) -> ConfigKey:
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
    )


_T = ConfigType
_LOG = "LogConfig"
_RAFT = "RaftConfig"
_BROKER = "BrokerNodeConfig"

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
        "compacted topics: how long a tombstone (a record with a null value) is kept after its "
        "timestamp, so a consumer reading from the start sees the delete",
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

_RAFT_KEYS: Final = (
    ("election.timeout.ms", "election_timeout_ms", "150", "candidates wait a random time in "
     "[T, 2T) before campaigning", False),
    ("fetch.timeout.ms", "fetch_timeout_ms", "250", "a follower that has not fetched from its "
     "leader for this long campaigns; a leader not fetched from by a majority for 1.5x this "
     "long resigns (check-quorum)", False),
    ("election.backoff.max.ms", "election_backoff_max_ms", "100", "upper bound of the random "
     "backoff after a lost election", False),
    ("append.linger.ms", "append_linger_ms", "2", "the leader gathers proposals this long into "
     "one batch (only behind entries still awaiting replication)", False),
    ("request.timeout.ms", "request_timeout_ms", "200", "resend a request with no response "
     "after this long", False),
    ("retry.backoff.ms", "retry_backoff_ms", "20", "wait after an error response", False),
    ("fetch.max.wait.ms", "fetch_max_wait_ms", "60", "long poll of a caught-up fetch; must be "
     "below the request and fetch timeouts", True),
    ("high.watermark.linger.ms", "high_watermark_linger_ms", "5", "a caught-up fetch that only "
     "has a newer high watermark to learn stays parked this long, so the next entry rides it "
     "(one round trip per commit); an idle follower learns the high watermark at most this "
     "late; 0 answers at once, as Kafka does", True),
    ("fetch.max.bytes", "fetch_max_bytes", "1048576", "bytes per fetch response", True),
    ("fetch.snapshot.max.bytes", "fetch_snapshot_max_bytes", "1048576", "bytes per "
     "FetchSnapshot chunk", True),
    ("append.max.batch.bytes", "append_batch_bytes_max", "1048576", "close a lingering batch "
     "early at this size", True),
    ("apply.max.bytes", "apply_bytes_max", "1048576", "committed bytes applied per Ready (at "
     "least one batch)", True),
    ("log.cache.bytes", "log_cache_bytes_max", "33554432", "recent batches kept in memory to "
     "serve fetches", True),
)  # fmt: skip

_PARTITION_RAFT_KEYS: Final = (
    ("election.timeout.ms", "500", "quorum-mode partitions: once a replica's election starts "
     "it campaigns after a random wait in [T, 2T), and a candidate that neither wins nor "
     "loses within it starts over"),
    ("fetch.timeout.ms", "1000", "quorum-mode partitions: a follower that has not heard from "
     "its leader for this long starts an election (pre-vote first); a leader that no majority "
     "fetched from for 1.5x this long resigns (check-quorum). With the election timeout, it "
     "bounds how long a partition is without a leader after its leader dies"),
    ("request.timeout.ms", "500", "quorum-mode partitions: a Raft request (Fetch, Vote, "
     "BeginQuorumEpoch) between replicas with no response after this long is sent again"),
)  # fmt: skip
"""The partition Raft groups' timeouts: ``quorum.partition.<suffix>``, default, doc."""

NODE_REGISTRY: Final[tuple[ConfigKey, ...]] = (
    _node(
        "process.roles",
        _T.STRING,
        None,
        "written by `LocalCluster`; ignored (each command knows its role)",
        readers=_BC,
        shown_default="(ignored)",
    ),
    _node(
        "node.id",
        _T.INT,
        None,
        "this node's id: a controller's is one of the voters, a broker's differs from every "
        "controller id (one Raft id space)",
        readers=_BC,
        min_value=0,
        shown_default="(required)",
    ),
    _node(
        "controller.quorum.voters",
        _T.LIST,
        None,
        "`id@host:port,...`, every voter (KIP-595): a static voter set. Set this or "
        "`controller.quorum.bootstrap.servers`",
        readers=_BC,
        shown_default="(required)",
    ),
    _node(
        "controller.quorum.bootstrap.servers",
        _T.LIST,
        None,
        "instead of `controller.quorum.voters`: the voter set lives in the "
        "metadata log and changes with `kraft quorum add-controller` / `remove-controller` "
        "(KIP-853). `id@host:port,...` of the initial voters, the same on every controller; "
        "a controller not in it starts as an observer until added. A broker needs at least "
        "one reachable voter in it: it learns the voter set and their endpoints from the log "
        "and its controller channel follows them. (Kafka's takes `host:port` "
        "and the initial voters come from `kafka-storage format`; kraft's Raft transport "
        "addresses peers by id.)",
        readers=_BC,
        shown_default="(none)",
    ),
    _node(
        "listeners",
        _T.STRING,
        None,
        "`NAME://host:port`; the first one is served (a broker's is also advertised unless "
        "`advertised.listeners` is set). `SSL://` serves TLS with the `ssl.*` keys and makes "
        "the node dial the other nodes over TLS too; any other name is plaintext",
        readers=_BC,
        shown_default="(required; a controller's: its voter address)",
    ),
    _node(
        "advertised.listeners",
        _T.STRING,
        None,
        "the address registered with the controller, which clients and other brokers connect "
        "to; `0.0.0.0` and `::` are refused",
        readers=_B,
        shown_default="`listeners`",
    ),
    # Transport security (issue 17; kraft.security.tls reads these). Kafka's PEM form
    # (KIP-651): the ``.certificate.chain``/``.key``/``.certificates`` keys hold PEM text, the
    # ``.location`` keys a PEM file's path.
    _node(
        "ssl.keystore.type",
        _T.STRING,
        "PEM",
        "the format of this node's certificate and key (an `SSL://` listener's)",
        readers=_BC,
        choices=("PEM", "JKS", "PKCS12"),
        unsupported=("JKS", "PKCS12"),
        unsupported_reason="kraft reads PEM only",
        shown_default="PEM (Kafka: JKS)",
    ),
    _node(
        "ssl.keystore.certificate.chain",
        _T.STRING,
        None,
        "this node's certificate chain as PEM text (leaf first); it serves with it and presents "
        "it when it dials another node",
        readers=_BC,
        shown_default="(none)",
    ),
    _node(
        "ssl.keystore.key",
        _T.STRING,
        None,
        "this node's private key as PEM text (unencrypted: `ssl.key.password` is not supported)",
        readers=_BC,
        shown_default="(none)",
    ),
    _node(
        "ssl.keystore.location",
        _T.STRING,
        None,
        "the path of a PEM file holding the private key and the certificate chain; instead of "
        "the two keys above",
        readers=_BC,
        shown_default="(none)",
    ),
    _node(
        "ssl.truststore.type",
        _T.STRING,
        "PEM",
        "the format of the trusted CA certificates",
        readers=_BC,
        choices=("PEM", "JKS", "PKCS12"),
        unsupported=("JKS", "PKCS12"),
        unsupported_reason="kraft reads PEM only",
        shown_default="PEM (Kafka: JKS)",
    ),
    _node(
        "ssl.truststore.certificates",
        _T.STRING,
        None,
        "the CA certificates this node trusts, as PEM text: a client's or another node's "
        "certificate must be signed by one",
        readers=_BC,
        shown_default="(none)",
    ),
    _node(
        "ssl.truststore.location",
        _T.STRING,
        None,
        "the path of a PEM file of trusted CA certificates; instead of the key above",
        readers=_BC,
        shown_default="(none)",
    ),
    _node(
        "ssl.client.auth",
        _T.STRING,
        "none",
        "`required`: a caller without a certificate signed by a trusted CA is refused at the "
        "handshake (mTLS); `none`: no client certificate is asked for",
        readers=_BC,
        choices=("required", "requested", "none"),
        unsupported=("requested",),
        unsupported_reason="gRPC's Python server can only require or not request one",
    ),
    _node(
        "log.dirs",
        _T.STRING,
        None,
        "the data directory (first entry only): a broker's partition logs and metadata "
        "observer log; a controller's Raft log unless `metadata.log.dir` is set",
        readers=_BC,
        shown_default="(required, or `log.dir`)",
    ),
    _node(
        "log.dir",
        _T.STRING,
        None,
        "read when `log.dirs` is not set",
        readers=_BC,
        shown_default="(none)",
    ),
    _node(
        "metadata.log.dir",
        _T.STRING,
        None,
        "the Raft log, election state and snapshots",
        readers=_C,
        shown_default="the first of `log.dirs`",
    ),
    _node(
        "broker.session.timeout.ms",
        _T.INT,
        "3000",
        "fence a broker after this long without a heartbeat",
        readers=_C,
        owner="ControllerConfig",
        field="broker_session_timeout_ms",
        min_value=1,
        shown_default="3000 (Kafka: 9000)",
    ),
    _node(
        "num.partitions",
        _T.INT,
        "1",
        "partitions of a topic created with `partitions=-1`",
        readers=_C,
        owner="ControllerConfig",
        field="default_num_partitions",
        min_value=1,
    ),
    _node(
        "default.replication.factor",
        _T.INT,
        "1",
        "replication factor when a request says -1",
        readers=_C,
        owner="ControllerConfig",
        field="default_replication_factor",
        min_value=1,
    ),
    _node(
        "auto.leader.rebalance.enable",
        _T.BOOLEAN,
        "true",
        "move leadership back to the preferred replicas where a broker's imbalance exceeds "
        "`leader.imbalance.per.broker.percentage` (checked every "
        "`leader.imbalance.check.interval.seconds`)",
        readers=_C,
        owner="ControllerConfig",
        field="auto_leader_rebalance_enable",
    ),
    _node(
        "eligible.leader.replicas.enable",
        _T.BOOLEAN,
        "true",
        "KIP-966: a replica that leaves the ISR while it is below `min.insync.replicas` stays "
        "an eligible leader (ELR), and elections take the ISR, then an unfenced ELR member, "
        "then the last known leader",
        readers=_C,
        owner="ControllerConfig",
        field="eligible_leader_replicas_enable",
        shown_default="true (Kafka 4.0: off)",
    ),
    _node(
        "leader.imbalance.check.interval.seconds",
        _T.LONG,
        "300",
        "how often the active controller checks leader balance",
        readers=_C,
        owner="ControllerConfig",
        field="leader_imbalance_check_interval_seconds",
        min_value=1,
    ),
    _node(
        "leader.imbalance.per.broker.percentage",
        _T.INT,
        "10",
        "the share of a broker's preferred partitions it may not lead before a preferred "
        "election moves them back",
        readers=_C,
        owner="ControllerConfig",
        field="leader_imbalance_per_broker_percentage",
        min_value=0,
        max_value=100,
    ),
    _node(
        "metadata.log.max.record.bytes.between.snapshots",
        _T.LONG,
        str(64 * 1024),
        "take a metadata snapshot (KIP-630) after this many applied bytes, and no sooner "
        "than the last snapshot's size in applied bytes (a large image is not re-serialised "
        "after every small interval); 0: never",
        readers=_C,
        owner="ControllerNodeConfig",
        field="snapshot_interval_bytes",
        min_value=0,
        shown_default="65536 (Kafka: 20 MiB)",
    ),
    _node(
        "socket.request.max.bytes",
        _T.INT,
        str(100 * _MIB),
        "the largest request the controller's gRPC server accepts; a larger one is refused "
        "with RESOURCE_EXHAUSTED before it is decoded. Brokers and clients use the same "
        "default (`kraft/transport/channels.py`)",
        readers=_C,
        owner="ControllerNodeConfig",
        field="socket_request_max_bytes",
        min_value=1024,
        shown_default="104857600 (100 MiB, as Kafka)",
    ),
    *(
        _node(
            f"controller.quorum.{suffix}",
            _T.INT,
            default,
            doc,
            readers=_BC,
            owner=_RAFT,
            field=field,
            min_value=0,
            kraft_only=own,
        )
        for suffix, field, default, doc, own in _RAFT_KEYS
    ),
    _node(
        "metrics.port",
        _T.INT,
        "-1",
        "the port of the node's Prometheus endpoint (`/metrics` on its listener's host); -1 "
        "serves none, 0 a free port (its log says which). Metric names: docs/operations.md",
        readers=_BC,
        min_value=-1,
        max_value=65535,
        shown_default="-1 (none)",
        kraft_only=True,
    ),
    _node(
        "broker.rack",
        _T.STRING,
        None,
        "rack for rack-aware replica placement",
        readers=_B,
        shown_default="(none)",
    ),
    _node(
        "broker.heartbeat.interval.ms",
        _T.INT,
        "500",
        "heartbeat period to the active controller",
        readers=_B,
        owner=_BROKER,
        field="heartbeat_interval_ms",
        min_value=1,
    ),
    _node(
        "replica.lag.time.max.ms",
        _T.LONG,
        "30000",
        "an ISR follower not caught up for longer is shrunk out of the ISR",
        readers=_B,
        owner="ReplicationConfig",
        field="replica_lag_time_ms_max",
        min_value=1,
    ),
    _node(
        "replica.fetch.wait.max.ms",
        _T.INT,
        "500",
        "a follower's long poll to its leader",
        readers=_B,
        owner=_BROKER,
        field="replica_fetch_wait_max_ms",
        min_value=0,
    ),
    _node(
        "replica.fetch.min.bytes",
        _T.INT,
        "1",
        "a follower fetch is answered once this much is available (or after "
        "`replica.fetch.wait.max.ms`)",
        readers=_B,
        owner=_BROKER,
        field="replica_fetch_min_bytes",
        min_value=1,
    ),
    _node(
        "replica.fetch.max.bytes",
        _T.INT,
        "1048576",
        "bytes per partition in one follower fetch (a larger first batch still comes whole)",
        readers=_B,
        owner=_BROKER,
        field="replica_fetch_max_bytes",
        min_value=0,
    ),
    _node(
        "replica.fetch.response.max.bytes",
        _T.INT,
        "10485760",
        "bytes of all partitions in one follower fetch response",
        readers=_B,
        owner=_BROKER,
        field="replica_fetch_response_max_bytes",
        min_value=0,
    ),
    _node(
        "replica.fetch.backoff.ms",
        _T.INT,
        "1000",
        "a follower's wait after a failed fetch",
        readers=_B,
        owner="ReplicationConfig",
        field="replica_fetch_backoff_ms",
        min_value=0,
    ),
    # KIP-73 replication quotas, applied by kraft to reassignment traffic only (KIP-455): the
    # fetches of a partition's adding replicas. Kafka throttles the replicas listed in the
    # topic's `leader/follower.replication.throttled.replicas`, which kafka-reassign-partitions
    # sets to the moving ones; kraft knows them from the partition's registration.
    _node(
        "leader.replication.throttled.rate",
        _T.LONG,
        str(LONG_MAX),
        "bytes/s a leader sends to the adding replicas of partitions being reassigned "
        "(all such fetches of the broker together); also a dynamic broker config",
        readers=_B,
        owner=_BROKER,
        field="leader_replication_throttled_rate",
        min_value=1,
        shown_default=f"{LONG_MAX} (unlimited)",
    ),
    _node(
        "follower.replication.throttled.rate",
        _T.LONG,
        str(LONG_MAX),
        "bytes/s a broker fetches for its adding replicas of partitions being reassigned; "
        "also a dynamic broker config",
        readers=_B,
        owner=_BROKER,
        field="follower_replication_throttled_rate",
        min_value=1,
        shown_default=f"{LONG_MAX} (unlimited)",
    ),
    _node(
        "replica.high.watermark.checkpoint.interval.ms",
        _T.LONG,
        "5000",
        "how often each replica's high watermark is written (fsynced) to "
        "`high-watermark-checkpoint`",
        readers=_B,
        owner=_BROKER,
        field="high_watermark_checkpoint_interval_ms",
        min_value=1,
    ),
    # kraft's own key: Kafka's AlterPartitionManager uses an exponential backoff from 50 ms.
    _node(
        "alter.partition.retry.backoff.ms",
        _T.INT,
        "100",
        "wait before resending an AlterPartition that failed retriably",
        readers=_B,
        owner="ReplicationConfig",
        field="alter_partition_retry_backoff_ms",
        min_value=0,
        kraft_only=True,
    ),
    _node(
        "log.retention.check.interval.ms",
        _T.LONG,
        "300000",
        "how often the broker applies retention to every replica",
        readers=_B,
        owner=_BROKER,
        field="log_retention_check_interval_ms",
        min_value=1,
    ),
    _node(
        "log.cleaner.backoff.ms",
        _T.LONG,
        "15000",
        "how often the broker's log cleaner looks for compacted logs to clean "
        "(`cleanup.policy=compact`; docs/compaction.md)",
        readers=_B,
        owner=_BROKER,
        field="log_cleaner_backoff_ms",
        min_value=1,
    ),
    _node(
        "log.cleaner.threads",
        _T.INT,
        "1",
        "worker threads the log cleaner cleans in, one log each at a time, off the broker's "
        "event loop (the swap onto the live log is applied on the loop; docs/compaction.md)",
        readers=_B,
        owner=_BROKER,
        field="log_cleaner_threads",
        min_value=1,
    ),
    _node(
        "log.cleaner.dedupe.buffer.size",
        _T.LONG,
        "134217728",
        "memory for the cleaner's key maps, shared by its threads: a pass maps the keys of "
        "as much of a log's dirty part as fits and cleans that prefix, the next pass goes on "
        "(an entry costs ~128 bytes here, 24 in Kafka's packed map; docs/compaction.md)",
        readers=_B,
        owner=_BROKER,
        field="log_cleaner_dedupe_buffer_size",
        min_value=1,
    ),
    # -- consumer groups (KIP-848): the offsets topic and the group coordinator ------------------
    _node(
        "offsets.topic.num.partitions",
        _T.INT,
        "50",
        "partitions of `__consumer_offsets`, created on the first FindCoordinator (a group "
        "lives on partition `abs(hashCode(group.id)) % this`)",
        readers=_B,
        owner=_BROKER,
        field="offsets_topic_num_partitions",
        min_value=1,
    ),
    _node(
        "offsets.topic.replication.factor",
        _T.INT,
        "3",
        "replication factor of `__consumer_offsets` (capped at the number of live brokers)",
        readers=_B,
        owner=_BROKER,
        field="offsets_topic_replication_factor",
        min_value=1,
    ),
    _node(
        "offsets.retention.minutes",
        _T.INT,
        "10080",
        "the committed offsets of a group that has been empty this long are deleted",
        readers=_B,
        owner=_BROKER,
        field="offsets_retention_minutes",
        min_value=1,
    ),
    _node(
        "group.consumer.session.timeout.ms",
        _T.INT,
        "45000",
        "a member that sends no heartbeat for this long is removed from its group",
        readers=_B,
        owner=_BROKER,
        field="group_consumer_session_timeout_ms",
        min_value=1,
    ),
    _node(
        "group.consumer.heartbeat.interval.ms",
        _T.INT,
        "5000",
        "the heartbeat interval the coordinator gives members",
        readers=_B,
        owner=_BROKER,
        field="group_consumer_heartbeat_interval_ms",
        min_value=1,
    ),
    _node(
        "group.consumer.max.size",
        _T.INT,
        str(INT_MAX),
        "members one consumer group may have (GROUP_MAX_SIZE_REACHED beyond)",
        readers=_B,
        owner=_BROKER,
        field="group_consumer_max_size",
        min_value=1,
    ),
    _node(
        "group.consumer.assignors",
        _T.LIST,
        "uniform,range",
        "the server-side assignors (`uniform`, `range`); the first is the default, a member "
        "may ask for another with `group.remote.assignor`",
        readers=_B,
        owner=_BROKER,
        field="group_consumer_assignors",
    ),
    # kraft's own: the Raft groups of quorum-mode partitions (issue 12), the partition
    # counterparts of Kafka's controller.quorum.election.timeout.ms / fetch.timeout.ms /
    # request.timeout.ms (KIP-595); slower defaults, as a broker runs many groups.
    *(
        _node(
            f"quorum.partition.{suffix}",
            _T.INT,
            default,
            doc,
            readers=_B,
            owner=_BROKER,
            field=f"quorum_partition_{suffix.replace('.', '_')}",
            min_value=1,
            kraft_only=True,
        )
        for suffix, default, doc in _PARTITION_RAFT_KEYS
    ),
    _node(
        "group.coordinator.snapshot.interval.records",
        _T.INT,
        "1000",
        "after this many records appended to a `__consumer_offsets` partition, its coordinator "
        "writes a snapshot of its state and moves the log start offset past the older records",
        readers=_B,
        owner=_BROKER,
        field="group_coordinator_snapshot_interval_records",
        min_value=1,
        kraft_only=True,
    ),
    # -- authorization (issue 17; kraft.security.guard reads these) -------------------------------
    _node(
        "authorizer.class.name",
        _T.STRING,
        None,
        "any non-empty value turns authorization on: kraft has one built-in authorizer, Kafka's "
        "StandardAuthorizer rules over the ACLs of the metadata log (so "
        "`org.apache.kafka.metadata.authorizer.StandardAuthorizer` works as in Kafka)",
        readers=_BC,
        shown_default="(none: every call is allowed)",
    ),
    _node(
        "super.users",
        _T.STRING,
        None,
        "principals that may do everything, `;`-separated (`User:CN=broker1;User:admin`): the "
        "nodes' own principals belong here",
        readers=_BC,
        shown_default="(none)",
    ),
    _node(
        "allow.everyone.if.no.acl.found",
        _T.BOOLEAN,
        "false",
        "with authorization on, a resource that no ACL names is open to everyone",
        readers=_BC,
    ),
    _node(
        "ssl.principal.mapping.rules",
        _T.STRING,
        "DEFAULT",
        "how a client certificate's subject becomes the principal `User:<name>`: "
        "`RULE:pattern/replacement/[LU]` rules tried in order, `DEFAULT` keeps the whole DN",
        readers=_BC,
    ),
)
"""Every node key a broker or controller reads, except the topic keys' synonyms (derived)."""

REGISTRY: Final[tuple[ConfigKey, ...]] = TOPIC_REGISTRY + NODE_REGISTRY
"""The one table."""

TOPIC_KEYS: Final[Mapping[str, ConfigKey]] = {k.name: k for k in TOPIC_REGISTRY}
NODE_KEYS: Final[Mapping[str, ConfigKey]] = {k.name: k for k in NODE_REGISTRY}

DYNAMIC_NODE_KEYS: Final = (
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
)
"""Node keys that IncrementalAlterConfigs also takes on a broker (per broker or the cluster
default ``""``), overriding the broker's properties at once (Kafka's dynamic broker configs)."""

DYNAMIC_BROKER_KEYS: Final[Mapping[str, ConfigKey]] = {
    **{name: NODE_KEYS[name] for name in DYNAMIC_NODE_KEYS},
    **{
        k.synonym: ConfigKey(
            name=k.synonym,
            scope=Scope.NODE,
            type=k.type,
            default=k.default,
            readers=k.readers,
            doc=f"the default of the topic key `{k.name}`",
            min_value=k.min_value,
            max_value=k.max_value,
            choices=k.choices,
            unsupported=k.unsupported,
            unsupported_reason=k.unsupported_reason,
            shown_default=k.shown_default,
        )
        for k in TOPIC_REGISTRY
        if k.synonym is not None
    },
}
"""The broker keys IncrementalAlterConfigs takes (per broker or the cluster default ``""``):
the topic keys' synonyms, validated as the topic key is, and `DYNAMIC_NODE_KEYS`."""

TOPIC_KEY_OF_SYNONYM: Final[Mapping[str, str]] = {
    k.synonym: k.name for k in TOPIC_REGISTRY if k.synonym is not None
}

BROKER_LOG_KEYS: Final[Mapping[str, str]] = {
    k.synonym: k.name for k in TOPIC_REGISTRY if k.synonym is not None and k.owner == _LOG
}
"""Broker key -> topic key of the log settings: a broker's static properties
(``log.retention.ms``, ...) are the default of every topic that sets none."""

LOG_PROPERTY_FIELDS: Final[Mapping[str, str]] = {
    k.name: k.field for k in TOPIC_REGISTRY if k.owner == _LOG and k.field is not None
}
"""Topic key -> `LogConfig` field (``storage.config.PROPERTY_KEYS``)."""


def node_property_fields(owner: str) -> dict[str, str]:
    """Node property -> field of the config class ``owner`` (a topic key held by a node's
    config is read under its synonym: ``min.insync.replicas`` of `ReplicationConfig`)."""
    out = {k.name: k.field for k in NODE_REGISTRY if k.owner == owner and k.field is not None}
    for k in TOPIC_REGISTRY:
        if k.owner == owner and k.owner != _LOG and k.field is not None and k.synonym:
            out[k.synonym] = k.field
    return out


def validate(scope: Scope, key: str, value: str) -> str | None:
    """Why ``key=value`` is invalid, or None: a topic key on a topic, or a dynamic broker key
    (a topic key's synonym) on a broker resource."""
    keys = TOPIC_KEYS if scope is Scope.TOPIC else DYNAMIC_BROKER_KEYS
    definition = keys.get(key)
    if definition is None:
        kind = "topic" if scope is Scope.TOPIC else "broker"
        return f"unknown {kind} config {quoted(key)}"
    return definition.validate(value)


__all__ = [
    "BROKER_LOG_KEYS",
    "CONFIG_VALUE_MAX_CHARS",
    "DYNAMIC_BROKER_KEYS",
    "DYNAMIC_NODE_KEYS",
    "INT_MAX",
    "LOG_PROPERTY_FIELDS",
    "LONG_MAX",
    "NODE_KEYS",
    "NODE_REGISTRY",
    "REGISTRY",
    "SEGMENT_BYTES_MIN",
    "TOPIC_KEYS",
    "TOPIC_KEY_OF_SYNONYM",
    "TOPIC_REGISTRY",
    "ConfigKey",
    "ConfigType",
    "Reader",
    "Scope",
    "node_property_fields",
    "quoted",
    "split_list",
    "validate",
]
