"""Property: the records a sequence of requests produced rebuild exactly the coordinator's
state: replayed in order (a failover), replayed as a compacted log (latest value per key, in
order of last write, tombstones dropped), and from ``snapshot_records``. Along the way the
group invariants hold: no partition is held by two members, the target assignment is
disjoint, epochs are ordered."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replication.group import (
    GroupConfig,
    GroupCoordinator,
    HeartbeatRequest,
    MemberState,
    Record,
)
from replication.group.state import Group, partitions_of
from tests.group.helpers import Member, Shell, topics

MEMBERS = 4
GROUPS = ("g", "h")

op = st.one_of(
    st.tuples(st.just("hb"), st.integers(0, MEMBERS - 1), st.sampled_from(GROUPS)),
    st.tuples(st.just("lazy"), st.integers(0, MEMBERS - 1), st.sampled_from(GROUPS)),
    st.tuples(st.just("leave"), st.integers(0, MEMBERS - 1), st.sampled_from(GROUPS)),
    st.tuples(st.just("crash"), st.integers(0, MEMBERS - 1), st.sampled_from(GROUPS)),
    st.tuples(st.just("commit"), st.integers(0, MEMBERS - 1), st.sampled_from(GROUPS)),
    st.tuples(st.just("admin"), st.integers(0, 5), st.sampled_from(GROUPS)),
    st.tuples(st.just("tick"), st.integers(0, 4000), st.sampled_from(GROUPS)),
    st.tuples(st.just("topics"), st.integers(0, 3), st.sampled_from(GROUPS)),
    st.tuples(st.just("delete"), st.integers(0, 0), st.sampled_from(GROUPS)),
    st.tuples(st.just("failover"), st.integers(0, 0), st.sampled_from(GROUPS)),
    st.tuples(st.just("lost_append"), st.integers(0, MEMBERS - 1), st.sampled_from(GROUPS)),
)

TOPIC_VERSIONS = [
    {"a": 3},
    {"a": 3, "b": 2},
    {"a": 5, "b": 2},
    {"b": 2},
]


def compacted(log: list[Record]) -> list[Record]:
    last: dict[bytes, tuple[int, bytes | None]] = {}
    for i, (k, v) in enumerate(log):
        last[k] = (i, v)
    return [(k, v) for k, (_, v) in sorted(last.items(), key=lambda kv: kv[1][0]) if v is not None]


def rebuilt(config: GroupConfig, records: list[Record]) -> dict[str, Group]:
    c = GroupCoordinator(config)
    for k, v in records:
        c.replay(k, v)
    return dict(c.groups())


def check_invariants(coord: GroupCoordinator) -> None:
    for g in coord.groups().values():
        assert g.group_epoch >= g.assignment_epoch
        held: set[tuple[str, int]] = set()
        for m in g.members.values():
            mine = partitions_of(m.assigned) | partitions_of(m.pending_revocation)
            assert not (held & mine), f"{held & mine} held twice in {g.group_id}"
            held |= mine
            assert m.member_epoch <= g.assignment_epoch
            if m.state is MemberState.UNREVOKED_PARTITIONS:
                assert m.pending_revocation
            else:
                assert not m.pending_revocation
        targets: set[tuple[str, int]] = set()
        for a in g.target.values():
            assert not (targets & partitions_of(a))
            targets |= partitions_of(a)
        assert set(g.target) <= set(g.members)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=1, max_size=60))
def test_replaying_the_records_rebuilds_exactly_the_state(ops: list[tuple[str, int, str]]) -> None:
    config = GroupConfig(
        session_timeout_ms=5000,
        offsets_retention_ms=8000,
        offsets_retention_check_interval_ms=1000,
    )
    shell = Shell(config)
    shell.topics = topics(**TOPIC_VERSIONS[0])
    members = {
        (g, i): Member(shell, f"m{i}", ["a", "b"] if i % 2 else ["a"], group=g)
        for g in GROUPS
        for i in range(MEMBERS)
    }
    offset = 0
    for kind, i, g in ops:
        m = members.get((g, i))
        if kind == "hb" and m is not None:
            m.heartbeat()
        elif kind == "lazy" and m is not None:  # heartbeats without revoking anything
            shell.hb(m.member_id, m.epoch, group=g, owned_parts=m.owned)
        elif kind == "leave" and m is not None and m.epoch > 0:
            m.leave()
            m.epoch = 0
        elif kind == "crash" and m is not None:  # forgets everything, rejoins later
            m.epoch, m.owned = 0, set()
        elif kind == "commit" and m is not None:
            offset += 1
            shell.offset_commit(m.member_id, m.epoch, {("a", 0): offset}, group=g)
        elif kind == "admin":
            offset += 1
            shell.offset_commit("", -1, {("b", i % 2): offset}, group=g)
        elif kind == "tick":
            shell.tick(i)
        elif kind == "topics":
            shell.topics = topics(**TOPIC_VERSIONS[i])
        elif kind == "delete":
            shell.commit(shell.coord.delete_groups([g], shell.now).records)
        elif kind == "failover":
            shell.coord = shell.replayed()
        elif kind == "lost_append" and m is not None:  # the write's records never commit
            shell.coord.heartbeat(
                HeartbeatRequest(
                    group_id=g,
                    member_id=m.member_id,
                    member_epoch=m.epoch,
                    subscribed_topic_names=tuple(m.subscribe),
                ),
                shell.topics,
                shell.now,
            )
        check_invariants(shell.coord)
        live = dict(shell.coord.groups())
        assert rebuilt(config, shell.log) == live
    live = dict(shell.coord.groups())
    assert rebuilt(config, compacted(shell.log)) == live
    assert rebuilt(config, shell.coord.snapshot_records()) == live
