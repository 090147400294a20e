"""ConsumerGroupHeartbeat (KIP-848): joining, leaving, epochs, reconciliation, errors."""

from __future__ import annotations

from replication.group import GroupConfig, GroupState, MemberState
from storage.errors import ErrorCode
from tests.group.helpers import Member, Shell


def state_of(shell: Shell, member_id: str) -> MemberState:
    return shell.coord.groups()["g"].members[member_id].state


def settle(*members: Member, rounds: int = 10) -> None:
    for _ in range(rounds):
        for m in members:
            m.heartbeat()


def test_first_member_joins_with_epoch_zero_and_gets_every_partition() -> None:
    shell = Shell(t=4)
    m = Member(shell, "m1", ["t"])
    r = m.heartbeat()
    assert r.error_code == ErrorCode.NONE
    # Epoch 2, as Kafka 4.4 answers: a new group starts at epoch 1 (state.INITIAL_EPOCH) and
    # the member's subscription moves it on (found by kraft interop diff).
    assert r.member_id == "m1" and r.member_epoch == 2
    assert r.heartbeat_interval_ms == 5000
    assert m.owned == {("id-t", p) for p in range(4)}
    (desc,) = shell.coord.describe_groups(["g"])
    assert desc.state is GroupState.STABLE and desc.group_epoch == desc.assignment_epoch == 2


def test_a_member_subscribed_to_nothing_joins_at_the_initial_epoch_without_a_bump() -> None:
    """Kafka 4.4: no subscription change, so no group epoch record; the member reconciles to
    the new group's in-memory assignment epoch, 1."""
    shell = Shell(t=4)
    r = Member(shell, "m1", []).heartbeat()
    assert r.error_code == ErrorCode.NONE and r.member_epoch == 1
    g = shell.coord.groups()["g"]
    assert not g.has_metadata and g.group_epoch == g.assignment_epoch == 1


def test_the_last_member_leaving_moves_the_assignment_epoch_with_the_group_epoch() -> None:
    """Kafka 4.4 writes the empty group's target assignment metadata at the new group epoch
    when its last member leaves (found by kraft interop diff: kraft's stayed one behind)."""
    shell = Shell(t=4)
    m1, m2 = Member(shell, "m1", ["t"]), Member(shell, "m2", ["t"])
    settle(m1, m2)
    m2.leave()
    g = shell.coord.groups()["g"]
    assert g.assignment_epoch < g.group_epoch  # m1 still to heartbeat: assigning
    m1.leave()
    g = shell.coord.groups()["g"]
    assert g.group_epoch == g.assignment_epoch and not g.members
    (desc,) = shell.coord.describe_groups(["g"])
    assert desc.state is GroupState.EMPTY and desc.group_epoch == desc.assignment_epoch


def test_empty_member_id_gets_a_derived_deterministic_id() -> None:
    a, b = Shell(t=1), Shell(t=1)
    ra, rb = a.hb("", 0, subscribe=["t"]), b.hb("", 0, subscribe=["t"])
    assert ra.member_id and ra.member_id == rb.member_id


def test_second_member_gets_partitions_only_after_the_first_revoked_them() -> None:
    shell = Shell(t=4)
    m1, m2 = Member(shell, "m1", ["t"]), Member(shell, "m2", ["t"])
    m1.heartbeat()
    r2 = m2.heartbeat()
    # (Epochs as Kafka 4.4's: a new group starts at 1, so m1 joins at 2 and m2 at 3.)
    # m2 is in epoch 3 but its target partitions are still held by m1: unreleased.
    assert r2.member_epoch == 3 and m2.owned == set()
    assert state_of(shell, "m2") is MemberState.UNRELEASED_PARTITIONS
    # m1 learns what to revoke, keeps its epoch until it has revoked.
    r1 = m1.heartbeat()
    assert r1.member_epoch == 2 and len(m1.owned) == 2
    assert state_of(shell, "m1") is MemberState.UNREVOKED_PARTITIONS
    # m1 reports it revoked: it moves to epoch 3; m2 then gets the released partitions.
    r1 = m1.heartbeat()
    assert r1.member_epoch == 3
    assert state_of(shell, "m1") is MemberState.STABLE
    m2.heartbeat()
    assert len(m2.owned) == 2 and not (m1.owned & m2.owned)
    assert state_of(shell, "m2") is MemberState.STABLE
    (desc,) = shell.coord.describe_groups(["g"])
    assert desc.state is GroupState.STABLE


def test_no_partition_is_ever_held_by_two_members_while_members_come_and_go() -> None:
    shell = Shell(a=7, b=5)
    ms = [Member(shell, f"m{i}", ["a", "b"] if i % 2 else ["a"]) for i in range(5)]
    active: list[Member] = []
    for step in range(40):
        if step < 5:
            active.append(ms[step])
        if step == 20:
            active.pop(0).leave()
        for m in active:
            m.heartbeat()
            seen: dict[tuple[str, int], str] = {}
            for other in active:
                for tp in other.owned:
                    assert tp not in seen, f"{tp} owned by {seen[tp]} and {other.member_id}"
                    seen[tp] = other.member_id
    assert set().union(*(m.owned for m in active)) == {("id-a", p) for p in range(7)} | {
        ("id-b", p) for p in range(5)
    }


def test_leave_releases_partitions_and_bumps_the_group_epoch() -> None:
    shell = Shell(t=4)
    m1, m2 = Member(shell, "m1", ["t"]), Member(shell, "m2", ["t"])
    settle(m1, m2)
    epoch = shell.coord.groups()["g"].group_epoch
    r = m1.leave()
    assert r.error_code == ErrorCode.NONE and r.member_epoch == -1
    assert shell.coord.groups()["g"].group_epoch == epoch + 1
    settle(m2)
    assert m2.owned == {("id-t", p) for p in range(4)}


def test_heartbeat_with_a_newer_epoch_is_fenced() -> None:
    shell = Shell(t=2)
    shell.hb("m1", 0, subscribe=["t"])
    r = shell.hb("m1", 5)
    assert r.error_code == ErrorCode.FENCED_MEMBER_EPOCH


def test_heartbeat_with_an_older_epoch_is_fenced_unless_it_is_the_lost_response_case() -> None:
    shell = Shell(t=2)
    m1, m2 = Member(shell, "m1", ["t"]), Member(shell, "m2", ["t"])
    settle(m1, m2)
    g = shell.coord.groups()["g"]
    current = g.members["m1"].member_epoch
    previous = g.members["m1"].previous_member_epoch
    assert previous < current
    # previous epoch + owned partitions a subset of the assignment: the response was lost
    r = shell.hb("m1", previous, owned_parts=m1.owned)
    assert r.error_code == ErrorCode.NONE and r.member_epoch == current
    # without owned partitions, or with an epoch older than the previous one: fenced
    assert shell.hb("m1", previous).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    if previous > 1:
        assert shell.hb("m1", previous - 1, owned_parts=set()).error_code == (
            ErrorCode.FENCED_MEMBER_EPOCH
        )
    r = shell.hb("m1", previous, owned_parts=m1.owned | m2.owned)
    assert r.error_code == ErrorCode.FENCED_MEMBER_EPOCH


def test_unknown_member_and_unknown_group() -> None:
    shell = Shell(t=2)
    assert shell.hb("ghost", 3).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    shell.hb("m1", 0, subscribe=["t"])
    assert shell.hb("ghost", 3).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert shell.hb("ghost", -1).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_fenced_member_rejoining_with_epoch_zero_starts_afresh_and_owns_nothing_first() -> None:
    shell = Shell(t=4)
    m1, m2 = Member(shell, "m1", ["t"]), Member(shell, "m2", ["t"])
    settle(m1, m2)
    assert m1.owned
    # m1 was fenced, dropped its partitions and rejoins with the same id (KIP-1082)
    m1.epoch, m1.owned = 0, set()
    r = m1.heartbeat()
    assert r.error_code == ErrorCode.NONE
    settle(m1, m2)
    assert len(m1.owned) == 2 and len(m2.owned) == 2 and not (m1.owned & m2.owned)


def test_group_max_size_reached() -> None:
    shell = Shell(GroupConfig(max_size=2), t=2)
    assert shell.hb("m1", 0, subscribe=["t"]).error_code == ErrorCode.NONE
    assert shell.hb("m2", 0, subscribe=["t"]).error_code == ErrorCode.NONE
    r = shell.hb("m3", 0, subscribe=["t"])
    assert r.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert "m3" not in shell.coord.groups()["g"].members


def test_bad_requests_are_answered_with_codes_and_write_nothing() -> None:
    shell = Shell(t=2)
    assert shell.hb("m1", 0, group="").error_code == ErrorCode.INVALID_GROUP_ID
    assert shell.hb("m1", 0).error_code == ErrorCode.INVALID_REQUEST  # no subscription
    assert shell.hb("", 3).error_code == ErrorCode.INVALID_REQUEST
    assert shell.hb("m1", -2).error_code == ErrorCode.INVALID_REQUEST
    r = shell.hb("m1", 0, subscribe=["t"], owned_parts={("id-t", 0)})
    assert r.error_code == ErrorCode.INVALID_REQUEST
    r = shell.hb("m1", 0, subscribe=["t"], assignor="x" * 1000)
    assert r.error_code == ErrorCode.UNSUPPORTED_ASSIGNOR and len(r.error_message) < 200
    assert shell.log == []


def test_client_may_pick_the_range_assignor() -> None:
    shell = Shell(a=3, b=3)
    ms = [Member(shell, f"m{i}", ["a", "b"], assignor="range") for i in range(2)]
    settle(*ms)
    # range co-partitions: each member gets the same partition numbers of a and b
    for m in ms:
        a = {p for t, p in m.owned if t == "id-a"}
        b = {p for t, p in m.owned if t == "id-b"}
        assert a == b and a
    (desc,) = shell.coord.describe_groups(["g"])
    assert desc.assignor_name == "range"


def test_topic_created_or_grown_while_the_group_runs_is_picked_up() -> None:
    shell = Shell(a=2)
    m1, m2 = Member(shell, "m1", ["a", "b"]), Member(shell, "m2", ["a", "b"])
    settle(m1, m2)
    assert m1.owned | m2.owned == {("id-a", 0), ("id-a", 1)}
    epoch = shell.coord.groups()["g"].group_epoch
    shell.topics = {**shell.topics, **Shell(b=4).topics}  # b created
    assert shell.tick()  # the group epoch moves
    assert shell.coord.groups()["g"].group_epoch == epoch + 1
    settle(m1, m2)
    assert len(m1.owned | m2.owned) == 6
    shell.topics = {**Shell(a=4, b=4).topics}  # a grown
    shell.tick()
    settle(m1, m2)
    assert len(m1.owned | m2.owned) == 8 and len(m1.owned) == 4
    assert shell.tick() == []  # nothing changed: no records
