"""The broker: the I/O shell around the ISR replication cores (``replication.core``).

A broker process (``kraft broker``) is a `BrokerServer`:

- a metadata *observer* (`kraft.raft_shell.RaftServer` with a non-voter id) fetches the
  committed metadata log from the controllers and folds it into a `MetadataImage`;
- it registers with the active controller and heartbeats (KIP-631); SIGTERM is a controlled
  shutdown;
- for every partition it replicates, a `PartitionReplica` opens the `SegmentedLog` and hands
  it to the partition driver the topic's replication mode picks (`replication.driver`, which
  runs the core loop of ``replication.core``'s docstring: a `PartitionLeader` answers
  produces and follower fetches, a `PartitionFollower` long-polls the leader with
  ``Broker.Fetch``, one request per leader broker for all its partitions, `LeaderFetcher`);
- one gRPC port serves ``Broker`` (Produce, Fetch, ListOffsets, Metadata, InitProducerId),
  ``Controller`` (forwarded to the active controller) and health.

Usage::

    config = BrokerNodeConfig.from_properties(load_properties("broker-101.properties"))
    run_broker(config)            # until SIGTERM: controlled shutdown, exit code 0
"""

from replication.broker.config import BrokerNodeConfig
from replication.broker.process import run_broker, serve
from replication.broker.replicas.fetcher import LeaderFetcher
from replication.broker.replicas.partition import PartitionReplica
from replication.broker.server import BrokerServer

__all__ = [
    "BrokerNodeConfig",
    "BrokerServer",
    "LeaderFetcher",
    "PartitionReplica",
    "run_broker",
    "serve",
]
