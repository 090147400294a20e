"""The Raft core of kraft: KIP-595 Raft (Kafka's KRaft) as a pure state machine.

`RaftNode` does no I/O, reads no clock and draws randomness only from the ``random.Random``
it is given. A shell (`kraft.raft_shell.RaftDriver` over a transport, the simulator in
``kraft.sim``) runs it in this loop::

    node = RaftNode(node_id, voters=frozenset({1, 2, 3}), config=RaftConfig(),
                    log=storage, persisted_state=storage.hard_state(),
                    rng=random.Random(seed), now_ms=clock_ms(), logger=log)
    while True:
        for msg in transport.receive():          # peer requests and responses
            node.step(msg, clock_ms())
        node.tick(clock_ms())                     # due at node.next_deadline_ms()
        while node.has_ready():
            rd = node.ready()
            transport.send_all(rd.early_messages) # 0. a leader's fetch responses go at once
            storage.save(rd.hard_state)           # 1. persist: election state,
            storage.truncate(rd.truncate_to)      #    truncation, then batches,
            storage.append(rd.entries)            #    snapshot chunks / install,
            if rd.must_sync: storage.sync()       #    and sync BEFORE step 2
            transport.send_all(rd.messages)       # 2. only now talk to peers
            app.apply(rd.committed)               # 3. committed batches, in order
            node.advance(rd)                      # 4. done: the core moves on

The persist-before-send rule: a vote grant, a candidate's vote request and a follower's
fetch offset (its acknowledgement) all depend on state in the same or an earlier `Ready`, so
the shell must sync that state before it sends ``rd.messages``. A follower fetches only from
its *durable* log end, so the leader never counts a batch that a crash could lose.

Proposals go to the leader: ``node.propose([b"record", ...], now_ms)`` returns the first
record's offset or raises `NotLeaderError` with the leader hint. Records are lingered for
``controller.quorum.append.linger.ms`` into one Kafka v2 record batch (the Raft epoch is its
partition leader epoch); offsets count records.

The shell implements `RaftStorage` (read-only: log batches, epoch start offsets, snapshots)
and keeps the `HardState`; `kraft.sim.SimDisk` is an in-memory implementation.
"""

from kraft.raft.admission import EPOCH_MAX
from kraft.raft.config import RaftConfig, UnsafeOptions
from kraft.raft.control import LeaderChange, build_leader_change_batch, parse_leader_change
from kraft.raft.errors import InvalidTransitionError, NotLeaderError
from kraft.raft.log import LogStorage, RaftLog, RaftStorage, SnapshotStorage
from kraft.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DivergingEpoch,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftMessage,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from kraft.raft.node import RaftNode
from kraft.raft.quorum import has_majority, majority_end_offset, majority_size, next_high_watermark
from kraft.raft.quorum_state import QuorumState
from kraft.raft.ready import HardState, Ready, SnapshotChunk
from kraft.raft.roles import (
    Candidate,
    Follower,
    Leader,
    Prospective,
    ReplicaProgress,
    Resigned,
    Role,
    Unattached,
)

__all__ = [
    "EPOCH_MAX",
    "BeginQuorumEpochRequest",
    "BeginQuorumEpochResponse",
    "Candidate",
    "DivergingEpoch",
    "EndQuorumEpochRequest",
    "EndQuorumEpochResponse",
    "FetchRequest",
    "FetchResponse",
    "FetchSnapshotRequest",
    "FetchSnapshotResponse",
    "Follower",
    "HardState",
    "InvalidTransitionError",
    "Leader",
    "LeaderChange",
    "LogStorage",
    "NotLeaderError",
    "Prospective",
    "QuorumState",
    "RaftConfig",
    "RaftLog",
    "RaftMessage",
    "RaftNode",
    "RaftStorage",
    "Ready",
    "ReplicaProgress",
    "Resigned",
    "Role",
    "SnapshotChunk",
    "SnapshotId",
    "SnapshotStorage",
    "Unattached",
    "UnsafeOptions",
    "VoteRequest",
    "VoteResponse",
    "build_leader_change_batch",
    "has_majority",
    "majority_end_offset",
    "majority_size",
    "next_high_watermark",
    "parse_leader_change",
]
