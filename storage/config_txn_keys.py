"""The broker keys of transactions (KIP-98) in the config registry (`storage.config_registry`):
the transaction coordinators' internal topic and their timeouts, with Kafka's names and defaults.
(Kept out of `storage.config_node_keys`, which is at its size limit.)"""

from __future__ import annotations

from typing import Final

from storage.config_key import INT_MAX, ConfigKey, ConfigType, Reader, Scope

_B = frozenset({Reader.BROKER})
_BROKER = "BrokerNodeConfig"


def _key(name: str, type_: ConfigType, default: str, doc: str, field: str) -> ConfigKey:
    return ConfigKey(
        name=name,
        scope=Scope.NODE,
        type=type_,
        default=default,
        readers=_B,
        doc=doc,
        min_value=1,
        max_value=INT_MAX,
        owner=_BROKER,
        field=field,
    )


TXN_NODE_KEYS: Final[tuple[ConfigKey, ...]] = (
    _key(
        "transaction.state.log.num.partitions",
        ConfigType.INT,
        "50",
        "partitions of `__transaction_state`, created on the first FindCoordinator for a "
        "transactional id (an id lives on partition `abs(hashCode(transactional.id)) % this`)",
        "transaction_state_log_num_partitions",
    ),
    _key(
        "transaction.state.log.replication.factor",
        ConfigType.INT,
        "3",
        "replication factor of `__transaction_state` (capped at the number of live brokers)",
        "transaction_state_log_replication_factor",
    ),
    _key(
        "transaction.state.log.min.isr",
        ConfigType.INT,
        "2",
        "`min.insync.replicas` of `__transaction_state` (capped at its replication factor)",
        "transaction_state_log_min_isr",
    ),
    _key(
        "transaction.max.timeout.ms",
        ConfigType.INT,
        "900000",
        "the longest `transaction.timeout.ms` a producer may ask for (InitProducerId answers "
        "INVALID_TRANSACTION_TIMEOUT above it)",
        "transaction_max_timeout_ms",
    ),
    ConfigKey(
        name="transaction.partition.verification.enable",
        scope=Scope.NODE,
        type=ConfigType.BOOLEAN,
        default="true",
        readers=_B,
        doc="KIP-890 part 1: a partition leader asks the transaction coordinator whether a "
        "transactional batch's partition was added to the producer's ongoing transaction before "
        "the batch opens a transaction there, and refuses it otherwise (no hanging transaction); "
        "a group coordinator asks the same of a TxnOffsetCommit's offsets partition before its "
        "offsets are written (no offsets pending for ever)",
        owner=_BROKER,
        field="transaction_partition_verification_enable",
    ),
    _key(
        "add.partitions.to.txn.retry.backoff.ms",
        ConfigType.INT,
        "20",
        "KIP-890 part 2 (KAFKA-18654): how long a partition leader waits before it asks the "
        "transaction coordinator again to add a transaction-version-2 client's partition that "
        "it answered CONCURRENT_TRANSACTIONS (the previous transaction's markers still going "
        "out)",
        "add_partitions_to_txn_retry_backoff_ms",
    ),
    ConfigKey(
        name="add.partitions.to.txn.retry.backoff.max.ms",
        scope=Scope.NODE,
        type=ConfigType.INT,
        default="100",
        readers=_B,
        doc="how long in all a partition leader keeps asking again (see "
        "`add.partitions.to.txn.retry.backoff.ms`) before the Produce gets NOT_ENOUGH_REPLICAS "
        "and the client retries it; 0: never again",
        min_value=0,
        max_value=INT_MAX,
        owner=_BROKER,
        field="add_partitions_to_txn_retry_backoff_max_ms",
    ),
    ConfigKey(
        name="transaction.version",
        scope=Scope.NODE,
        type=ConfigType.INT,
        default="2",
        readers=frozenset({Reader.CONTROLLER}),
        doc="the level of the `transaction.version` feature the active controller finalizes "
        "when the cluster has none yet (Kafka: `kafka-storage format --feature "
        "transaction.version=N`); 2 turns on KIP-890 part 2 (the epoch bumped at every "
        "transaction's end, partitions added implicitly) for the clients that support it",
        min_value=0,
        max_value=2,
        owner="ControllerConfig",
        field="transaction_version",
    ),
    _key(
        "transactional.id.expiration.ms",
        ConfigType.INT,
        "604800000",
        "a transactional id with no transaction in flight that has not been used this long "
        "is deleted",
        "transactional_id_expiration_ms",
    ),
    _key(
        "producer.id.expiration.ms",
        ConfigType.INT,
        "86400000",
        "a producer id none of whose batches a partition took for this long, with no "
        "transaction open there, is forgotten by that partition (KIP-854): a later batch of it "
        "starts a new sequence",
        "producer_id_expiration_ms",
    ),
    _key(
        "producer.id.expiration.check.interval.ms",
        ConfigType.INT,
        "600000",
        "how often each replica forgets its expired producer ids (`producer.id.expiration.ms`)",
        "producer_id_expiration_check_interval_ms",
    ),
)
"""Every transaction key a broker reads, and the controller's ``transaction.version``."""

__all__ = ["TXN_NODE_KEYS"]
