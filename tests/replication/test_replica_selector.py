"""KIP-392's replica selection (`replication.core.replica_selector`): which replica a leader
names to a consumer, after Kafka's RackAwareReplicaSelector and findPreferredReadReplica."""

from __future__ import annotations

import pytest

from replication.broker.replicas.read_replica import client_metadata
from replication.core.high_watermark import ReplicaState
from replication.core.replica_selector import (
    LEADER_SELECTOR,
    RACK_AWARE_SELECTOR,
    SELECTORS,
    ReplicaView,
    preferred_read_replica,
    read_replica_candidates,
    select,
)
from storage.config_registry import NODE_KEYS

NOW = 100_000
LEADER = ReplicaView(broker_id=1, rack="a", log_end_offset=50, time_since_last_caught_up_ms=0)


def _view(broker_id: int, rack: str | None, leo: int = 50, lag_ms: int = 0) -> ReplicaView:
    return ReplicaView(
        broker_id=broker_id, rack=rack, log_end_offset=leo, time_since_last_caught_up_ms=lag_ms
    )


def _state(leo: int, start: int = 0, caught_up_ago_ms: int = 0) -> ReplicaState:
    return ReplicaState(
        log_end_offset=leo, log_start_offset=start, last_caught_up_time_ms=NOW - caught_up_ago_ms
    )


def test_the_config_key_accepts_exactly_the_selectors_kraft_has() -> None:
    assert NODE_KEYS["replica.selector.class"].choices == frozenset(SELECTORS)
    assert NODE_KEYS["replica.selector.class"].validate("com.example.Mine") is not None


def test_rack_aware_picks_the_follower_in_the_clients_rack() -> None:
    candidates = (LEADER, _view(2, "b"), _view(3, "c"))
    assert preferred_read_replica(RACK_AWARE_SELECTOR, "b", LEADER, candidates) == 2
    assert preferred_read_replica(RACK_AWARE_SELECTOR, "c", LEADER, candidates) == 3


@pytest.mark.parametrize(
    ("client_rack", "why"),
    [("", "no client.rack"), ("z", "no replica in the rack"), ("a", "the leader is in it")],
)
def test_rack_aware_keeps_the_leader(client_rack: str, why: str) -> None:
    candidates = (LEADER, _view(2, "a"), _view(3, "b"))
    assert select(RACK_AWARE_SELECTOR, client_rack, LEADER, candidates) == LEADER, why
    assert preferred_read_replica(RACK_AWARE_SELECTOR, client_rack, LEADER, candidates) is None


def test_rack_aware_prefers_the_most_caught_up_then_the_most_recently_caught_up() -> None:
    behind, ahead = _view(2, "b", leo=40), _view(3, "b", leo=45)
    assert select(RACK_AWARE_SELECTOR, "b", LEADER, (LEADER, behind, ahead)) == ahead
    stale, fresh = _view(2, "b", lag_ms=900), _view(3, "b", lag_ms=10)
    assert select(RACK_AWARE_SELECTOR, "b", LEADER, (LEADER, stale, fresh)) == fresh
    twin2, twin3 = _view(2, "b"), _view(3, "b")  # a full tie: the lowest id, every time
    assert select(RACK_AWARE_SELECTOR, "b", LEADER, (LEADER, twin3, twin2)) == twin2


def test_the_leader_selector_and_no_selector_keep_every_consumer_on_the_leader() -> None:
    candidates = (LEADER, _view(2, "b"))
    assert preferred_read_replica(LEADER_SELECTOR, "b", LEADER, candidates) is None
    assert preferred_read_replica(None, "b", LEADER, candidates) is None


def test_candidates_are_in_sync_followers_that_hold_the_offset_and_the_client_can_reach() -> None:
    followers = {
        2: _state(leo=50),  # in sync, holds 30: a candidate
        3: _state(leo=50),  # not in the ISR
        4: _state(leo=20),  # in the ISR but has not reached offset 30 yet
        5: _state(leo=50, start=40),  # retention moved its log start past 30
        6: _state(leo=50),  # no endpoint on the client's listener (or fenced)
        7: _state(leo=30, caught_up_ago_ms=250),  # holds 30 exactly
    }
    racks = {1: "a", 2: "b", 3: "b", 4: "b", 5: "b", 7: None}
    candidates = read_replica_candidates(
        leader=LEADER,
        followers=followers,
        in_sync_replicas={1, 2, 4, 5, 6, 7},
        racks=racks,
        fetch_offset=30,
        now_ms=NOW,
    )
    assert candidates == (
        LEADER,
        _view(2, "b"),
        _view(7, None, leo=30, lag_ms=250),
    )


def test_fetch_below_v11_has_no_client_metadata_and_grpc_always_has() -> None:
    assert client_metadata("b", "KAFKA", 10) is None
    assert client_metadata("b", "KAFKA", 11) is not None
    assert client_metadata("", "PLAINTEXT", -1) is not None
