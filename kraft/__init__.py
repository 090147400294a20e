"""kraft: a Kafka-style replicated log in Python (Raft controllers, ISR brokers, clients).

The names below are imported on first use, so ``import kraft`` stays cheap::

    from kraft import ReplicatedLog, AsyncReplicatedLog, TopicPartition, LocalCluster
    from kraft import AdminClient, Producer, Consumer
"""

from __future__ import annotations

import importlib
import os
from typing import Any

# NB: gRPC's fork handlers (grpcio >= 1.81, grpc/grpc#43055) restart their epoll poller in a
# child forked by `subprocess.Popen(preexec_fn=...)`, which then dies with EBADF before it can
# exec: pyspark starts its JVM exactly so, and about 1 start in 40 failed with
# JAVA_GATEWAY_EXITED in a process holding live channels. kraft never forks without exec'ing,
# so it needs no fork support. gRPC reads the variable once, when it is first imported: this
# package is imported before any kraft module imports grpc.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

# NB: gRPC's C core writes INFO lines to stderr by default (a failed TLS handshake, ...): a
# library writes nothing its program did not ask for, so keep it to its errors unless the
# program chose a verbosity. Read once, like the variable above. The CLI silences it fully.
GRPC_VERBOSITY_DEFAULTED = "GRPC_VERBOSITY" not in os.environ
"""Whether kraft chose ``GRPC_VERBOSITY`` (the program did not)."""
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

_EXPORTS = {
    "ReplicatedLog": "kraft.raft_shell.replicated_log",
    "AsyncReplicatedLog": "kraft.raft_shell.replicated_log",
    "StateMachine": "kraft.raft_shell.state_machine",
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
