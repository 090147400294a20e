"""The broker simulation: a controller quorum, brokers and clients on the `kraft.sim` harness.

The same pure cores as the real cluster (`kraft.raft.RaftNode` for the 3 controllers and for
the brokers' metadata observers, `kraft.controller.ControllerCore`,
`replication.core.PartitionLeader` / `PartitionFollower`) run inside the deterministic
simulator, under one seed: a network that delays, drops, duplicates, reorders and partitions;
controller disks that lose unsynced writes and broker logs that lose their unflushed tail on
power loss; crashes, restarts and pauses of controllers and brokers. `ClusterChecker` checks
the ISR-replication and consumer invariants as the state changes, `kraft.sim.RaftChecker` the
Raft ones on the metadata log; a failing seed replays exactly::

    kraft sim cluster --seeds 500 --start 0          # a range of seeds
    kraft sim cluster --seed 0x2a --partitions 3     # one seed, with its numbers

From Python: ``run_seed(seed)`` returns a `ClusterSeedResult`; ``run_seeds(start, count)`` a
`ClusterSummary`; ``cli_cluster(argv)`` is the command line.
"""

from replication.sim.broker import SimBroker
from replication.sim.checker import ClusterChecker
from replication.sim.cluster import BrokerCluster
from replication.sim.controller import ClusterConfig, ControllerRouter, SimController
from replication.sim.run import (
    ClusterSeedResult,
    ClusterSummary,
    cli_cluster,
    replay_command,
    run_seed,
    run_seeds,
)
from replication.sim.workload import Nemesis, Producer

__all__ = [
    "BrokerCluster",
    "ClusterChecker",
    "ClusterConfig",
    "ClusterSeedResult",
    "ClusterSummary",
    "ControllerRouter",
    "Nemesis",
    "Producer",
    "SimBroker",
    "SimController",
    "cli_cluster",
    "replay_command",
    "run_seed",
    "run_seeds",
]
