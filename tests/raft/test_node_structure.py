"""`RaftNode` is composed of collaborators that each own their state (issue 11, item 5)."""

from __future__ import annotations

import kraft.raft
from kraft.raft.election import Election
from kraft.raft.node import RaftNode
from kraft.raft.outbox import Outbox
from kraft.raft.quorum_state import QuorumState
from kraft.raft.replication import Replication


def test_raft_node_inherits_from_nothing_but_object() -> None:
    """No mixins over a shared base: every part is a field of the node."""
    assert RaftNode.__mro__ == (RaftNode, object)


def test_each_collaborator_declares_its_own_fields_and_no_others() -> None:
    """``__slots__`` makes a collaborator's state explicit: it cannot grow fields elsewhere."""
    for cls in (Election, Outbox, QuorumState, Replication):
        assert cls.__mro__ == (cls, object), cls
        assert "__slots__" in vars(cls), cls
        assert "__dict__" not in dir(cls), cls


def test_raft_names_its_per_replica_state_apart_from_the_isr_brokers_replica_state() -> None:
    """``replication.core.ReplicaState`` is the ISR broker's; Raft's is ``ReplicaProgress``."""
    assert "ReplicaProgress" in kraft.raft.__all__
    assert not hasattr(kraft.raft, "ReplicaState")
