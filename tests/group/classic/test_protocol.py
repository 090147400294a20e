"""The classic group protocol, request by request: join, sync, heartbeat, leave, timers.

Reference: Kafka 4.x ``GroupMetadataManager`` (classic paths) and ``ClassicGroup``.
"""

from __future__ import annotations

from replication.group.classic import (
    MEMBER_ID_REQUIRED,
    ClassicGroupConfig,
    ClassicGroupState,
    MemberIdentity,
)
from storage.errors import ErrorCode
from tests.group.classic.harness import Harness, protocols

S = ClassicGroupState


def state(h: Harness, group: str = "g") -> ClassicGroupState:
    return h.mgr.groups()[group].state


def test_two_members_join_sync_and_become_stable() -> None:
    h = Harness()
    a, ha = h.new_member(client_id="a", protos=protocols("range", "roundrobin"))
    b, hb = h.new_member(client_id="b", protos=protocols("range", "roundrobin"))
    assert a.startswith("a-") and b.startswith("b-")
    assert h.parked() == {ha, hb}
    assert state(h) is S.PREPARING_REBALANCE
    h.tick_until_answered([ha, hb])

    ja, jb = h.join_answer(ha), h.join_answer(hb)
    assert ja.error_code == jb.error_code == ErrorCode.NONE
    assert ja.generation_id == jb.generation_id == 1
    assert ja.leader == jb.leader == a
    assert ja.protocol_name == jb.protocol_name == "range"
    assert ja.protocol_type == "consumer"
    assert {m.member_id: m.metadata for m in ja.members} == {a: b"range-meta", b: b"range-meta"}
    assert jb.members == ()  # only the leader gets the subscriptions
    assert state(h) is S.COMPLETING_REBALANCE

    follower = h.sync(b, 1)
    assert h.parked() == {follower}  # waits for the leader's assignment
    leader = h.sync(a, 1, {a: b"A", b: b"B"})
    assert h.sync_answer(leader).assignment == b"A"
    assert h.sync_answer(follower).assignment == b"B"
    assert h.sync_answer(follower).protocol_name == "range"
    assert state(h) is S.STABLE
    assert h.heartbeat(a, 1) == h.heartbeat(b, 1) == ErrorCode.NONE
    # a record at each state at rest: new group (Empty), CompletingRebalance, Stable
    assert len(h.log) == 3


def test_protocol_is_the_members_vote_among_those_all_support() -> None:
    h = Harness()
    handles = [
        h.new_member(client_id="a", protos=protocols("roundrobin", "range"))[1],
        h.new_member(client_id="b", protos=protocols("sticky", "range", "roundrobin"))[1],
        h.new_member(client_id="c", protos=protocols("range", "roundrobin"))[1],
    ]
    # a member that supports none of the group's protocols is refused
    odd = h.join(client_id="d", protos=protocols("sticky"))
    assert h.join_answer(odd).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    wrong_type = h.join(client_id="e", protocol_type="connect")
    assert h.join_answer(wrong_type).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    h.tick_until_answered(handles)
    # candidates {range, roundrobin}: a votes roundrobin, b range, c range
    assert {h.join_answer(x).protocol_name for x in handles} == {"range"}


def test_initial_rebalance_waits_the_delay_and_extends_while_members_arrive() -> None:
    h = Harness(ClassicGroupConfig(initial_rebalance_delay_ms=3_000))
    start = h.now
    _, ha = h.new_member(client_id="a", rebalance_ms=10_000)
    h.tick(2_999)
    assert ha in h.parked()
    _, hb = h.new_member(client_id="b", rebalance_ms=10_000)
    h.tick(1)  # the first delay ends; b arrived: wait one more delay
    assert {ha, hb} <= h.parked()
    assert h.mgr.next_deadline_ms() == start + 6_000
    h.tick_until_answered([ha, hb])
    assert h.now == start + 6_000
    assert h.join_answer(ha).generation_id == 1


def test_a_member_leaving_triggers_a_rebalance() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    left = h.leave(MemberIdentity(member_id=b))
    assert [m.error_code for m in left.members] == [ErrorCode.NONE]
    assert state(h) is S.PREPARING_REBALANCE
    assert h.heartbeat(a, gen) == ErrorCode.REBALANCE_IN_PROGRESS
    rejoin = h.join(a)  # everyone left has joined: the join phase completes at once
    answer = h.join_answer(rejoin)
    assert answer.generation_id == gen + 1
    assert answer.leader == a and [m.member_id for m in answer.members] == [a]
    assert h.heartbeat(b, gen) == ErrorCode.UNKNOWN_MEMBER_ID


def test_last_member_leaving_empties_the_group_in_a_new_generation() -> None:
    h = Harness()
    (a,), gen = h.stable_group(1)
    h.leave(MemberIdentity(member_id=a))
    g = h.mgr.groups()["g"]
    assert g.state is S.EMPTY and g.generation_id == gen + 1 and not g.members
    assert h.rebuilt().groups()["g"].persisted == g.persisted


def test_leave_group_answers_each_member() -> None:
    h = Harness()
    (a, b), _ = h.stable_group(2)
    left = h.leave(MemberIdentity(member_id=a), MemberIdentity(member_id="nobody"))
    assert [(m.member_id, m.error_code) for m in left.members] == [
        (a, ErrorCode.NONE),
        ("nobody", ErrorCode.UNKNOWN_MEMBER_ID),
    ]
    assert h.leave(MemberIdentity(member_id=b), group="other").error_code == (
        ErrorCode.UNKNOWN_MEMBER_ID
    )
    assert h.leave(MemberIdentity(member_id=b), group="").error_code == ErrorCode.INVALID_GROUP_ID


def test_a_member_whose_session_expires_is_removed_and_the_group_rebalances() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    for _ in range(2):  # a heartbeats, b is silent
        h.tick(4_000)
        assert h.heartbeat(a, gen) == ErrorCode.NONE
    assert b in h.mgr.groups()["g"].members
    h.tick(2_000)  # b's session (10 s) ends
    assert b not in h.mgr.groups()["g"].members
    assert state(h) is S.PREPARING_REBALANCE
    assert h.heartbeat(a, gen) == ErrorCode.REBALANCE_IN_PROGRESS
    assert h.join_answer(h.join(a)).generation_id == gen + 1


def test_a_late_joiner_makes_every_member_rejoin() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    c, hc = h.new_member(client_id="c")
    assert state(h) is S.PREPARING_REBALANCE and hc in h.parked()
    assert h.heartbeat(a, gen) == h.heartbeat(b, gen) == ErrorCode.REBALANCE_IN_PROGRESS
    ha = h.join(a)
    assert {ha, hc} <= h.parked()
    hb = h.join(b)
    answers = [h.join_answer(x) for x in (ha, hb, hc)]
    assert {x.generation_id for x in answers} == {gen + 1}
    assert {m.member_id for m in answers[0].members} == {a, b, c}


def test_rebalance_timeout_removes_a_member_that_never_rejoins() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    ha = h.join(a)  # the leader rejoins: a rebalance
    assert state(h) is S.PREPARING_REBALANCE
    for _ in range(7):  # b keeps heartbeating but never rejoins
        h.tick(4_000)
        assert h.heartbeat(b, gen) == ErrorCode.REBALANCE_IN_PROGRESS
    assert ha in h.parked()
    h.tick(2_000)  # 30 s, the rebalance timeout, after the rebalance began
    answer = h.join_answer(ha)
    assert answer.generation_id == gen + 1 and [m.member_id for m in answer.members] == [a]
    assert h.heartbeat(b, gen) == ErrorCode.UNKNOWN_MEMBER_ID


def test_heartbeat_errors() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    assert h.heartbeat(a, gen, group="unknown") == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.heartbeat(a, gen, group="") == ErrorCode.INVALID_GROUP_ID
    assert h.heartbeat("stranger", gen) == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.heartbeat(a, gen + 1) == ErrorCode.ILLEGAL_GENERATION
    assert h.heartbeat(a, gen - 1) == ErrorCode.ILLEGAL_GENERATION
    h.join(b)  # b rejoins with the same protocols: as a follower in Stable, answered at once
    assert h.heartbeat(a, gen) == ErrorCode.NONE
    h.join(a, protos=protocols("range", "roundrobin"))  # changed metadata: rebalance
    assert h.heartbeat(b, gen) == ErrorCode.REBALANCE_IN_PROGRESS


def test_sync_errors_and_a_parked_sync_told_to_rejoin() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    assert h.sync_answer(h.sync(a, gen + 5)).error_code == ErrorCode.ILLEGAL_GENERATION
    assert h.sync_answer(h.sync("x", gen)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.sync_answer(h.sync(a, gen, group="nope")).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.sync_answer(h.sync(a, gen, group="")).error_code == ErrorCode.INVALID_GROUP_ID
    assert h.sync_answer(h.sync(b, gen)).assignment == f"assign-{b}".encode()  # Stable
    ha, hb = h.join(a), h.join(b)
    assert h.sync_answer(h.sync(b, gen)).error_code == ErrorCode.ILLEGAL_GENERATION
    new_gen = h.join_answer(ha).generation_id
    assert h.join_answer(hb).generation_id == new_gen
    follower = h.sync(b, new_gen)
    _, hc = h.new_member(client_id="c")  # a newcomer during CompletingRebalance
    assert h.sync_answer(follower).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    assert state(h) is S.PREPARING_REBALANCE
    assert h.sync_answer(h.sync(b, new_gen)).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    assert hc in h.parked()


def test_members_that_never_sync_are_removed_after_the_rebalance_timeout() -> None:
    h = Harness()
    a, ha = h.new_member(client_id="a")
    b, hb = h.new_member(client_id="b")
    h.tick_until_answered([ha, hb])
    gen = h.join_answer(ha).generation_id
    h.sync(a, gen, {a: b"A", b: b"B"})
    assert state(h) is S.STABLE
    for _ in range(8):  # b heartbeats but never sends its SyncGroup
        h.tick(4_000)
        h.heartbeat(a, gen)
        h.heartbeat(b, gen)
    assert b not in h.mgr.groups()["g"].members
    assert state(h) is S.PREPARING_REBALANCE


def test_a_pending_member_id_expires_after_the_session_timeout() -> None:
    h = Harness()
    first = h.join(client_id="a")
    mid = h.join_answer(first).member_id
    assert h.join_answer(first).error_code == MEMBER_ID_REQUIRED
    assert mid in h.mgr.groups()["g"].pending_members
    h.tick(10_000)
    assert mid not in h.mgr.groups()["g"].pending_members
    late = h.join(mid)
    assert h.join_answer(late).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_join_group_v3_joins_without_member_id_required() -> None:
    h = Harness()
    hv3 = h.join(client_id="old", api_version=3)
    h.tick_until_answered([hv3])
    answer = h.join_answer(hv3)
    assert answer.error_code == ErrorCode.NONE and answer.member_id.startswith("old-")


def test_a_new_member_that_never_completes_its_join_is_dropped() -> None:
    """A new member's parked JoinGroup expires on the new-member join timeout (5 min)."""
    h = Harness()
    (a,), gen = h.stable_group(1)
    _, hc = h.new_member(client_id="c", rebalance_ms=600_000)
    for _ in range(80):  # a keeps heartbeating, never rejoins; the join phase waits 10 min
        h.tick(4_000)
        h.heartbeat(a, gen)
    assert h.join_answer(hc).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_bad_join_requests_get_kafka_errors() -> None:
    h = Harness()
    assert h.join_answer(h.join(group="")).error_code == ErrorCode.INVALID_GROUP_ID
    assert h.join_answer(h.join(session_ms=10)).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.join_answer(h.join(protos=())).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.join_answer(h.join(protocol_type="")).error_code == (
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    )
    unknown = h.join("made-up", group="fresh")
    assert h.join_answer(unknown).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert "fresh" not in h.mgr.groups()
    assert h.log == []


def test_group_max_size_refuses_new_members() -> None:
    h = Harness(ClassicGroupConfig(max_size=1))
    h.stable_group(1)
    extra = h.join(client_id="extra")
    assert h.join_answer(extra).error_code == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_abandon_answers_every_parked_request() -> None:
    h = Harness()
    _, ha = h.new_member(client_id="a")
    fx = h.apply(h.mgr.abandon())
    assert [r.handle for r in fx.replies] == [ha]
    assert h.join_answer(ha).error_code == ErrorCode.NOT_COORDINATOR
    assert h.parked() == set()
