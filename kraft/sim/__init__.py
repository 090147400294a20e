"""The deterministic simulator (after Kafka's RaftEventSimulationTest and TigerBeetle's VOPR).

One seed drives everything: a `Scheduler` of timed events over a `SimClock`, a `SimNetwork`
that delays, drops, duplicates, reorders and partitions messages (filters `DropAll`,
`DropOutboundTo`), a `SimDisk` per node that loses unsynced writes on a crash, node crashes,
restarts, pauses and wipes, a workload and a nemesis. `RaftChecker` checks the safety
invariants after every event; a failing seed replays exactly::

    kraft sim raft --seeds 500 --start 0          # a range of seeds
    kraft sim raft --seed 0x1a2b --voters 5 --observers 1 --verbose

From Python: ``run_seed(seed, voters=5)`` returns a `SeedResult`; ``run_seeds(start, count)``
a `Summary`; ``cli_raft(argv)`` is the command line.
"""

from kraft.sim.checker import InvariantViolated, RaftChecker
from kraft.sim.cluster import SimCluster, SimNode
from kraft.sim.disk import SimDisk
from kraft.sim.faults import Nemesis, Workload
from kraft.sim.network import DropAll, DropOutboundTo, LinkProfile, NetworkFilter, SimNetwork
from kraft.sim.raft_sim import SeedResult, Summary, cli_raft, replay_command, run_seed, run_seeds
from kraft.sim.scheduler import MAX_EVENTS, Scheduler, SimClock

__all__ = [
    "MAX_EVENTS",
    "DropAll",
    "DropOutboundTo",
    "InvariantViolated",
    "LinkProfile",
    "Nemesis",
    "NetworkFilter",
    "RaftChecker",
    "Scheduler",
    "SeedResult",
    "SimClock",
    "SimCluster",
    "SimDisk",
    "SimNetwork",
    "SimNode",
    "Summary",
    "Workload",
    "cli_raft",
    "replay_command",
    "run_seed",
    "run_seeds",
]
