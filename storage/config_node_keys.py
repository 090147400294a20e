"""The node keys of the config registry (`storage.config_registry`): what a broker's or a
controller's properties file sets (Kafka's ``KafkaConfig``): the node's identity and listeners,
transport security, the broker's log, replication and quotas, the controller's Raft quorum, the
Raft groups of quorum-mode partitions, and authorization. The consumer-group keys have a table
of their own, `storage.config_group_keys`, spliced in at their place.

One `ConfigKey` per key, declared with `_node`, in the order of the docs tables (each node
table of docs/operations.md lists its reader's keys in this order).
"""

from __future__ import annotations

from typing import Final

from storage.config_group_keys import GROUP_NODE_KEYS
from storage.config_key import INT_MAX, LONG_MAX, ConfigKey, ConfigType, Reader
from storage.config_key import node_key as _node

_MIB = 1024 * 1024
_B = frozenset({Reader.BROKER})
_C = frozenset({Reader.CONTROLLER})
_BC = frozenset({Reader.BROKER, Reader.CONTROLLER})
_T = ConfigType
_RAFT = "RaftConfig"
_BROKER = "BrokerNodeConfig"


_RAFT_KEYS: Final = (
    ("election.timeout.ms", "election_timeout_ms", "300", "candidates wait a random time in "
     "[T, 2T) before campaigning", False),
    ("fetch.timeout.ms", "fetch_timeout_ms", "2000", "a follower that has not fetched from its "
     "leader for this long campaigns (at once when the leader's host closes the connection: "
     "its process exited); a leader not fetched from by a majority for 1.5x this long resigns "
     "(check-quorum)", False),
    ("election.backoff.max.ms", "election_backoff_max_ms", "100", "upper bound of the random "
     "backoff after a lost election", False),
    ("append.linger.ms", "append_linger_ms", "2", "the leader gathers proposals this long into "
     "one batch (only behind entries still awaiting replication)", False),
    ("request.timeout.ms", "request_timeout_ms", "400", "resend a request with no response "
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
        "`NAME://host:port,...`, each name once. The first is the inter-broker listener: it "
        "serves kraft's gRPC (kraft's clients, admin forwarding, replication between brokers), "
        "with TLS and the `ssl.*` keys if it is `SSL://` (the node then dials the other nodes "
        "over TLS too). Every other listener of a broker serves the Kafka protocol for any Kafka "
        "client (docs/kafka-compatibility.md): plaintext, or TLS with the same `ssl.*` keys "
        "if `listener.security.protocol.map` maps it to `SSL`. A controller serves its first",
        readers=_BC,
        shown_default="(required; a controller's: its voter address)",
    ),
    _node(
        "advertised.listeners",
        _T.STRING,
        None,
        "`NAME://host:port,...`: the addresses registered with the controller under each "
        "listener's name, which clients and other brokers connect to (Metadata on a listener "
        "answers with that listener's address of every broker); a listener not named here "
        "advertises its `listeners` address; `0.0.0.0` and `::` are refused",
        readers=_B,
        shown_default="`listeners`",
    ),
    _node(
        "listener.security.protocol.map",
        _T.LIST,
        None,
        "`NAME:PROTOCOL,...`: each listener's security protocol (`PLAINTEXT` or `SSL`; the "
        "`SASL_*` protocols are refused: kraft has no SASL); a name not in it is its own "
        "protocol if it is one (`SSL`), else `PLAINTEXT`. A Kafka listener mapped to `SSL` "
        "serves TLS with the `ssl.*` keys, and the client certificate's principal is "
        "authorized as on gRPC",
        readers=_B,
        shown_default="PLAINTEXT:PLAINTEXT,SSL:SSL",
    ),
    _node(
        "inter.broker.listener.name",
        _T.STRING,
        None,
        "the listener other brokers replicate from, which serves kraft's gRPC (Kafka: the "
        "listener brokers talk to each other on)",
        readers=_B,
        shown_default="the first of `listeners`",
    ),
    _node(
        "queued.max.requests",
        _T.INT,
        "500",
        "requests of one Kafka connection in flight (read, not yet answered); at the bound the "
        "broker stops reading that connection (Kafka bounds its shared request queue so)",
        readers=_B,
        owner=_BROKER,
        field="queued_max_requests",
        min_value=1,
        max_value=INT_MAX,
    ),
    _node(
        "max.incremental.fetch.session.cache.slots",
        _T.INT,
        "1000",
        "incremental fetch sessions (KIP-227) this broker keeps for Kafka clients: a full fetch "
        "makes one while a slot is free, else evicts one unused for 2 minutes, or one made over "
        "2 minutes ago that is worth less (a consumer's before a follower's, fewer partitions "
        "first), else fetches without a session; 0: none, every fetch names all its partitions",
        readers=_B,
        owner=_BROKER,
        field="max_incremental_fetch_session_cache_slots",
        min_value=0,
        max_value=INT_MAX,
    ),
    # Transport security (issue 17; kraft.security.tls reads these). Kafka's PEM form
    # (KIP-651): the ``.certificate.chain``/``.key``/``.certificates`` keys hold PEM text, the
    # ``.location`` keys a PEM file's path. Each may be set per listener too
    # (``listener.name.<listener>.ssl.keystore.location``, ...), as in Kafka.
    _node(
        "ssl.keystore.type",
        _T.STRING,
        "PEM",
        "the format of this node's certificate and key (an `SSL://` listener's)",
        readers=_BC,
        per_listener=True,
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
        per_listener=True,
        shown_default="(none)",
    ),
    _node(
        "ssl.keystore.key",
        _T.STRING,
        None,
        "this node's private key as PEM text (unencrypted: `ssl.key.password` is not supported)",
        readers=_BC,
        per_listener=True,
        shown_default="(none)",
    ),
    _node(
        "ssl.keystore.location",
        _T.STRING,
        None,
        "the path of a PEM file holding the private key and the certificate chain; instead of "
        "the two keys above",
        readers=_BC,
        per_listener=True,
        shown_default="(none)",
    ),
    _node(
        "ssl.truststore.type",
        _T.STRING,
        "PEM",
        "the format of the trusted CA certificates",
        readers=_BC,
        per_listener=True,
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
        per_listener=True,
        shown_default="(none)",
    ),
    _node(
        "ssl.truststore.location",
        _T.STRING,
        None,
        "the path of a PEM file of trusted CA certificates; instead of the key above",
        readers=_BC,
        per_listener=True,
        shown_default="(none)",
    ),
    _node(
        "ssl.client.auth",
        _T.STRING,
        "none",
        "`required`: a caller without a certificate signed by a trusted CA is refused at the "
        "handshake (mTLS); `requested`: one is asked for and verified if sent, a caller "
        "without is `User:ANONYMOUS` (SSL Kafka listeners only: refused with an `SSL://` gRPC "
        "listener, whose Python server can only require one or not ask); `none`: no client "
        "certificate is asked for",
        readers=_BC,
        per_listener=True,
        choices=("required", "requested", "none"),
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
        "default for gRPC (`kraft/transport/channels.py`); a broker's Kafka listeners close a "
        "connection whose request frame is larger",
        readers=_BC,
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
        "event.loop.stall.warn.ms",
        _T.INT,
        "200",
        "a wake-up of the node's event-loop stall watch (every 50 ms) this much later than "
        "asked logs one WARN `event_loop_stalled` and counts in `kraft_event_loop_stalls_total`: "
        "something held the loop (or the CPU was not the node's) long enough to put heartbeats "
        "and Raft's fetch timeout at risk; 0 never warns (the lag histogram "
        "`kraft_event_loop_lag_seconds` is kept either way)",
        readers=_BC,
        min_value=0,
        kraft_only=True,
    ),
    _node(
        "broker.rack",
        _T.STRING,
        None,
        "the broker's rack (or zone): rack-aware replica placement, and fetch from the closest "
        "replica (KIP-392) for consumers that set `client.rack`",
        readers=_B,
        shown_default="(none)",
    ),
    _node(
        "replica.selector.class",
        _T.STRING,
        None,
        "KIP-392: which replica a partition leader tells a consumer to read from "
        "(`preferred_read_replica`); `org.apache.kafka.common.replica.RackAwareReplicaSelector` "
        "names an in-sync replica in the consumer's `client.rack`, "
        "`org.apache.kafka.common.replica.LeaderSelector` (or none) keeps every consumer on the "
        "leader",
        readers=_B,
        choices=(
            "org.apache.kafka.common.replica.LeaderSelector",
            "org.apache.kafka.common.replica.RackAwareReplicaSelector",
        ),
        shown_default="(none: the leader)",
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
        "bytes per partition in one follower fetch (a larger first batch still comes whole "
        "if it is the response's first)",
        readers=_B,
        owner=_BROKER,
        field="replica_fetch_max_bytes",
        min_value=0,
    ),
    _node(
        "replica.fetch.response.max.bytes",
        _T.INT,
        "10485760",
        "bytes of all partitions in one follower fetch response: the leader adds no records "
        "past it, except the first batch of the response's first partition with records",
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
    *GROUP_NODE_KEYS,
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


__all__ = ["NODE_REGISTRY"]
