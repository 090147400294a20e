"""The Raft shell: the pure `RaftNode` run on real time, disks and networks.

Three seams, each its own module:

- `RaftDriver` (``driver.py``) runs one Raft group's node through the Ready loop (the
  `kraft.raft.Ready` contract: early messages, persist and sync, send, apply, advance), keeps
  the proposals' futures (`Proposals`), the state machine and its snapshots (`Applier`,
  `Snapshots`), the leader listeners and the DescribeQuorum view. It reads time from a clock
  function and talks only to a `Transport`.
- A `Transport` (``transport.py``) carries the messages of many Raft groups: a driver
  registers its group and sends under its name, and the transport delivers each inbound
  message to the driver of its group. `GrpcRaftTransport` multiplexes every group over one
  gRPC stream per peer pair (``RaftEnvelope.group``; the metadata quorum is the group
  `METADATA_GROUP`, empty on the wire); `InMemoryNetwork` connects drivers in one event loop,
  for tests.
- `RaftServer` (``server.py``) composes a driver, `DurableRaftStorage` (``store.py``), a gRPC
  transport and health into one replica, the asyncio API (`kraft.AsyncReplicatedLog`);
  `ReplicatedLog` runs one on a thread of its own.

It sits beside the core, not in it: `kraft.raft` never imports it (the contract test's
no-cycle rule holds that, since this package imports `kraft.raft`).
"""

from kraft.raft_shell.clock import clock_ms
from kraft.raft_shell.describe import QuorumStatus, VoterStatus
from kraft.raft_shell.driver import RaftDriver
from kraft.raft_shell.grpc_transport import GrpcRaftTransport
from kraft.raft_shell.proposals import Proposals
from kraft.raft_shell.server import RaftServer
from kraft.raft_shell.state_machine import (
    Applier,
    BatchStateMachine,
    NullStateMachine,
    StateMachine,
)
from kraft.raft_shell.storage import DriverStorage
from kraft.raft_shell.store import DurableRaftStorage
from kraft.raft_shell.transport import (
    METADATA_GROUP,
    Inbox,
    InMemoryNetwork,
    InMemoryTransport,
    Transport,
)

__all__ = [
    "METADATA_GROUP",
    "Applier",
    "BatchStateMachine",
    "DriverStorage",
    "DurableRaftStorage",
    "GrpcRaftTransport",
    "InMemoryNetwork",
    "InMemoryTransport",
    "Inbox",
    "NullStateMachine",
    "Proposals",
    "QuorumStatus",
    "RaftDriver",
    "RaftServer",
    "StateMachine",
    "Transport",
    "VoterStatus",
    "clock_ms",
]
