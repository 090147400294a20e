"""`QuorumState`: every (role, transition) pair either moves legally or raises
`InvalidTransitionError` (STYLE §7 exhaustive tables)."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraft.raft import (
    Candidate,
    Follower,
    HardState,
    InvalidTransitionError,
    Leader,
    Prospective,
    QuorumState,
    RaftConfig,
    Resigned,
    Unattached,
)
from kraft.types import Epoch, NodeId

VOTERS = frozenset(NodeId(i) for i in (1, 2, 3))


def quorum(role: str, *, local: int = 1) -> QuorumState:
    q = QuorumState(
        local_id=NodeId(local),
        voters=VOTERS,
        config=RaftConfig(),
        rng=random.Random(0),
        persisted=HardState(epoch=Epoch(3)),
        now_ms=0,
    )
    if role == "unattached" or local not in VOTERS:
        return q
    if role == "follower":
        q.transition_to_follower(Epoch(3), NodeId(2 if local != 2 else 3), 0)
        return q
    q.transition_to_prospective(0)
    if role == "prospective":
        return q
    q.transition_to_candidate(0)
    if role == "candidate":
        return q
    role_obj = q.role
    assert isinstance(role_obj, Candidate)
    role_obj.granted.add(NodeId(2))
    q.transition_to_leader(0, 0)
    if role == "leader":
        return q
    q.transition_to_resigned((), 0)
    return q


TRANSITIONS: dict[str, Callable[[QuorumState], object]] = {
    "unattached_same_epoch": lambda q: q.transition_to_unattached(q.epoch, 0),
    "unattached_higher_epoch": lambda q: q.transition_to_unattached(Epoch(q.epoch + 1), 0),
    "vote_same_epoch": lambda q: q.transition_to_unattached_voted(q.epoch, NodeId(2), 0),
    "prospective": lambda q: q.transition_to_prospective(0),
    "candidate": lambda q: q.transition_to_candidate(0),
    "leader": lambda q: q.transition_to_leader(0, 0),
    "follower_same_epoch": lambda q: q.transition_to_follower(q.epoch, NodeId(3), 0),
    "follower_higher_epoch": lambda q: q.transition_to_follower(Epoch(q.epoch + 1), NodeId(3), 0),
    "resigned": lambda q: q.transition_to_resigned((), 0),
}

ROLES = ["unattached", "prospective", "candidate", "leader", "follower", "resigned"]

# (role, transition) pairs the module docstring allows for a voter.
ALLOWED = {
    ("unattached", "unattached_higher_epoch"),
    ("unattached", "vote_same_epoch"),
    ("unattached", "prospective"),
    ("unattached", "follower_same_epoch"),
    ("unattached", "follower_higher_epoch"),
    ("prospective", "unattached_higher_epoch"),
    ("prospective", "prospective"),
    ("prospective", "candidate"),
    ("prospective", "follower_same_epoch"),
    ("prospective", "follower_higher_epoch"),
    ("candidate", "unattached_higher_epoch"),
    ("candidate", "prospective"),
    ("candidate", "follower_same_epoch"),
    ("candidate", "follower_higher_epoch"),
    ("leader", "unattached_higher_epoch"),
    ("leader", "follower_higher_epoch"),
    ("leader", "resigned"),
    ("follower", "unattached_higher_epoch"),
    ("follower", "prospective"),
    ("follower", "follower_higher_epoch"),
    ("resigned", "unattached_higher_epoch"),
    ("resigned", "prospective"),
    ("resigned", "follower_higher_epoch"),
}


@given(role=st.sampled_from(ROLES), transition=st.sampled_from(sorted(TRANSITIONS)))
def test_every_role_and_transition_pair_is_legal_or_refused(role: str, transition: str) -> None:
    q = quorum(role)
    before = q.epoch
    if (role, transition) in ALLOWED:
        TRANSITIONS[transition](q)
        assert q.epoch >= before
    else:
        with pytest.raises(InvalidTransitionError):
            TRANSITIONS[transition](q)


@given(transition=st.sampled_from(["prospective", "candidate", "leader", "resigned"]))
def test_observers_never_campaign(transition: str) -> None:
    q = quorum("unattached", local=9)
    with pytest.raises(InvalidTransitionError):
        TRANSITIONS[transition](q)


def test_hard_state_follows_the_role_and_never_votes_twice() -> None:
    q = quorum("unattached")
    q.transition_to_unattached_voted(q.epoch, NodeId(2), 0)
    assert q.take_hard_state_update() == HardState(epoch=Epoch(3), voted_for=NodeId(2))
    assert q.take_hard_state_update() is None
    with pytest.raises(InvalidTransitionError):
        q.transition_to_unattached_voted(q.epoch, NodeId(3), 0)


@pytest.mark.parametrize(
    ("persisted", "role"),
    [
        (HardState(epoch=Epoch(4), leader_id=NodeId(1), voted_for=NodeId(1)), Resigned),
        (HardState(epoch=Epoch(4), leader_id=NodeId(2)), Follower),
        (HardState(epoch=Epoch(4), voted_for=NodeId(3)), Unattached),
    ],
)
def test_restart_resumes_from_persisted_state(persisted: HardState, role: type) -> None:
    q = QuorumState(
        local_id=NodeId(1),
        voters=VOTERS,
        config=RaftConfig(),
        rng=random.Random(0),
        persisted=persisted,
        now_ms=0,
    )
    assert isinstance(q.role, role) and q.epoch == 4
    assert q.hard_state() == persisted
    assert not isinstance(q.role, Leader | Prospective)
