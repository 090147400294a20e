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

Nothing here is imported by the pure core (`tests/test_contract.py` holds it).
"""

from kraft.raft.shell.clock import clock_ms
from kraft.raft.shell.describe import QuorumStatus, VoterStatus
from kraft.raft.shell.driver import RaftDriver
from kraft.raft.shell.grpc_transport import CHANNEL_OPTIONS, GrpcRaftTransport
from kraft.raft.shell.proposals import Proposals
from kraft.raft.shell.server import SERVER_OPTIONS, RaftServer
from kraft.raft.shell.state_machine import (
    Applier,
    BatchStateMachine,
    NullStateMachine,
    StateMachine,
)
from kraft.raft.shell.storage import DriverStorage
from kraft.raft.shell.store import DurableRaftStorage
from kraft.raft.shell.transport import (
    METADATA_GROUP,
    Inbox,
    InMemoryNetwork,
    InMemoryTransport,
    Transport,
)

__all__ = [
    "CHANNEL_OPTIONS",
    "METADATA_GROUP",
    "SERVER_OPTIONS",
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
