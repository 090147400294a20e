"""kraft: a Kafka-style replicated log in Python (Raft controllers, ISR brokers, clients).

The names below are imported on first use, so ``import kraft`` stays cheap::

    from kraft import ReplicatedLog, AsyncReplicatedLog, TopicPartition, LocalCluster
    from kraft import AdminClient, Producer, Consumer
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ReplicatedLog": "kraft.replicated_log",
    "AsyncReplicatedLog": "kraft.replicated_log",
    "StateMachine": "kraft.raft_server",
    "TopicPartition": "kraft.types",
    "KraftError": "storage.errors",
    "ErrorCode": "storage.errors",
    "NotControllerError": "storage.errors",
    "LocalCluster": "kraft.cluster",
    # NB: the clients live in `replication` (they speak the broker protocol); the facade
    # names them lazily, like the CLI, so `kraft` itself never imports `replication`.
    "AdminClient": "replication.clients",
    "Producer": "replication.clients",
    "Consumer": "replication.clients",
    "ConsumerRecord": "replication.clients",
    "RecordMetadata": "replication.clients",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kraft' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
