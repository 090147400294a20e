"""Feature versions (KIP-584, KIP-778): which features this code supports, at which levels, and
the level the cluster finalized, as the metadata log records it (`FeatureLevelRecord`).

kraft has one feature beside its metadata format: ``transaction.version`` (KIP-890's part 2,
Kafka 4.0's ``TransactionVersion``):

- 0 and 1: transactions as KIP-98 built them (the client adds each partition with
  AddPartitionsToTxn, EndTxn up to v4; 1 also writes the coordinator's newer record version in
  Kafka, a difference kraft's records do not have);
- 2: the producer epoch is bumped at the end of every transaction (EndTxn v5 answers the new
  epoch), and the partitions and the group join a transaction implicitly (Produce v12,
  TxnOffsetCommit v5): a late batch of an ended transaction can never join the next one.

The active controller finalizes the configured level (``transaction.version``, default 2 as
Kafka 4.x formats a new cluster) the first time it finds the feature missing: Kafka writes it
when the storage is formatted (``kafka-storage format --feature transaction.version=N``);
kraft's log has no format step, so its first active controller does (`bootstrap_records`).
Brokers register with the supported ranges (`advertised_features`) and advertise them and the
finalized levels in ApiVersions; UpdateFeatures (``kafka-features.sh``) changes a finalized
level on a running cluster within every registered broker's range; the Java client
turns its transactions to version 2 when it sees ``transaction.version`` >= 2 finalized.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from kraft.metadata.records import BrokerFeature, FeatureLevelRecord

TRANSACTION_VERSION: Final = "transaction.version"
TRANSACTION_VERSION_2: Final = 2
"""The level where KIP-890 part 2 is on."""

SUPPORTED_FEATURES: Final[Mapping[str, tuple[int, int]]] = {TRANSACTION_VERSION: (0, 2)}
"""Feature -> (min, max) level this code runs (ApiVersions' ``supported_features``)."""


def advertised_features() -> tuple[BrokerFeature, ...]:
    """`SUPPORTED_FEATURES` as a broker registers them (KIP-584): the controller finalizes no
    level outside any registered broker's ranges (`kraft.controller.feature_control`)."""
    return tuple(
        BrokerFeature(name=name, min_supported_version=low, max_supported_version=high)
        for name, (low, high) in sorted(SUPPORTED_FEATURES.items())
    )


def bootstrap_records(
    finalized: Mapping[str, int], wanted: Mapping[str, int]
) -> list[FeatureLevelRecord]:
    """The records that finalize each ``wanted`` feature the cluster has not finalized yet (a
    finalized level, 0 included, is the cluster's choice and is kept)."""
    out = []
    for name, level in sorted(wanted.items()):
        low, high = SUPPORTED_FEATURES[name]
        assert low <= level <= high, (name, level)
        if name not in finalized:
            out.append(FeatureLevelRecord(name=name, feature_level=level))
    return out


def finalized_level(finalized: Mapping[str, int], name: str) -> int:
    """The finalized level of ``name`` (0 when never finalized, as Kafka reads it)."""
    return finalized.get(name, 0)


__all__ = [
    "SUPPORTED_FEATURES",
    "TRANSACTION_VERSION",
    "TRANSACTION_VERSION_2",
    "advertised_features",
    "bootstrap_records",
    "finalized_level",
]
