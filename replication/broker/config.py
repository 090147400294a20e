"""A broker node's configuration: a Kafka-style properties file plus command-line flags.

The one place that turns the broker's dotted Kafka keys into snake_case fields (STYLE §4)::

    # broker-101.properties
    process.roles=broker
    node.id=101
    controller.quorum.voters=1@127.0.0.1:9091
    listeners=PLAINTEXT://127.0.0.1:9092
    log.dirs=/var/lib/kraft/broker-101
    broker.rack=rack-a
    broker.heartbeat.interval.ms=500
    replica.lag.time.max.ms=30000

Keys read (unknown keys are ignored): ``node.id``, ``controller.quorum.voters`` (or
``controller.quorum.bootstrap.servers``, KIP-853: the voters then come from the log), ``listeners``
(named, as Kafka's: the first, the inter-broker listener, serves kraft's gRPC; every other one
the Kafka protocol, `replication.broker.kafka`), ``advertised.listeners`` (each listener's
address registered with the controller and handed to clients and other brokers; default: the
listener's, which then must not be the meta-address ``0.0.0.0``),
``listener.security.protocol.map``, ``inter.broker.listener.name``,
``socket.request.max.bytes``, ``queued.max.requests``, ``log.dirs`` (the first directory),
``broker.rack``, ``replica.selector.class``,
``broker.heartbeat.interval.ms``, ``replica.fetch.wait.max.ms``, ``replica.fetch.max.bytes``,
``replica.high.watermark.checkpoint.interval.ms``,
``replica.lag.time.max.ms``, ``replica.fetch.backoff.ms``, ``min.insync.replicas`` (the
default of topics that set none; the cluster-wide dynamic default and topic configs override
it), the ``controller.quorum.*`` Raft timeouts of the metadata observer,
``log.retention.check.interval.ms``, the TLS keys (``listeners=SSL://`` with ``ssl.*``:
`kraft.security.tls`) and the log defaults of `BROKER_LOG_KEYS`
(``log.retention.ms``, ``log.retention.bytes``, ``log.segment.bytes``, ``log.roll.ms``, ...;
validated as the log validates them; topic configs override them). Every key, its default and
its range are in the config registry (`storage.config_registry`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraft.loop_watch import LOOP_STALL_LOG_MS, STALL_WARN_FIELD
from kraft.properties import (
    format_voters,
    int_property,
    metrics_port_property,
    parse_voters,
    quorum_property,
)
from kraft.raft import RaftConfig
from kraft.security.settings import AuthorizationSettings
from kraft.security.tls import TlsConfig, listener_properties, node_tls, ssl_material
from kraft.types import NodeId
from replication.core import ReplicationConfig
from replication.driver.quorum_log import QUORUM_LOG_CACHE_BYTES
from storage.config import bool_fields_from_properties, int_fields_from_properties
from storage.config_key import ConfigType
from storage.config_registry import (
    BROKER_LOG_KEYS,
    DYNAMIC_BROKER_KEYS,
    INT_MAX,
    LONG_MAX,
    NODE_KEYS,
    listener_key,
    node_property_fields,
)
from storage.errors import InvalidConfigError

_ASSIGNORS_KEY = "group.consumer.assignors"
_SELECTOR_KEY = "replica.selector.class"
_BOOL_FIELDS = {
    k: f
    for k, f in node_property_fields("BrokerNodeConfig").items()
    if NODE_KEYS[k].type is ConfigType.BOOLEAN
}
_INT_FIELDS = {
    **{
        k: f
        for k, f in node_property_fields("BrokerNodeConfig").items()
        if k != _ASSIGNORS_KEY and k not in _BOOL_FIELDS
    },
    **STALL_WARN_FIELD,  # a key of both roles, held by each node config
}
"""Key -> field of this class's integer and boolean settings (from the registry)."""
GROUP_ASSIGNORS = ("uniform", "range")
"""The server-side assignors kraft has (KIP-848's ``uniform`` and ``range``)."""
DEFAULT_RETENTION_CHECK_INTERVAL_MS = int(NODE_KEYS["log.retention.check.interval.ms"].default or 0)
"""Kafka's ``log.retention.check.interval.ms`` default (5 minutes)."""
_SOCKET_REQUEST_MAX_BYTES = int(NODE_KEYS["socket.request.max.bytes"].default or 0)
NON_ROUTABLE_HOSTS = frozenset({"", "0.0.0.0", "::", "[::]"})
"""Hosts a broker may listen on but not advertise (Kafka refuses the meta-address too)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class KafkaListenerSpec:
    """One Kafka-protocol entry of ``listeners`` (every entry but the inter-broker one)."""

    name: str
    listen: str
    """host:port to bind (port 0: any free port)."""
    advertised: str | None = None
    """[advertised.listeners] host:port registered under ``name``; None: ``listen``'s (with
    the bound port)."""
    security_protocol: str = "PLAINTEXT"


def parse_listeners(spec: str) -> list[tuple[str, str]]:
    """``NAME://host:port,...`` as (NAME, host:port) pairs, names upper-cased; a first entry
    without a name (``host:port``, as kraft's one-listener configs have it) is PLAINTEXT.

    Raises:
        InvalidConfigError: an entry has no name, or a name repeats.
    """
    out: list[tuple[str, str]] = []
    for raw in spec.split(","):
        entry = raw.strip()
        if not entry:
            continue
        if not out and "://" not in entry:  # kraft's older one-listener form: HOST:PORT
            entry = f"PLAINTEXT://{entry}"
        name, sep, address = entry.partition("://")
        if not sep or not name.strip():
            raise InvalidConfigError(f"listeners: {entry!r} is not NAME://host:port")
        name = name.strip().upper()
        if any(name == n for n, _ in out):
            raise InvalidConfigError(f"listeners: the name {name} appears twice")
        out.append((name, address.strip()))
    return out


def _security_protocols(props: Mapping[str, str]) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for raw in props.get("listener.security.protocol.map", "").split(","):
        if not raw.strip():
            continue
        name, sep, protocol = raw.partition(":")
        if not sep or protocol.strip().upper() not in ("PLAINTEXT", "SSL"):
            sasl = protocol.strip().upper().startswith("SASL")
            raise InvalidConfigError(
                f"listener.security.protocol.map: {raw.strip()[:80]!r} is not NAME:PLAINTEXT "
                "or NAME:SSL"
                + (
                    " (kraft has no SASL: authenticate Kafka clients with SSL client certificates)"
                    if sasl
                    else ""
                )
            )
        mapping[name.strip().upper()] = protocol.strip().upper()
    return mapping


def _kafka_listeners(
    props: Mapping[str, str], listeners: list[tuple[str, str]]
) -> tuple[KafkaListenerSpec, ...]:
    protocols = _security_protocols(props)
    advertised = dict(parse_listeners(props.get("advertised.listeners", "")))
    inter_broker = props.get("inter.broker.listener.name", "").strip().upper()
    if inter_broker and inter_broker != listeners[0][0]:
        raise InvalidConfigError(
            f"inter.broker.listener.name={inter_broker}: kraft's inter-broker (gRPC) listener "
            f"is the first of listeners, {listeners[0][0]}; list {inter_broker} first"
        )
    specs = []
    for name, address in listeners[1:]:
        protocol = protocols.get(name, "SSL" if name == "SSL" else "PLAINTEXT")
        host = address.rpartition(":")[0]
        if advertised.get(name) is None and host in NON_ROUTABLE_HOSTS:
            raise InvalidConfigError(
                f"listeners: {name}://{address} is not an address clients can connect to; set "
                f"advertised.listeners={name}://<host clients reach>:<port>"
            )
        specs.append(
            KafkaListenerSpec(
                name=name,
                listen=address,
                advertised=advertised.get(name),
                security_protocol=protocol,
            )
        )
    return tuple(specs)


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerNodeConfig:
    """Everything one broker process needs (Kafka key in brackets)."""

    node_id: NodeId
    """[node.id] must differ from every controller id (one Raft id space)."""
    voters: Mapping[int, str]
    """[controller.quorum.voters] or [controller.quorum.bootstrap.servers] (``dynamic_voters``)."""
    listen: str
    """[listeners] host:port the Broker and Controller-forwarding services are served on (the
    first, inter-broker, listener's)."""
    listener_name: str = ""
    """[listeners] the gRPC listener's name (registered with its endpoint); "": PLAINTEXT, or
    SSL with ``tls``."""
    kafka_listeners: tuple[KafkaListenerSpec, ...] = ()
    """[listeners, advertised.listeners, listener.security.protocol.map] every other listener:
    each serves the Kafka protocol (`replication.broker.kafka`)."""
    socket_request_max_bytes: int = _SOCKET_REQUEST_MAX_BYTES
    """[socket.request.max.bytes] the largest request frame a Kafka listener reads."""
    queued_max_requests: int = 500
    """[queued.max.requests] requests in flight per Kafka connection."""
    max_incremental_fetch_session_cache_slots: int = 1000
    """[max.incremental.fetch.session.cache.slots] Kafka clients' fetch sessions (KIP-227)."""
    advertised_listener: str | None = None
    """[advertised.listeners] host:port registered with the controller: what clients and other
    brokers connect to. None: ``listen`` (with the bound port if ``listen`` asks for port 0)."""
    data_dir: Path
    """[log.dirs] partition logs (``<topic>-<partition>/``) and the metadata observer's log."""
    rack: str | None = None
    """[broker.rack]"""
    replica_selector_class: str | None = None
    """[replica.selector.class] KIP-392 (`replication.core.replica_selector`); None: the
    leader serves every consumer."""
    metrics_port: int = -1
    """[metrics.port] the Prometheus endpoint's port (-1: none, 0: a free one)."""
    event_loop_stall_warn_ms: int = LOOP_STALL_LOG_MS
    """[event.loop.stall.warn.ms] (`kraft.loop_watch`)"""
    authorization: AuthorizationSettings = field(default_factory=AuthorizationSettings)
    """[authorizer.class.name, super.users, allow.everyone.if.no.acl.found,
    ssl.principal.mapping.rules] (`kraft.security.guard`)."""
    heartbeat_interval_ms: int = 500
    """[broker.heartbeat.interval.ms]"""
    replica_fetch_wait_max_ms: int = 500
    """[replica.fetch.wait.max.ms] a follower's long-poll."""
    replica_fetch_max_bytes: int = 1 << 20
    """[replica.fetch.max.bytes] per partition in one follower fetch (a first batch larger
    than it still comes whole if it is the response's first)."""
    replica_fetch_min_bytes: int = 1
    """[replica.fetch.min.bytes] a follower fetch is answered once this much is available
    (or after ``replica.fetch.wait.max.ms``)."""
    replica_fetch_response_max_bytes: int = 10 << 20
    """[replica.fetch.response.max.bytes] all partitions of one follower fetch response (the
    leader adds no records past it but the first partition's first batch, KIP-74)."""
    high_watermark_checkpoint_interval_ms: int = 5_000
    """[replica.high.watermark.checkpoint.interval.ms]"""
    leader_replication_throttled_rate: int = LONG_MAX
    """[leader.replication.throttled.rate] bytes/s to adding replicas (reassignment, KIP-455);
    a dynamic broker config of the same name overrides it
    (`replication.broker.replicas.throttle`)."""
    follower_replication_throttled_rate: int = LONG_MAX
    """[follower.replication.throttled.rate] bytes/s fetched for this broker's adding replicas; a
    dynamic broker config overrides it."""
    log_retention_check_interval_ms: int = DEFAULT_RETENTION_CHECK_INTERVAL_MS
    """[log.retention.check.interval.ms] how often retention runs over every replica."""
    dynamic_voters: bool = False
    """[controller.quorum.bootstrap.servers] KIP-853: ``voters`` are only where to start; the
    broker's metadata observer learns the voter set and their endpoints from the log's
    VotersRecord, and its controller channel follows them
    (`replication.broker.lifecycle.broker_lifecycle.controllers`)."""
    log_cleaner_backoff_ms: int = 15_000
    """[log.cleaner.backoff.ms] how often the log cleaner runs over the compacted replicas."""
    log_cleaner_threads: int = 1
    """[log.cleaner.threads] worker threads the cleaner's passes run in."""
    log_cleaner_dedupe_buffer_size: int = 128 << 20
    """[log.cleaner.dedupe.buffer.size] bytes of key maps, shared by the cleaner threads."""
    offsets_topic_num_partitions: int = 50
    """[offsets.topic.num.partitions]"""
    offsets_topic_replication_factor: int = 3
    """[offsets.topic.replication.factor] capped at the number of live brokers."""
    transaction_state_log_num_partitions: int = 50
    """[transaction.state.log.num.partitions]"""
    transaction_state_log_replication_factor: int = 3
    """[transaction.state.log.replication.factor] capped at the number of live brokers."""
    transaction_state_log_min_isr: int = 2
    """[transaction.state.log.min.isr]"""
    transaction_max_timeout_ms: int = 900_000
    """[transaction.max.timeout.ms]"""
    transactional_id_expiration_ms: int = 604_800_000
    """[transactional.id.expiration.ms]"""
    producer_id_expiration_ms: int = 86_400_000
    """[producer.id.expiration.ms] KIP-854 (`.retention.expiration_pass`)."""
    producer_id_expiration_check_interval_ms: int = 600_000
    """[producer.id.expiration.check.interval.ms]"""
    transaction_partition_verification_enable: bool = True
    """[transaction.partition.verification.enable] KIP-890 part 1 (`.txn_verification`)."""
    add_partitions_to_txn_retry_backoff_ms: int = 20
    """[add.partitions.to.txn.retry.backoff.ms] KAFKA-18654 (`.txn_verification`)."""
    add_partitions_to_txn_retry_backoff_max_ms: int = 100
    """[add.partitions.to.txn.retry.backoff.max.ms] KAFKA-18654 (`.txn_verification`)."""
    offsets_retention_minutes: int = 10080
    """[offsets.retention.minutes]"""
    group_consumer_session_timeout_ms: int = 45_000
    """[group.consumer.session.timeout.ms]"""
    group_consumer_heartbeat_interval_ms: int = 5_000
    """[group.consumer.heartbeat.interval.ms]"""
    group_consumer_max_size: int = INT_MAX
    """[group.consumer.max.size]"""
    group_min_session_timeout_ms: int = 6_000
    """[group.min.session.timeout.ms] (classic groups)"""
    group_max_session_timeout_ms: int = 1_800_000
    """[group.max.session.timeout.ms] (classic groups)"""
    group_initial_rebalance_delay_ms: int = 3_000
    """[group.initial.rebalance.delay.ms] (classic groups)"""
    group_max_size: int = INT_MAX
    """[group.max.size] (classic groups)"""
    group_consumer_assignors: str = "uniform,range"
    """[group.consumer.assignors] comma-separated; the first is the default."""
    group_coordinator_snapshot_interval_records: int = 1000
    """[group.coordinator.snapshot.interval.records] (kraft's own key)"""
    quorum_partition_election_timeout_ms: int = 500
    """[quorum.partition.election.timeout.ms] (kraft's own) the partition Raft groups'."""
    quorum_partition_fetch_timeout_ms: int = 1000
    """[quorum.partition.fetch.timeout.ms] (kraft's own) the partition Raft groups'."""
    quorum_partition_request_timeout_ms: int = 500
    """[quorum.partition.request.timeout.ms] (kraft's own) the partition Raft groups'."""
    log_defaults: Mapping[str, str] = field(default_factory=dict)
    """[log.retention.ms, log.retention.bytes, log.segment.bytes, log.roll.ms, ...] under
    their topic keys (``retention.ms``...): every topic's log config unless it sets its own."""
    replication: ReplicationConfig = field(default_factory=ReplicationConfig)
    """[replica.lag.time.max.ms, replica.fetch.backoff.ms, min.insync.replicas]"""
    raft: RaftConfig = field(default_factory=RaftConfig)
    """[controller.quorum.*] for the metadata observer."""
    tls: TlsConfig | None = None
    """[listeners=SSL://, ssl.*] the broker serves TLS and dials the controllers and the other
    brokers with its certificate (`kraft.security.tls.node_tls`); None: plaintext."""
    kafka_tls: Mapping[str, TlsConfig] = field(default_factory=dict)
    """[ssl.*, listener.name.<listener>.ssl.*] what each SSL Kafka listener serves with, by
    listener name: the broker's ``ssl.*`` keys, overridden by the listener's own."""

    def __post_init__(self) -> None:
        self.partition_raft_config()  # NB: refuses bad quorum.partition.* timeouts early
        ssl_listeners = [k.name for k in self.kafka_listeners if k.security_protocol == "SSL"]
        if unserved := [name for name in ssl_listeners if name not in self.kafka_tls]:
            raise InvalidConfigError(
                f"listener {unserved[0]} is SSL: give the broker's ssl.keystore.* and "
                "ssl.truststore.* keys"
            )
        explicit = self.advertised_listener is not None
        address = self.advertised_address
        host, sep, port = address.rpartition(":")
        key = "advertised.listeners" if explicit else "listeners (advertised by default)"
        if not sep or not port.isdigit() or (explicit and not 0 < int(port) < 65536):
            raise InvalidConfigError(f"{key}: {address!r} is not host:port")
        if host in NON_ROUTABLE_HOSTS:
            raise InvalidConfigError(
                f"{key}: {address} is not an address clients can connect to ({host or 'no host'}"
                " means every interface); listen there if you like, but set "
                f"advertised.listeners=PLAINTEXT://<host clients and brokers reach>:{port}"
            )

    def partition_raft_config(self) -> RaftConfig:
        """The Raft config of every quorum-mode partition group on this broker
        (``quorum.partition.*``; the other settings are `RaftConfig`'s defaults).

        Raises:
            InvalidConfigError: the timeouts leave no room for the Raft long poll.
        """
        wait = RaftConfig().fetch_max_wait_ms
        if (
            min(self.quorum_partition_request_timeout_ms, self.quorum_partition_fetch_timeout_ms)
            <= wait
        ):
            raise InvalidConfigError(
                "quorum.partition.request.timeout.ms and quorum.partition.fetch.timeout.ms must "
                f"exceed the Raft long poll ({wait} ms), got "
                f"{self.quorum_partition_request_timeout_ms} and "
                f"{self.quorum_partition_fetch_timeout_ms}"
            )
        return RaftConfig(
            election_timeout_ms=self.quorum_partition_election_timeout_ms,
            fetch_timeout_ms=self.quorum_partition_fetch_timeout_ms,
            request_timeout_ms=self.quorum_partition_request_timeout_ms,
            log_cache_bytes_max=QUORUM_LOG_CACHE_BYTES,
        )

    @property
    def advertised_address(self) -> str:
        """The host:port this broker registers (``advertised.listeners``, else ``listen``)."""
        return self.advertised_listener if self.advertised_listener is not None else self.listen

    @property
    def grpc_listener_name(self) -> str:
        """The name the gRPC listener registers under."""
        return self.listener_name or ("PLAINTEXT" if self.tls is None else "SSL")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> BrokerNodeConfig:
        """Build the config from properties (a file's, with flags merged in).

        Raises:
            InvalidConfigError: a required key is missing or a value is malformed.
        """
        quorum, dynamic = quorum_property(props)
        missing = [k for k in ("node.id",) if not props.get(k)]
        if quorum is None:
            missing.append("controller.quorum.voters")
        data_dir = (props.get("log.dirs") or props.get("log.dir") or "").split(",")[0].strip()
        if not data_dir:
            missing.append("log.dirs")
        listeners = props.get("listeners", "").strip()
        if not listeners:
            missing.append("listeners")
        if missing:
            raise InvalidConfigError(f"missing required config: {', '.join(missing)}")
        node_id = int_property(props, "node.id", -1)
        voters = parse_voters(quorum or "")
        if node_id in voters:
            raise InvalidConfigError(
                f"node.id {node_id} is a controller id; broker ids must differ (one Raft id space)"
            )
        rack = props.get("broker.rack", "").strip() or None
        selector = props.get(_SELECTOR_KEY, "").strip() or None
        if selector is not None and (problem := NODE_KEYS[_SELECTOR_KEY].validate(selector)):
            raise InvalidConfigError(problem)
        named = parse_listeners(listeners)
        if not named and "://" not in listeners:
            named = [("PLAINTEXT", listeners)]  # a bare host:port, as before names
        if not named:
            raise InvalidConfigError("listeners: no listener")
        advertised_named = parse_listeners(props.get("advertised.listeners", ""))
        advertised = dict(advertised_named).get(named[0][0], "")
        if advertised_named and not any(n in dict(named) for n, _ in advertised_named):
            advertised = advertised_named[0][1]  # one unnamed-alike entry: the gRPC listener's
        kafka_listeners = _kafka_listeners(props, named)
        log_defaults = {
            BROKER_LOG_KEYS[k]: v.strip() for k, v in props.items() if k in BROKER_LOG_KEYS
        }
        for key in sorted(k for k in props if k in BROKER_LOG_KEYS):
            if (problem := DYNAMIC_BROKER_KEYS[key].validate(props[key])) is not None:
                raise InvalidConfigError(problem)
        settings: dict[str, Any] = {
            **int_fields_from_properties(props, _INT_FIELDS),
            **bool_fields_from_properties(props, _BOOL_FIELDS),
        }
        return cls(
            node_id=NodeId(node_id),
            voters=voters,
            dynamic_voters=dynamic,
            listen=named[0][1],
            listener_name=named[0][0] if "://" in listeners else "",
            kafka_listeners=kafka_listeners,
            socket_request_max_bytes=int_property(
                props, "socket.request.max.bytes", _SOCKET_REQUEST_MAX_BYTES
            ),
            advertised_listener=advertised or None,
            data_dir=Path(data_dir),
            rack=rack,
            replica_selector_class=selector,
            metrics_port=metrics_port_property(props),
            **settings,
            group_consumer_assignors=_assignors(props),
            log_defaults=log_defaults,
            replication=ReplicationConfig.from_properties(props),
            raft=RaftConfig.from_properties(props),
            authorization=AuthorizationSettings.from_properties(props),
            tls=node_tls(props),
            kafka_tls=_kafka_tls(props, kafka_listeners),
        )

    def to_properties(self) -> dict[str, str]:
        """The config as properties (`from_properties` inverts it)."""
        broker_keys = {topic_key: key for key, topic_key in BROKER_LOG_KEYS.items()}
        props = {
            "process.roles": "broker",
            "node.id": str(self.node_id),
            (
                "controller.quorum.bootstrap.servers"
                if self.dynamic_voters
                else "controller.quorum.voters"
            ): format_voters(self.voters),
            "listeners": ",".join(
                [f"{self.grpc_listener_name}://{self.listen}"]
                + [f"{k.name}://{k.listen}" for k in self.kafka_listeners]
            ),
            "log.dirs": str(self.data_dir),
            **{key: str(getattr(self, field)) for key, field in _INT_FIELDS.items()},
            _ASSIGNORS_KEY: self.group_consumer_assignors,
            **{broker_keys[k]: v for k, v in self.log_defaults.items() if k in broker_keys},
            **self.replication.to_properties(),
            **self.raft.to_properties(),
        }
        if self.socket_request_max_bytes != _SOCKET_REQUEST_MAX_BYTES:
            props["socket.request.max.bytes"] = str(self.socket_request_max_bytes)
        if self.rack is not None:
            props["broker.rack"] = self.rack
        if self.replica_selector_class is not None:
            props[_SELECTOR_KEY] = self.replica_selector_class
        if self.metrics_port != -1:
            props["metrics.port"] = str(self.metrics_port)
        advertised = [
            f"{k.name}://{k.advertised}" for k in self.kafka_listeners if k.advertised is not None
        ]
        if self.advertised_listener is not None:
            advertised.insert(0, f"{self.grpc_listener_name}://{self.advertised_listener}")
        if advertised:
            props["advertised.listeners"] = ",".join(advertised)
        node_wide = self.tls or next(iter(self.kafka_tls.values()), None)
        if node_wide is not None:
            props.update(node_wide.to_properties())
        for name, own in self.kafka_tls.items():
            if own != node_wide:
                props.update({listener_key(name, k): v for k, v in own.to_properties().items()})
        protocols = [f"{k.name}:SSL" for k in self.kafka_listeners if k.security_protocol == "SSL"]
        if protocols:
            props["listener.security.protocol.map"] = ",".join(protocols)
        props.update(self.authorization.to_properties())
        return props


def _kafka_tls(
    props: Mapping[str, str], listeners: tuple[KafkaListenerSpec, ...]
) -> dict[str, TlsConfig]:
    """The ``ssl.*`` material of each SSL Kafka listener: the broker's keys, overridden by
    the listener's own ``listener.name.<listener>.ssl.*`` (`listener_properties`)."""
    return {
        k.name: ssl_material(listener_properties(props, k.name), f"listener {k.name} (SSL)")
        for k in listeners
        if k.security_protocol == "SSL"
    }


def _assignors(props: Mapping[str, str]) -> str:
    raw = props.get(_ASSIGNORS_KEY, "").strip()
    if not raw:
        return str(NODE_KEYS[_ASSIGNORS_KEY].default)
    names = [n.strip() for n in raw.split(",") if n.strip()]
    unknown = [n for n in names if n not in GROUP_ASSIGNORS]
    if unknown or not names:
        raise InvalidConfigError(
            f"group.consumer.assignors: unknown assignor {unknown[0][:40]!r} (kraft has "
            f"{', '.join(GROUP_ASSIGNORS)})"
            if unknown
            else "group.consumer.assignors: empty"
        )
    return ",".join(names)


__all__ = [
    "BROKER_LOG_KEYS",
    "DEFAULT_RETENTION_CHECK_INTERVAL_MS",
    "GROUP_ASSIGNORS",
    "NON_ROUTABLE_HOSTS",
    "BrokerNodeConfig",
    "KafkaListenerSpec",
    "parse_listeners",
]
