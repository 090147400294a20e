"""`ReplicationConfig`: the ISR-replication settings of one partition, under Kafka's keys.

This module is the one place that converts the dotted keys (``min.insync.replicas``,
``replica.lag.time.max.ms``, ...) to snake_case fields. ``min.insync.replicas`` is a topic
config in Kafka; the broker shell resolves topic overrides and passes the effective values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import final

from storage.config import int_fields_from_properties
from storage.config_registry import node_property_fields
from storage.errors import InvalidConfigError

_KEYS = node_property_fields("ReplicationConfig")
"""Key -> field, from the config registry (defaults and docs there)."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicationConfig:
    """ISR replication settings. All times are milliseconds of the shell's clock."""

    min_insync_replicas: int = 1
    """``min.insync.replicas``: acks=all produces need at least this many ISR members, and the
    high watermark does not advance below it (KIP-966). The effective value is capped at the
    replication factor, as Kafka's ``Partition.effectiveMinIsr`` does; only a broker or
    cluster-wide default can reach the cap, since the controller refuses a topic's own value
    above its replication factor."""
    replica_lag_time_ms_max: int = 30_000
    """``replica.lag.time.max.ms``: an ISR follower not caught up for longer is shrunk out."""
    replica_fetch_backoff_ms: int = 1_000
    """``replica.fetch.backoff.ms``: a follower waits this long after a failed fetch."""
    alter_partition_retry_backoff_ms: int = 100
    """Wait before re-sending an AlterPartition that failed with a retriable error."""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InvalidConfigError(f"{field.name} must be a non-negative int, got {value!r}")
        if self.min_insync_replicas < 1:
            raise InvalidConfigError("min.insync.replicas must be at least 1")
        if self.replica_lag_time_ms_max <= 0:
            raise InvalidConfigError("replica.lag.time.max.ms must be positive")

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> ReplicationConfig:
        """Build a config from Kafka-style properties; unknown keys are ignored.

        Raises:
            InvalidConfigError: a value is not a non-negative integer or breaks a constraint.
        """
        return cls(**int_fields_from_properties(properties, _KEYS))

    def to_properties(self) -> dict[str, str]:
        """The config as Kafka-style properties (the inverse of `from_properties`)."""
        return {key: str(getattr(self, name)) for key, name in _KEYS.items()}


__all__ = ["ReplicationConfig"]
