"""OffsetCommit / OffsetFetch / DeleteGroups and offsets retention."""

from __future__ import annotations

from replication.group import GroupConfig, GroupState, OffsetFetchRequest
from storage.errors import ErrorCode
from tests.group.helpers import Member, Shell


def fetched(shell: Shell, group: str = "g") -> dict[tuple[str, int], int]:
    r = shell.coord.fetch_offsets(OffsetFetchRequest(group_id=group))
    return {(o.topic, o.partition): o.offset for o in r.offsets}


def test_member_commit_with_its_epoch_is_stored_as_next_offset_with_epoch_and_metadata() -> None:
    shell = Shell(t=2)
    m = Member(shell, "m1", ["t"])
    m.heartbeat()
    r = shell.offset_commit("m1", m.epoch, {("t", 0): 42})
    assert r.error_code == ErrorCode.NONE
    assert [p.error_code for p in r.partitions] == [ErrorCode.NONE]
    f = shell.coord.fetch_offsets(OffsetFetchRequest(group_id="g", partitions=(("t", 0), ("t", 1))))
    assert [(o.offset, o.error_code) for o in f.offsets] == [
        (42, ErrorCode.NONE),
        (-1, ErrorCode.NONE),
    ]
    assert shell.coord.groups()["g"].offsets[("t", 0)].commit_timestamp_ms == shell.now


def test_commit_with_an_older_epoch_is_stale_and_from_an_unknown_member_is_rejected() -> None:
    shell = Shell(t=2)
    m1, m2 = Member(shell, "m1", ["t"]), Member(shell, "m2", ["t"])
    for _ in range(4):
        m1.heartbeat()
        m2.heartbeat()
    old = shell.coord.groups()["g"].members["m1"].previous_member_epoch
    r = shell.offset_commit("m1", old, {("t", 0): 5})
    assert r.error_code == ErrorCode.STALE_MEMBER_EPOCH
    assert r.partitions[0].error_code == ErrorCode.STALE_MEMBER_EPOCH
    assert shell.offset_commit("zombie", 1, {("t", 0): 5}).error_code == (
        ErrorCode.UNKNOWN_MEMBER_ID
    )
    assert fetched(shell) == {}


def test_a_member_must_commit_with_offset_commit_v9_or_later_an_admin_need_not() -> None:
    """Kafka's ConsumerGroup.validateOffsetCommit: v8 and older have no member epoch, so a
    member of a consumer group (KIP-848) gets UNSUPPORTED_VERSION (found by kraft interop diff)."""
    shell = Shell(t=2)
    m = Member(shell, "m1", ["t"])
    m.heartbeat()
    old = shell.offset_commit("m1", m.epoch, {("t", 0): 4}, before_v9=True)
    assert old.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert fetched(shell) == {}
    assert shell.offset_commit("m1", m.epoch, {("t", 0): 4}).error_code == ErrorCode.NONE
    m.leave()
    assert shell.offset_commit("", -1, {("t", 0): 9}, before_v9=True).error_code == ErrorCode.NONE


def test_commit_from_a_member_removed_by_session_timeout_is_rejected() -> None:
    shell = Shell(GroupConfig(session_timeout_ms=1000), t=2)
    m1, m2 = Member(shell, "m1", ["t"]), Member(shell, "m2", ["t"])
    m1.heartbeat()
    m2.heartbeat()
    shell.tick(600)
    m2.heartbeat()
    shell.tick(600)  # m1 silent for 1200 ms: gone
    assert "m1" not in shell.coord.groups()["g"].members
    assert shell.offset_commit("m1", m1.epoch, {("t", 0): 9}).error_code == (
        ErrorCode.UNKNOWN_MEMBER_ID
    )


def test_admin_commit_is_allowed_only_to_an_empty_group() -> None:
    shell = Shell(t=2)
    assert shell.offset_commit("", -1, {("t", 0): 3}).error_code == ErrorCode.NONE  # creates
    assert fetched(shell) == {("t", 0): 3}
    assert shell.coord.list_groups()[0].state is GroupState.EMPTY
    m = Member(shell, "m1", ["t"])
    m.heartbeat()
    assert shell.offset_commit("", -1, {("t", 0): 0}).error_code == ErrorCode.NON_EMPTY_GROUP
    m.leave()
    assert shell.offset_commit("", -1, {("t", 0): 0}).error_code == ErrorCode.NONE
    assert fetched(shell) == {("t", 0): 0}


def test_bad_partitions_get_their_own_error_and_the_rest_commit() -> None:
    shell = Shell(t=2)
    r = shell.offset_commit("", -1, {("t", 0): -5, ("t", 1): 7})
    assert [p.error_code for p in r.partitions] == [ErrorCode.INVALID_OFFSET, ErrorCode.NONE]
    assert fetched(shell) == {("t", 1): 7}


def test_fetch_checks_the_member_epoch_when_given() -> None:
    shell = Shell(t=2)
    m = Member(shell, "m1", ["t"])
    m.heartbeat()
    ok = OffsetFetchRequest(group_id="g", member_id="m1", member_epoch=m.epoch)
    assert shell.coord.fetch_offsets(ok).error_code == ErrorCode.NONE
    stale = OffsetFetchRequest(group_id="g", member_id="m1", member_epoch=m.epoch + 1)
    assert shell.coord.fetch_offsets(stale).error_code == ErrorCode.STALE_MEMBER_EPOCH
    gone = OffsetFetchRequest(group_id="g", member_id="x", member_epoch=1)
    assert shell.coord.fetch_offsets(gone).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_delete_groups_needs_an_existing_empty_group_and_removes_offsets() -> None:
    shell = Shell(t=2)
    m = Member(shell, "m1", ["t"])
    m.heartbeat()
    shell.offset_commit("m1", m.epoch, {("t", 0): 4})
    r = shell.coord.delete_groups(["g", "nope"], shell.now)
    assert r.response.results == {
        "g": ErrorCode.NON_EMPTY_GROUP,
        "nope": ErrorCode.GROUP_ID_NOT_FOUND,
    }
    assert r.records == []
    m.leave()
    r = shell.coord.delete_groups(["g"], shell.now)
    assert r.response.results == {"g": ErrorCode.NONE}
    shell.commit(r.records)
    assert shell.coord.groups() == {} and shell.coord.list_groups() == []
    assert shell.replayed().groups() == {}


def test_offsets_of_an_empty_group_expire_after_retention_then_the_group_goes() -> None:
    cfg = GroupConfig(offsets_retention_ms=10_000, offsets_retention_check_interval_ms=1_000)
    shell = Shell(cfg, t=2)
    m = Member(shell, "m1", ["t"])
    m.heartbeat()
    shell.offset_commit("m1", m.epoch, {("t", 0): 4})
    for _ in range(12):  # a live member subscribed to t keeps its offsets
        shell.tick(1_000)
        m.heartbeat()
    assert fetched(shell) == {("t", 0): 4}
    m.leave()
    shell.tick(1_000)  # offset committed 13 s ago and the group is empty: expired
    assert fetched(shell) == {}
    assert "g" not in shell.coord.groups()
    assert shell.replayed().groups() == shell.coord.groups()


def test_offsets_younger_than_retention_survive_an_empty_group() -> None:
    cfg = GroupConfig(offsets_retention_ms=10_000, offsets_retention_check_interval_ms=1_000)
    shell = Shell(cfg, t=2)
    shell.offset_commit("", -1, {("t", 0): 4})
    shell.tick(5_000)
    assert fetched(shell) == {("t", 0): 4}
    assert shell.coord.next_deadline_ms() is not None
    shell.tick(5_001)
    assert fetched(shell) == {}
