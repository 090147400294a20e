"""Producer and consumer settings: Kafka's config keys, snake_case in Python.

Every option may be given by its Python name or by its Kafka key; this module is the one place
that converts between them (STYLE §4)::

    Producer("h:9092", linger_ms=5, batch_size=32768)
    Producer("h:9092", **{"linger.ms": 5, "batch.size": 32768})

`parse_bootstrap_servers` (re-exported from `kraft.transport.channels`, its home) checks
``bootstrap.servers`` the way Kafka's ``ClientUtils`` does, before any connection is tried.

Defaults are Kafka's unless noted. Unknown keys raise `ValueError` (a typo must not pass
silently), as do combinations Kafka rejects (``enable.idempotence`` with ``acks`` other than
``all``, or with more than 5 requests in flight).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from kraft.security.tls import TlsConfig, client_tls
from kraft.transport.channels import parse_bootstrap_servers
from storage.compression import CODEC_NAMES, Compression

_COMPRESSION = CODEC_NAMES


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientSecurity:
    """Transport security of a client, kafka-python's names (Kafka's ``security.protocol``
    and PEM files). ``SSL`` with a certificate and key is mTLS (`kraft.security.tls`)."""

    security_protocol: str = "PLAINTEXT"
    """[security.protocol] PLAINTEXT or SSL."""
    ssl_cafile: str = ""
    """[ssl.cafile] PEM file of the CA(s) that signed the brokers' certificates ("": the
    system's roots)."""
    ssl_certfile: str = ""
    """[ssl.certfile] PEM file of this client's certificate chain (mTLS)."""
    ssl_keyfile: str = ""
    """[ssl.keyfile] PEM file of its private key (unencrypted)."""

    def tls(self) -> TlsConfig | None:
        """The settings as a `TlsConfig` (None: plaintext); reads the files.

        Raises:
            InvalidConfigError: a bad protocol, a missing or unreadable file.
        """
        return client_tls(
            self.security_protocol,
            self.ssl_cafile or None,
            self.ssl_certfile or None,
            self.ssl_keyfile or None,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerConfig(ClientSecurity):
    """Producer settings (Kafka key in brackets)."""

    acks: int = -1
    """[acks] 0, 1 or -1 ("all"): how many replicas must have a batch before it succeeds."""
    enable_idempotence: bool = True
    """[enable.idempotence] KIP-98: producer id, epoch and sequences; no duplicates on retry."""
    linger_ms: int = 5
    """[linger.ms] how long a partition's batch may wait for more records (Kafka 3.9+: 5)."""
    batch_size: int = 16384
    """[batch.size] the records-section bytes a batch may hold before it is sent."""
    delivery_timeout_ms: int = 120_000
    """[delivery.timeout.ms] the upper bound from send() to success or failure, retries
    included."""
    request_timeout_ms: int = 30_000
    """[request.timeout.ms] how long one Produce may wait for its response (sooner, a stalled
    one is abandoned when metadata names a new leader: see ``retry.backoff.max.ms``)."""
    retry_backoff_ms: int = 100
    """[retry.backoff.ms] the first backoff before a retry (doubling, KIP-580)."""
    retry_backoff_max_ms: int = 1000
    """[retry.backoff.max.ms] the backoff's ceiling; also how long a Produce may go
    unanswered before the producer treats its broker as stalled and refreshes metadata (a
    new leader then gets its batches at once)."""
    max_in_flight_requests_per_connection: int = 5
    """[max.in.flight.requests.per.connection] Produce requests outstanding per broker; also
    the batches in flight per partition (<= 5 with idempotence, KIP-98)."""
    max_request_size: int = 1 << 20
    """[max.request.size] the bytes of batches one Produce may carry."""
    max_block_ms: int = 60_000
    """[max.block.ms] how long send() may block waiting for a topic's metadata."""
    metadata_max_age_ms: int = 300_000
    """[metadata.max.age.ms] refresh metadata at least this often."""
    compression_type: str = "none"
    """[compression.type] none, gzip, snappy, lz4 or zstd (Kafka's codecs)."""
    client_id: str = ""
    """[client.id]"""
    transactional_id: str = ""
    """[transactional.id] KIP-98: "" for none; set, the producer is transactional
    (`replication.clients.transactions`) and needs idempotence."""
    transaction_timeout_ms: int = 60_000
    """[transaction.timeout.ms] how long the coordinator lets a transaction run before it
    aborts it (at most the broker's ``transaction.max.timeout.ms``)."""

    @classmethod
    def create(cls, options: Mapping[str, Any]) -> Self:
        """Settings from keyword arguments or Kafka keys; ``acks="all"`` means -1.

        Raises:
            ValueError: an unknown key, a bad value or a combination Kafka rejects.
        """
        values = _normalise(cls, options)
        acks = values.get("acks", -1)
        values["acks"] = -1 if str(acks).lower() in ("all", "-1") else int(acks)
        config = cls(**values)
        config._validate()
        return config

    @property
    def compression(self) -> Compression:
        return _COMPRESSION[self.compression_type]

    def _validate(self) -> None:
        if self.acks not in (-1, 0, 1):
            raise ValueError(f"acks must be 0, 1 or all, not {self.acks}")
        if self.compression_type not in _COMPRESSION:
            raise ValueError(f"compression.type must be one of {sorted(_COMPRESSION)}")
        if self.batch_size <= 0 or self.linger_ms < 0 or self.delivery_timeout_ms <= 0:
            raise ValueError("batch.size and delivery.timeout.ms must be > 0, linger.ms >= 0")
        if self.max_in_flight_requests_per_connection < 1:
            raise ValueError("max.in.flight.requests.per.connection must be >= 1")
        if self.enable_idempotence:
            # Kafka's ProducerConfig: idempotence needs acks=all and at most 5 in flight.
            if self.acks != -1:
                raise ValueError("enable.idempotence requires acks=all")
            if self.max_in_flight_requests_per_connection > 5:
                raise ValueError("enable.idempotence requires max.in.flight <= 5")
        elif self.transactional_id:
            raise ValueError("transactional.id requires enable.idempotence")
        if self.transaction_timeout_ms <= 0:
            raise ValueError("transaction.timeout.ms must be > 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerConfig(ClientSecurity):
    """Consumer settings (Kafka key in brackets)."""

    auto_offset_reset: str = "latest"
    """[auto.offset.reset] earliest, latest or none: where to start without a valid position."""
    fetch_max_wait_ms: int = 500
    """[fetch.max.wait.ms] how long a broker may hold a Fetch waiting for fetch.min.bytes."""
    fetch_min_bytes: int = 1
    """[fetch.min.bytes]"""
    fetch_max_bytes: int = 50 << 20
    """[fetch.max.bytes] the bytes one Fetch response may carry."""
    max_partition_fetch_bytes: int = 1 << 20
    """[max.partition.fetch.bytes] per partition (a first batch larger than it still comes,
    KIP-74)."""
    max_poll_records: int = 500
    """[max.poll.records] records one poll() returns at most."""
    isolation_level: str = "read_uncommitted"
    """[isolation.level] read_uncommitted or read_committed."""
    request_timeout_ms: int = 30_000
    """[request.timeout.ms]"""
    retry_backoff_ms: int = 100
    """[retry.backoff.ms]"""
    retry_backoff_max_ms: int = 1000
    """[retry.backoff.max.ms] also how long a Fetch may outlive its ``fetch.max.wait.ms``
    before the consumer abandons it and looks for a new leader (a paused broker)."""
    metadata_max_age_ms: int = 300_000
    """[metadata.max.age.ms]"""
    default_api_timeout_ms: int = 60_000
    """[default.api.timeout.ms] the bound of blocking calls such as position()."""
    client_rack: str = ""
    """[client.rack] KIP-392."""
    client_id: str = ""
    """[client.id]"""
    check_crcs: bool = True
    """[check.crcs] check each fetched batch's CRC-32C (a corrupt batch is raised for its
    partition, with its offset)."""
    group_id: str = ""
    """[group.id] the consumer group of ``subscribe`` and of committed offsets ("": none)."""
    enable_auto_commit: bool = True
    """[enable.auto.commit] commit the positions every ``auto.commit.interval.ms`` from
    ``poll``, before a revocation and on ``close``."""
    auto_commit_interval_ms: int = 5_000
    """[auto.commit.interval.ms]"""
    session_timeout_ms: int = 45_000
    """[session.timeout.ms] accepted for compatibility: with the consumer protocol (KIP-848)
    the broker's ``group.consumer.session.timeout.ms`` decides."""
    heartbeat_interval_ms: int = 5_000
    """[heartbeat.interval.ms] used until the coordinator gives its own
    (``group.consumer.heartbeat.interval.ms``)."""
    max_poll_interval_ms: int = 300_000
    """[max.poll.interval.ms] a member that does not poll for this long leaves the group (its
    partitions go to others); it is also the member's rebalance timeout."""
    group_remote_assignor: str = ""
    """[group.remote.assignor] ``uniform`` or ``range``; "": the group's default."""

    @classmethod
    def create(cls, options: Mapping[str, Any]) -> Self:
        """Settings from keyword arguments or Kafka keys.

        Raises:
            ValueError: an unknown key or a bad value.
        """
        config = cls(**_normalise(cls, options))
        if config.auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError("auto.offset.reset must be earliest, latest or none")
        if config.isolation_level not in ("read_uncommitted", "read_committed"):
            raise ValueError("isolation.level must be read_uncommitted or read_committed")
        if config.group_remote_assignor not in ("", "uniform", "range"):
            raise ValueError("group.remote.assignor must be uniform or range")
        return config


def _normalise(cls: type[Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """Kafka keys -> field names, values cast to the field's type."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    out: dict[str, Any] = {}
    for key, value in options.items():
        if value is None:
            continue  # None: the default (group_id=None, group_remote_assignor=None)
        name = key.replace(".", "_").replace("-", "_")
        field = fields.get(name)
        if field is None:
            raise ValueError(f"unknown {cls.__name__} option {key!r}")
        if field.type in ("int", int) and name != "acks":
            value = int(value)
        elif field.type in ("bool", bool) and isinstance(value, str):
            value = value.strip().lower() in ("true", "1", "yes")
        out[name] = value
    return out


__all__ = ["ClientSecurity", "ConsumerConfig", "ProducerConfig", "parse_bootstrap_servers"]
