"""Session and rebalance timeouts through tick/next_deadline_ms; timers after a failover."""

from __future__ import annotations

from replication.group import GroupConfig, GroupCoordinator, MemberState
from tests.group.helpers import Member, Shell


def test_a_member_that_stops_heartbeating_expires_after_the_session_timeout() -> None:
    shell = Shell(GroupConfig(session_timeout_ms=3000), t=4)
    m1, m2 = Member(shell, "m1", ["t"]), Member(shell, "m2", ["t"])
    for _ in range(3):
        m1.heartbeat()
        m2.heartbeat()
    assert shell.coord.next_deadline_ms() == 0  # never ticked: the retention check is due
    shell.tick()
    assert shell.coord.next_deadline_ms() == shell.now + 3000
    shell.tick(2999)
    assert "m1" in shell.coord.groups()["g"].members
    m2.heartbeat()
    shell.tick(1)  # m1 silent for 3000 ms
    assert set(shell.coord.groups()["g"].members) == {"m2"}
    for _ in range(2):
        m2.heartbeat()
    assert len(m2.owned) == 4


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_removed() -> None:
    shell = Shell(GroupConfig(session_timeout_ms=60_000), t=4)
    slow = Member(shell, "slow", ["t"], rebalance_timeout_ms=2000)
    slow.heartbeat()
    m2 = Member(shell, "m2", ["t"])
    m2.heartbeat()
    r = shell.hb("slow", slow.epoch, owned_parts=slow.owned)  # told to revoke, does not
    assert shell.coord.groups()["g"].members["slow"].state is MemberState.UNREVOKED_PARTITIONS
    assert r.member_epoch == slow.epoch
    for _ in range(3):  # keeps heartbeating but keeps claiming the partitions
        shell.tick(600)
        shell.hb("slow", slow.epoch, owned_parts=slow.owned)
    assert "slow" in shell.coord.groups()["g"].members
    shell.tick(300)  # 2100 ms since told to revoke
    assert "slow" not in shell.coord.groups()["g"].members
    m2.heartbeat()
    assert len(m2.owned) == 4


def test_after_failover_loaded_members_get_a_fresh_session_timeout() -> None:
    shell = Shell(GroupConfig(session_timeout_ms=3000), t=2)
    Member(shell, "m1", ["t"]).heartbeat()
    fresh = GroupCoordinator(shell.config)
    for k, v in shell.log:
        fresh.replay(k, v)
    assert fresh.next_deadline_ms() == 0  # timers to arm: tick now
    assert fresh.tick(50_000, shell.topics) == []
    assert fresh.next_deadline_ms() == 53_000
    assert fresh.tick(52_999, shell.topics) == []
    assert fresh.tick(53_000, shell.topics) != []


def test_next_deadline_is_none_without_groups() -> None:
    assert GroupCoordinator(GroupConfig()).next_deadline_ms() is None
