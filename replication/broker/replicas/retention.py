"""Log retention on the broker: each replica's log config, and the periodic cleanup task.

Theory of operation (Kafka's ``LogManager.cleanupLogs``)
--------------------------------------------------------
*Config.* A partition's `LogConfig` is resolved per key, first match wins, as Kafka does:
the topic's own config (``retention.ms``, ``retention.bytes``, ``segment.bytes``,
``segment.ms``, ... from the metadata image), then the cluster-wide dynamic broker default
(``log.retention.ms`` ... set through the controller), then this broker's static properties
(`replication.broker.config.BROKER_LOG_KEYS`: ``log.retention.ms``, ``log.retention.bytes``,
``log.segment.bytes``, ``log.roll.ms``), then `LogConfig`'s defaults. The controller rejects
values the log cannot take (it validates with the same rules); one that got into the metadata
anyway (written before that check) is skipped with a warning, not the whole config. The
broker applies a changed config to open logs live (`replication.broker.replicas.topic_settings`).

*Cleanup.* Every ``log.retention.check.interval.ms`` (Kafka's default 300000) the broker calls
`PartitionReplica.apply_retention` on each replica, leader or follower, yielding the event
loop between slices of replicas (`retention_pass`, `replication.broker.loop_slice`), so a broker
of thousands of replicas keeps serving fetches and produces through the pass: it deletes whole
segments from the front by ``retention.ms`` (the segment's newest record timestamp is older)
and then by ``retention.bytes`` (while the log stays at least that large without it), never
the active segment and never a segment holding an offset at or above the replica's high
watermark (Kafka: the log start offset must not pass the high watermark). The log start
offset moves to the first remaining segment; followers also adopt the leader's log start
offset from fetch responses. Consumers fetching below it get OFFSET_OUT_OF_RANGE.

*Producer ids.* Every ``producer.id.expiration.check.interval.ms`` (10 minutes) each replica
forgets the idempotent producers whose last batch there is ``producer.id.expiration.ms`` (1 day)
old, unless their transaction is open there (KIP-854; Kafka's ``removeExpiredProducers``), so a
broker whose clients come and go does not keep their last batches forever.

*Compaction.* Every ``log.cleaner.backoff.ms`` (Kafka's default 15000) the broker's
`replication.broker.replicas.cleaner.LogCleaner` runs one log-cleaner pass on each replica whose
``cleanup.policy`` includes ``compact``, leader or follower (each replica cleans its own log,
as in Kafka), below the replica's high watermark, in worker threads. `apply_compaction` here
is the same pass on the caller's thread (`PartitionReplica.apply_compaction`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping

import structlog

from replication.broker.config import BROKER_LOG_KEYS
from replication.broker.loop_slice import sum_in_slices
from replication.broker.replicas.partition import PartitionReplica
from storage.config import PROPERTY_KEYS, LogConfig
from storage.errors import KraftError

_log = structlog.get_logger("replication.broker.replicas.retention")


def topic_keys_of_dynamic_broker_defaults(configs: Mapping[str, str]) -> dict[str, str]:
    """The cluster-wide dynamic broker defaults (``log.retention.ms``, ...) that are log
    settings, under their topic keys."""
    return {BROKER_LOG_KEYS[k]: v for k, v in configs.items() if k in BROKER_LOG_KEYS}


def resolve_log_config(
    *layers: Mapping[str, str], base: LogConfig | None = None, context: str = ""
) -> LogConfig:
    """`LogConfig` from topic-keyed layers, lowest precedence first (later layers win).

    Keys `LogConfig` does not know are ignored; a value it rejects is skipped (logged).
    """
    config = base if base is not None else LogConfig()
    merged: dict[str, str] = {}
    for layer in layers:
        merged.update({k: v for k, v in layer.items() if k in PROPERTY_KEYS})
    for key, value in sorted(merged.items()):
        try:
            config = LogConfig.from_properties({key: value}, base=config)
        except KraftError as e:
            _log.warning("log_config_ignored", key=key, value=value, error=e.message, at=context)
    return config


def retain(replica: PartitionReplica, now_ms: int) -> int:
    """`PartitionReplica.apply_retention` on one replica; the segments deleted. A failing replica
    is logged and counts 0, so one bad disk does not stop the others."""
    try:
        return replica.apply_retention(now_ms)
    except (KraftError, OSError) as e:
        _log.error("retention_failed", topic_partition=str(replica.topic_partition), error=repr(e))
        return 0


async def retention_pass(replicas: Iterable[PartitionReplica], now_ms: int) -> int:
    """One cleanup pass that yields the event loop between slices of replicas
    (`replication.broker.loop_slice`); the number of segments deleted."""
    return await sum_in_slices(replicas, lambda r: retain(r, now_ms))


def apply_compaction(replicas: Iterable[PartitionReplica], now_ms: int) -> int:
    """One log-cleaner pass over the compacted replicas; the records removed. A failing replica
    is logged and skipped."""
    removed = 0
    for replica in replicas:
        try:
            removed += replica.apply_compaction(now_ms)
        except (KraftError, OSError) as e:
            _log.error(
                "compaction_failed", topic_partition=str(replica.topic_partition), error=repr(e)
            )
    return removed


async def expiration_pass(
    replicas: Iterable[PartitionReplica], now_ms: int, expiration_ms: int
) -> int:
    """Each replica forgets the producer ids it has not heard from for ``expiration_ms``
    (`ProducerStateManager.remove_expired`, KIP-854), yielding the event loop between slices
    of replicas; the number forgotten."""
    return await sum_in_slices(
        replicas, lambda r: r.producer_state.remove_expired(now_ms, expiration_ms)
    )


async def run_every(interval_ms: int, step: Callable[[], Awaitable[object]]) -> None:
    """Run the pass ``step()`` every ``interval_ms`` (from the end of one to the start of the
    next) until cancelled (retention, producer expiration)."""
    while True:
        await asyncio.sleep(interval_ms / 1000)
        await step()


__all__ = [
    "apply_compaction",
    "expiration_pass",
    "resolve_log_config",
    "retain",
    "retention_pass",
    "run_every",
    "topic_keys_of_dynamic_broker_defaults",
]
