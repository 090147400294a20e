"""KIP-853 voter changes in the deterministic simulator: invariants under faults."""

from __future__ import annotations

import pytest

from kraft.raft import UnsafeOptions
from kraft.sim import SimCluster
from kraft.sim.checker import InvariantViolated, majorities_can_be_disjoint
from kraft.sim.membership import MembershipChanger
from kraft.sim.raft_sim import run_seed, run_seeds
from kraft.types import NodeId
from storage.errors import RequestTimedOutError

MEMBERSHIP_SEEDS = 10
"""A share of the campaign (``kraft sim raft --membership --seeds 1000`` is the full one)."""


def _ids(*xs: int) -> frozenset[NodeId]:
    return frozenset(NodeId(x) for x in xs)


@pytest.mark.parametrize(
    ("old", "new", "disjoint"),
    [
        ((1,), (1, 2), False),
        ((1, 2), (1, 2, 3), False),
        ((1, 2, 3), (1, 2, 3, 4), False),
        ((1, 2, 3), (1, 2), False),
        ((1, 2, 3), (2, 3, 4), True),  # a replace is two changes: {1, 2} and {3, 4}
        ((1,), (1, 2, 3), True),  # two adds at once: {1} and {2, 3}
        ((1, 2, 3), (1, 4, 5), True),
        ((1, 2, 3, 4), (1, 2), False),  # two removals, yet every 3 of 4 holds 1 or 2
        ((1, 2, 3, 4, 5), (1, 2, 3), True),  # {1, 2} and {3, 4, 5}
    ],
)
def test_majorities_can_be_disjoint(
    old: tuple[int, ...], new: tuple[int, ...], disjoint: bool
) -> None:
    assert majorities_can_be_disjoint(_ids(*old), _ids(*new)) is disjoint


def test_a_seed_share_of_voter_changes_under_faults_holds_every_invariant() -> None:
    summary = run_seeds(0, MEMBERSHIP_SEEDS, observers=2, membership=True)
    assert not summary.violations, summary.violations[0].line()
    assert summary.voter_changes >= MEMBERSHIP_SEEDS  # the changes did happen


def test_a_membership_seed_replays_exactly() -> None:
    a = run_seed(5, voters=3, observers=2, membership=True)
    b = run_seed(5, voters=3, observers=2, membership=True)
    assert a.line() == b.line() and a.voter_changes > 0


def _add_voter(cluster: SimCluster, target: int) -> None:
    """Ask whoever leads to add ``target``, retrying the retriable refusals (as the CLI does)."""
    deadline = cluster.clock.now_ms + 3000
    while True:
        leader = cluster.leader()
        if leader is not None and leader.node is not None:
            try:
                leader.node.add_voter(NodeId(target), f"h{target}:1", cluster.clock.now_ms)
            except RequestTimedOutError:
                pass
            else:
                cluster._after_activity(leader)
                return
        assert cluster.clock.now_ms < deadline, f"node {target} was never added"
        cluster.scheduler.run_until(cluster.clock.now_ms + 20)


def _grown_cluster(unsafe: UnsafeOptions | None = None) -> SimCluster:
    cluster = SimCluster(seed=3, voters=1, observers=3, dynamic_voters=True, unsafe=unsafe)
    cluster.scheduler.run_until(600)
    return cluster


def test_checker_catches_two_uncommitted_voter_changes_in_a_row() -> None:
    cluster = _grown_cluster(UnsafeOptions(concurrent_voter_changes=True))
    leader = cluster.leader()
    assert leader is not None and leader.node is not None
    now = cluster.clock.now_ms
    leader.node.add_voter(NodeId(2), "", now)
    with pytest.raises(InvariantViolated, match="voter_sets_overlap"):
        leader.node.add_voter(NodeId(3), "", now)
        cluster._after_activity(leader)


def test_a_quorum_grows_from_one_to_three_and_a_removed_leader_hands_over() -> None:
    cluster = _grown_cluster()
    changer = MembershipChanger(cluster, cluster.rng, start_ms=0, end_ms=0)
    for target in (2, 3):
        _add_voter(cluster, target)
        cluster.scheduler.run_until(cluster.clock.now_ms + 200)
    leader = cluster.leader()
    assert leader is not None and leader.node is not None
    assert leader.node.voters == _ids(1, 2, 3)
    old = leader.node_id
    leader.node.remove_voter(old, cluster.clock.now_ms)
    cluster._after_activity(leader)
    cluster.scheduler.run_until(cluster.clock.now_ms + 1000)
    new = cluster.leader()
    assert new is not None and new.node is not None and new.node_id != old
    assert new.node.voters == _ids(1, 2, 3) - {old}
    assert changer.stats.appended == 0
    for n in cluster.nodes.values():  # every node, the removed one too, uses the new set
        assert n.node is not None and n.node.voters == new.node.voters


def test_a_removed_leader_holding_the_only_copy_of_its_removal_is_still_elected() -> None:
    # {1, 2}: leader 1 removes itself while 2 is cut off, then resigns (check-quorum).
    # 2's log still says {1, 2}: it needs 1's vote, which 1 refuses (its log is longer),
    # so 1 must campaign although its own log no longer lists it, or no one is ever elected.
    cluster = _grown_cluster()
    leader = cluster.leader()
    assert leader is not None and leader.node is not None and leader.node_id == 1
    _add_voter(cluster, 2)
    cluster.scheduler.run_until(cluster.clock.now_ms + 200)
    assert leader.node.voters == _ids(1, 2) and leader.node.high_watermark > 0
    cluster.network.isolate(NodeId(2))
    leader.node.remove_voter(NodeId(1), cluster.clock.now_ms)
    cluster._after_activity(leader)
    cluster.scheduler.run_until(cluster.clock.now_ms + 1000)
    assert not leader.node.is_leader  # check-quorum: 2 never fetched the removal
    cluster.network.heal()
    cluster.scheduler.run_until(cluster.clock.now_ms + 3000)
    new = cluster.leader()
    assert new is not None and new.node is not None and new.node_id == 2
    assert new.node.voters == _ids(2)


def test_voter_sets_survive_snapshots_restarts_and_snapshot_installs() -> None:
    cluster = SimCluster(
        seed=4, voters=1, observers=2, dynamic_voters=True, snapshot_every_records=20
    )
    cluster.scheduler.run_until(600)
    late = cluster.nodes[NodeId(3)]
    cluster.crash(late)
    _add_voter(cluster, 2)
    leader = cluster.leader()
    assert leader is not None and leader.node is not None
    for i in range(100):  # well past a few snapshots
        cluster.scheduler.run_until(cluster.clock.now_ms + 5)
        leader.node.propose([b"v%d" % i], cluster.clock.now_ms)
        cluster._after_activity(leader)
    cluster.scheduler.run_until(cluster.clock.now_ms + 200)
    assert leader.node.log_start_offset > 0  # the VotersRecord is inside a snapshot now
    for n in (leader, cluster.nodes[NodeId(2)]):
        cluster.crash(n)
        cluster.start(n)
    cluster.start(late)  # behind the log start: it loads the snapshot from the leader
    cluster.scheduler.run_until(cluster.clock.now_ms + 2000)
    for n in cluster.nodes.values():
        assert n.node is not None and n.node.voters == _ids(1, 2), n.node_id
    assert cluster.nodes[NodeId(3)].node.raft_log.snapshot_id is not None  # type: ignore[union-attr]
