"""Records and replay (a new coordinator resumes the groups), static membership, the offset
commit check, describe/list/delete, and interop with KIP-848 groups of the same partition."""

from __future__ import annotations

import pytest

from replication.group import GroupCoordinator
from replication.group.classic import (
    FENCED_INSTANCE_ID,
    ClassicGroupManager,
    ClassicGroupState,
    MemberIdentity,
    Protocol,
    is_classic_record,
)
from replication.group.classic.records import GroupValue, MemberValue, decode_value, record
from replication.group.records import decode_key as decode_consumer_key
from storage.errors import CorruptRecordError, ErrorCode
from tests.group.classic.harness import Harness
from tests.group.helpers import Shell

S = ClassicGroupState


def persisted(m: ClassicGroupManager) -> dict[str, GroupValue | None]:
    return {gid: g.persisted for gid, g in m.groups().items()}


def test_record_round_trips_and_corruption_is_an_error() -> None:
    value = GroupValue(
        protocol_type="consumer",
        generation_id=3,
        protocol_name="range",
        leader="m1",
        state=S.STABLE,
        state_timestamp_ms=42,
        members=(
            MemberValue(
                member_id="m1",
                group_instance_id=None,
                client_id="c",
                client_host="/h",
                rebalance_timeout_ms=1,
                session_timeout_ms=2,
                protocols=(Protocol(name="range", metadata=b"\x00\xff"),),
                assignment=b"\x01",
            ),
        ),
    )
    key, data = record("g\u00e9", value)
    assert is_classic_record(key) and data is not None
    assert decode_value(data) == value
    m = ClassicGroupManager()
    m.replay(key, data)
    assert m.groups()["g\u00e9"].state is S.STABLE
    with pytest.raises(CorruptRecordError):
        m.replay(key, data[:-3])
    with pytest.raises(CorruptRecordError):
        m.replay(key[:-1], data)


def test_replay_rebuilds_the_persisted_groups_at_every_state_at_rest() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    assert persisted(h.rebuilt()) == persisted(h.mgr)
    g = h.mgr.groups()["g"]
    assert g.persisted == g.snapshot()
    h.join(a)  # PreparingRebalance: the record still says Stable
    rebuilt = h.rebuilt().groups()["g"]
    assert rebuilt.state is S.STABLE and rebuilt.generation_id == gen
    assert {m.assignment for m in rebuilt.members.values()} == {
        f"assign-{a}".encode(),
        f"assign-{b}".encode(),
    }
    h.join(b)  # CompletingRebalance is written before anyone learns the generation
    rebuilt = h.rebuilt().groups()["g"]
    assert rebuilt.state is S.COMPLETING_REBALANCE and rebuilt.generation_id == gen + 1
    assert rebuilt.leader_id == g.leader_id
    assert persisted(h.rebuilt()) == persisted(h.mgr)


def test_a_new_coordinator_resumes_a_completing_rebalance() -> None:
    """Failover between the JoinGroup answers and the leader's SyncGroup: the new coordinator
    knows the generation and takes the leader's assignment."""
    h = Harness()
    (a, b), gen = h.stable_group(2)
    h.join(a)
    h.join(b)
    h.mgr = h.rebuilt()  # the old coordinator is gone
    assert h.mgr.next_deadline_ms() == 0  # arm the timers now
    h.tick()
    follower = h.sync(b, gen + 1)
    leader = h.sync(a, gen + 1, {a: b"A2", b: b"B2"})
    assert h.sync_answer(follower).assignment == b"B2"
    assert h.sync_answer(leader).assignment == b"A2"
    assert h.mgr.groups()["g"].state is S.STABLE
    assert h.heartbeat(a, gen + 1) == ErrorCode.NONE


def test_loaded_members_get_a_fresh_session_and_silent_ones_expire() -> None:
    h = Harness()
    (a, _), gen = h.stable_group(2)
    h.mgr = h.rebuilt()
    h.tick()
    h.tick(6_000)
    assert h.heartbeat(a, gen) == ErrorCode.NONE
    h.tick(6_000)  # b said nothing for 12 s since the load
    assert set(h.mgr.groups()["g"].members) == {a}


def test_snapshot_records_alone_rebuild_the_groups() -> None:
    h = Harness()
    h.stable_group(2, group="g1")
    h.stable_group(1, group="g2")
    m = ClassicGroupManager()
    for key, value in h.mgr.snapshot_records():
        m.replay(key, value)
    assert persisted(m) == persisted(h.mgr)


def test_a_restarted_static_member_takes_its_place_without_a_rebalance() -> None:
    """KIP-345: the same group.instance.id with a new member id, while Stable and with the
    same protocols, keeps the generation and the assignment; the old id is fenced."""
    h = Harness()
    ha = h.join(instance_id="i-a", client_id="a")
    hb = h.join(instance_id="i-b", client_id="b")
    h.tick_until_answered([ha, hb])
    a, b = h.join_answer(ha).member_id, h.join_answer(hb).member_id
    assert a.startswith("i-a-")
    gen = h.join_answer(ha).generation_id
    h.sync(b, gen, instance_id="i-b")
    h.sync(a, gen, {a: b"A", b: b"B"}, instance_id="i-a")
    restarted = h.join(instance_id="i-b", client_id="b")
    answer = h.join_answer(restarted)
    assert answer.error_code == ErrorCode.NONE and answer.generation_id == gen
    b2 = answer.member_id
    assert b2 != b and h.mgr.groups()["g"].state is S.STABLE
    assert h.sync_answer(h.sync(b2, gen, instance_id="i-b")).assignment == b"B"
    assert h.heartbeat(b, gen, instance_id="i-b") == FENCED_INSTANCE_ID
    assert h.heartbeat(b2, gen, instance_id="i-b") == ErrorCode.NONE
    assert persisted(h.rebuilt()) == persisted(h.mgr)
    # an admin removes a static member by its instance id
    left = h.leave(MemberIdentity(member_id="", group_instance_id="i-b"))
    assert left.members[0].error_code == ErrorCode.NONE
    assert h.mgr.groups()["g"].state is S.PREPARING_REBALANCE


def test_a_static_member_that_does_not_rejoin_keeps_its_place_until_its_session_ends() -> None:
    h = Harness()
    ha = h.join(instance_id="i-a", client_id="a")
    hb = h.join(instance_id="i-b", client_id="b")
    h.tick_until_answered([ha, hb])
    a, b = h.join_answer(ha).member_id, h.join_answer(hb).member_id
    gen = h.join_answer(ha).generation_id
    h.sync(b, gen, instance_id="i-b")
    h.sync(a, gen, {a: b"A", b: b"B"}, instance_id="i-a")
    leader_rejoin = h.join(a, instance_id="i-a", client_id="a")
    while h.answer(leader_rejoin) is None:  # b stays alive, but does not rejoin
        assert h.heartbeat(b, gen, instance_id="i-b") == ErrorCode.REBALANCE_IN_PROGRESS
        h.tick(4_000)
    # the rebalance timeout ends the join phase; the static b keeps its place (a dynamic
    # member would have been removed) and must sync in the new generation
    assert {m.member_id for m in h.join_answer(leader_rejoin).members} == {a, b}


def test_offset_commit_validation_follows_the_generation() -> None:
    h = Harness()
    (a, b), gen = h.stable_group(2)
    v = h.mgr.validate_offset_commit
    assert v("g", a, gen) == ErrorCode.NONE
    assert v("g", a, gen - 1) == ErrorCode.ILLEGAL_GENERATION
    assert v("g", "stranger", gen) == ErrorCode.UNKNOWN_MEMBER_ID
    assert v("g", "", -1) == ErrorCode.UNKNOWN_MEMBER_ID  # admin commit to a live group
    assert v("not-classic", "", -1) is None
    h.join(a)
    h.join(b)  # CompletingRebalance: a member of the new generation must wait
    assert v("g", a, gen + 1) == ErrorCode.REBALANCE_IN_PROGRESS
    assert v("g", a, gen + 1, transactional=True) == ErrorCode.NONE
    h.leave(MemberIdentity(member_id=a), MemberIdentity(member_id=b))
    assert v("g", "", -1) == ErrorCode.NONE  # Empty: admin commits are fine


def test_describe_list_and_delete() -> None:
    h = Harness()
    (a, b), _ = h.stable_group(2)
    (desc, missing) = h.mgr.describe_groups(["g", "nope"])
    assert desc.state is S.STABLE and desc.protocol_type == "consumer"
    assert desc.protocol_data == "range"
    assert {m.member_id: m.assignment for m in desc.members} == {
        a: f"assign-{a}".encode(),
        b: f"assign-{b}".encode(),
    }
    assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND and missing.state is S.DEAD
    assert [(g.group_id, g.state) for g in h.mgr.list_groups()] == [("g", S.STABLE)]
    code, _ = h.mgr.delete_group("g")
    assert code == ErrorCode.NON_EMPTY_GROUP
    h.leave(MemberIdentity(member_id=a), MemberIdentity(member_id=b))
    code, fx = h.mgr.delete_group("g")
    h.apply(fx)
    assert code == ErrorCode.NONE and not h.mgr.has_group("g")
    assert h.rebuilt().groups() == {}
    assert h.mgr.delete_group("g")[0] == ErrorCode.GROUP_ID_NOT_FOUND


# --- KIP-848 interop ------------------------------------------------------------------------


def test_classic_requests_for_a_consumer_group_with_members_are_refused() -> None:
    kip848 = Shell(a=2)
    kip848.hb("m1", 0, subscribe=["a"])
    h = Harness(consumer_groups=kip848.coord.groups().get)
    assert h.join_answer(h.join()).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.sync_answer(h.sync("m1", 1)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.heartbeat("m1", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.leave(MemberIdentity(member_id="m1")).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.log == [] and not h.mgr.has_group("g")


def test_an_empty_consumer_group_becomes_a_classic_group_and_keeps_its_offsets() -> None:
    kip848 = Shell(a=2)
    r = kip848.hb("m1", 0, subscribe=["a"])
    kip848.offset_commit("m1", r.member_epoch, {("a", 0): 7})
    kip848.hb("m1", -1)  # leaves: an empty consumer group
    assert kip848.coord.groups()["g"].has_metadata
    h = Harness(kip848=kip848)
    before = len(h.log)
    first = h.join(client_id="c")
    consumer_records = [(k, v) for k, v in h.log[before:] if not is_classic_record(k)]
    assert consumer_records and all(v is None for _, v in consumer_records)
    assert {decode_consumer_key(k).group_id for k, _ in consumer_records} == {"g"}
    assert not kip848.coord.groups()["g"].has_metadata
    assert kip848.coord.groups()["g"].offsets[("a", 0)].offset == 7
    assert h.join_answer(first).error_code != ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_an_empty_classic_group_is_released_for_a_consumer_group() -> None:
    h = Harness()
    (a,), _ = h.stable_group(1)
    assert h.mgr.take_over_empty_group("g").records == ()  # not empty: kept
    h.leave(MemberIdentity(member_id=a))
    fx = h.apply(h.mgr.take_over_empty_group("g"))
    assert fx.records == (record("g", None),)
    assert not h.mgr.has_group("g")
    # the shell routes by is_classic_record: the KIP-848 coordinator refuses these records
    assert all(is_classic_record(key) for key, _ in h.log)
    with pytest.raises(CorruptRecordError):
        GroupCoordinator(Shell().config).replay(*h.log[-1])


def test_one_partition_hosts_both_kinds_and_a_new_leader_rebuilds_both_by_routing() -> None:
    """The integration the package docstring describes: one log for the KIP-848 coordinator
    and the classic manager; classic offset commits pass `validate_offset_commit`, then go
    through the KIP-848 offsets path as admin commits; a failover replays the one log, each
    record to its coordinator."""
    kip848 = Shell(a=2)
    h = Harness(kip848=kip848)  # one partition, one log
    kip848.hb("m1", 0, group="modern", subscribe=["a"])
    (a, _), gen = h.stable_group(2, group="classic")
    assert h.mgr.validate_offset_commit("classic", a, gen) == ErrorCode.NONE
    committed = kip848.offset_commit("", -1, {("a", 0): 42}, group="classic")
    assert committed.partitions[0].error_code == ErrorCode.NONE
    assert h.mgr.validate_offset_commit("modern", "m1", 1) is None  # KIP-848's to check

    fresh_kip848 = GroupCoordinator(kip848.config)
    fresh_classic = ClassicGroupManager(consumer_groups=fresh_kip848.groups().get)
    for key, value in kip848.log:
        (fresh_classic if is_classic_record(key) else fresh_kip848).replay(key, value)
    assert persisted(fresh_classic) == persisted(h.mgr)
    assert set(fresh_kip848.groups()) == {"modern", "classic"}  # classic: its offsets only
    assert fresh_kip848.groups()["classic"].offsets[("a", 0)].offset == 42
    assert not fresh_kip848.groups()["classic"].has_metadata
    assert fresh_kip848.groups()["modern"].members.keys() == {"m1"}
