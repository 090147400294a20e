"""Automatic leader balancing (``auto.leader.rebalance.enable``): after a broker comes back,
the controller moves leadership to the preferred replicas at its next check."""

from __future__ import annotations

from kraft.controller import ControllerConfig
from kraft.controller.leader_balance import (
    FOLLOW_UP_DELAY_MS,
    MAX_ELECTIONS_PER_CHECK,
    LeaderBalanceConfig,
    LeaderBalancer,
    broker_imbalance,
    imbalanced_partitions,
)
from kraft.controller.messages import CreatableTopic, CreateTopicsRequest
from kraft.metadata.records import PartitionChangeRecord
from tests.controller.harness import ControllerHarness

INTERVAL_S = 5


def _cluster(*, enabled: bool = True, percentage: int = 10) -> ControllerHarness:
    """Brokers 1, 2, 3; topic t with 6 partitions, each broker the preferred leader of two;
    broker 1 fenced and back: it leads nothing, and is in every ISR again."""
    h = ControllerHarness(
        config=ControllerConfig(
            broker_session_timeout_ms=60_000,
            auto_leader_rebalance_enable=enabled,
            leader_imbalance_check_interval_seconds=INTERVAL_S,
            leader_imbalance_per_broker_percentage=percentage,
        )
    )
    h.start_brokers(1, 2, 3)
    assignments = tuple((a, b, c) for a, b, c in [(1, 2, 3), (2, 3, 1), (3, 1, 2)] * 2)
    h.run(
        h.core.handle_create_topics_request,
        CreateTopicsRequest(topics=(CreatableTopic(name="t", assignments=assignments),)),
    )
    h.heartbeat(1, want_fence=True)
    h.heartbeat(1)
    for i in range(6):
        p = h.partition("t", i)
        if 1 not in p.isr:
            h.alter_isr("t", i, (*p.isr, 1))
    assert [h.partition("t", i).leader for i in range(6)].count(1) == 0
    return h


def test_a_rejoined_broker_gets_its_preferred_leaderships_back_at_the_next_check() -> None:
    h = _cluster()
    assert broker_imbalance(h.core.pending_image)[1] == (2, 2)
    h.tick(h.now_ms)  # the tick the setup's inputs asked for: no check is due yet
    due_at = h.core.next_deadline_ms()
    assert due_at is not None, "the check is a deadline the shell sees"
    assert 0 < due_at - h.now_ms <= INTERVAL_S * 1000
    assert h.tick(due_at - 1) == ()  # not due yet
    records = h.tick(due_at)
    assert {r.leader for r in records if isinstance(r, PartitionChangeRecord)} == {1}
    assert [h.partition("t", i).leader for i in range(6)] == [1, 2, 3, 1, 2, 3]
    h.tick(h.now_ms)  # the tick the elections' own inputs asked for
    # balanced: the next check in a full interval
    assert h.core.next_deadline_ms() == due_at + INTERVAL_S * 1000
    assert h.tick(due_at + INTERVAL_S * 1000) == ()


def test_no_rebalance_when_auto_leader_rebalance_is_disabled() -> None:
    h = _cluster(enabled=False)
    assert h.tick(h.now_ms + 10 * INTERVAL_S * 1000) == ()
    assert [h.partition("t", i).leader for i in range(6)].count(1) == 0


def test_an_imbalance_within_the_percentage_is_tolerated() -> None:
    h = _cluster(percentage=100)  # a broker may lead none of its preferred partitions
    assert imbalanced_partitions(h.core.pending_image, 100) == []
    assert h.tick(h.now_ms + INTERVAL_S * 1000) == ()
    assert imbalanced_partitions(h.core.pending_image, 49)  # 2 of 2 = 100% > 49%


def test_a_preferred_replica_outside_the_isr_is_not_elected() -> None:
    h = _cluster()
    h.alter_isr("t", 0, (2, 3))  # broker 1 fell out of t-0's ISR again
    targets = imbalanced_partitions(h.core.pending_image, 10)
    assert [tp.partition for tp in targets] == [3]
    h.tick(h.now_ms + INTERVAL_S * 1000)
    assert h.partition("t", 0).leader != 1
    assert h.partition("t", 3).leader == 1


def test_one_check_elects_at_most_the_bound_and_comes_back_soon_for_the_rest() -> None:
    h = _cluster()
    balancer = LeaderBalancer(
        LeaderBalanceConfig(check_interval_ms=INTERVAL_S * 1000), max_elections=1
    )
    image = h.core.pending_image
    now = h.now_ms + INTERVAL_S * 1000
    balancer.reset(h.now_ms)
    first = balancer.maybe_balance(image, now)
    assert len(first) == 1
    assert balancer.next_deadline_ms() == now + FOLLOW_UP_DELAY_MS
    assert MAX_ELECTIONS_PER_CHECK == 1_000  # Kafka's maxElectionsPerImbalance


def test_quorum_partitions_are_left_to_their_raft_vote() -> None:
    """A quorum topic's leaders come from its Raft groups (no leader until they vote): they
    count toward no broker's imbalance and are never balancing targets (else every check would
    ask ElectLeaders for them again, and get ELECTION_NOT_NEEDED)."""
    h = ControllerHarness(
        config=ControllerConfig(
            broker_session_timeout_ms=60_000,
            auto_leader_rebalance_enable=True,
            leader_imbalance_check_interval_seconds=INTERVAL_S,
        )
    )
    h.start_brokers(1, 2, 3)
    h.run(
        h.core.handle_create_topics_request,
        CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name="q",
                    assignments=((1, 2, 3), (2, 3, 1), (3, 1, 2)),
                    configs={"replication.mode": "quorum"},
                ),
            )
        ),
    )
    image = h.core.pending_image
    assert [h.partition("q", i).leader for i in range(3)] == [-1, -1, -1]
    assert broker_imbalance(image) == {}
    assert imbalanced_partitions(image, 10) == []
