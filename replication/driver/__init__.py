"""Partition drivers: the one home of the glue between a partition's core and its log.

A shell (the broker's `PartitionReplica`, the simulator's `SimBroker`, the replication
test harness) opens one driver per replica with `open_partition_driver` and then only
feeds it inputs and carries out its `DriverEvents`::

    driver = open_partition_driver(ReplicationMode.ISR, log=..., snapshots=...,
                                   checkpoint=..., events=shell, ...)
    driver.apply_registration(registration, brokers, config, now_ms)   # metadata changed
    driver.produce(request_id, acks, timeout_ms, records, now_ms)      # -> produce_completed
    answer = driver.handle_follower_fetch(fetch, now_ms)               # then driver.read(...)
    request = driver.build_fetch_request(now_ms)                       # send it; later:
    driver.handle_fetch_response(generation, response, now_ms)
    driver.tick(now_ms)          # when driver.next_deadline_ms() (absolute) comes; ask again
    driver.checkpoint_high_watermark()                                 # after every input

The driver applies each core's Ready in its documented order (``replication.core``), so the
Ready contract is implemented once, and what ``kraft sim cluster`` checks is the wiring the
broker runs. ``tests/test_contract.py`` fails if the glue appears anywhere else.
"""

from replication.driver.interface import (
    DriverEvents,
    HighWatermarkCheckpoint,
    NoDriverEvents,
    PartitionDriver,
    ProducerSnapshots,
    QuorumStateStore,
    ReplicaLog,
    quorum_group,
)
from replication.driver.isr import IsrPartitionDriver
from replication.driver.producer_state_load import (
    MemoryCheckpoint,
    MemorySnapshotStore,
    ProducerStateLoad,
    load_producer_state,
    scan_headers,
)
from replication.driver.quorum import QuorumPartitionDriver
from replication.driver.quorum_log import MemoryQuorumStateStore, ReplicaRaftStorage
from replication.driver.select import (
    ReplicationMode,
    isr_leader,
    open_partition_driver,
    raft_leader,
)

__all__ = [
    "DriverEvents",
    "HighWatermarkCheckpoint",
    "IsrPartitionDriver",
    "MemoryCheckpoint",
    "MemoryQuorumStateStore",
    "MemorySnapshotStore",
    "NoDriverEvents",
    "PartitionDriver",
    "ProducerSnapshots",
    "ProducerStateLoad",
    "QuorumPartitionDriver",
    "QuorumStateStore",
    "ReplicaLog",
    "ReplicaRaftStorage",
    "ReplicationMode",
    "isr_leader",
    "load_producer_state",
    "open_partition_driver",
    "quorum_group",
    "raft_leader",
    "scan_headers",
]
