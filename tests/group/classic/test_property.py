"""Property: over random interleavings of JoinGroup, SyncGroup, Heartbeat, LeaveGroup, time and
coordinator failovers, by dynamic and static members that behave as clients do (they keep
what the coordinator last told them and rejoin after an error), the invariants hold:

* every request is answered at most once, and a request not yet answered is parked on a
  member of the group (none is lost);
* one leader and one protocol per generation, across failovers too; the generation never
  decreases, and never falls below one a member was told;
* Stable only when every member holds the leader's assignment of this generation; at rest
  (Empty, CompletingRebalance, Stable) the group is exactly what its record says;
* replaying the log rebuilds exactly the persisted groups (a failover replays it too);
* a SyncGroup answered without error hands out what the leader assigned to that member.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replication.group.classic import (
    FENCED_INSTANCE_ID,
    MEMBER_ID_REQUIRED,
    ClassicGroupConfig,
    ClassicGroupState,
    JoinGroupResponse,
    MemberIdentity,
    SyncGroupResponse,
)
from storage.errors import ErrorCode
from tests.group.classic.harness import Harness, protocols

S = ClassicGroupState
CLIENTS = 5
STATIC = {0, 1}  # clients with a group.instance.id
PROTOCOL_SETS = [("range",), ("range", "roundrobin"), ("roundrobin", "range")]


def identity(member_id: str) -> str:
    """Who a member is: its group.instance.id if static (Kafka's static member ids are
    ``<instance id>-<uuid>``), else its member id."""
    return member_id.rsplit("-", 1)[0] if member_id.startswith("instance-") else member_id


@dataclass
class Client:
    index: int
    member_id: str = ""
    generation: int = -1
    leader: str = ""
    members: tuple[str, ...] = ()
    protos: tuple[str, ...] = ("range",)
    synced: int = -1  # the generation whose assignment it holds
    must_rejoin: bool = True
    join_handles: set[int] = field(default_factory=set)
    sync_handles: set[int] = field(default_factory=set)

    @property
    def instance_id(self) -> str | None:
        return f"instance-{self.index}" if self.index in STATIC else None


class Model:
    def __init__(self) -> None:
        self.h = Harness(
            ClassicGroupConfig(initial_rebalance_delay_ms=1_000, min_session_timeout_ms=1_000)
        )
        self.clients = [Client(i) for i in range(CLIENTS)]
        self.seen = 0  # answers processed
        self.leader_of: dict[int, tuple[str, str | None]] = {}  # generation -> (leader, proto)
        self.members_of: dict[int, frozenset[str]] = {}
        self.assigned: dict[int, dict[str, bytes]] = {}  # generation -> leader's assignment
        self.max_told = 0
        self.last_generation = 0

    # --- client behaviour -----------------------------------------------------------------

    def step(self, op: tuple[str, int, int]) -> None:
        kind, i, arg = op
        c = self.clients[i]
        h = self.h
        if kind == "act":  # what a client does next on its own
            if c.join_handles or c.sync_handles:
                kind, arg = "tick", 1  # it waits
            elif c.must_rejoin or not c.member_id or c.generation < 0:
                kind, arg = "join", PROTOCOL_SETS.index(c.protos)
            elif c.synced != c.generation:
                kind = "sync"
            else:
                kind = "hb"
        if kind == "join":
            c.protos = PROTOCOL_SETS[arg % len(PROTOCOL_SETS)]
            handle = h.join(
                c.member_id,
                protos=protocols(*c.protos),
                instance_id=c.instance_id,
                client_id=f"c{i}",
                session_ms=5_000,
                rebalance_ms=8_000 + 1_000 * (arg % 3),
            )
            c.join_handles.add(handle)
        elif kind == "sync" and c.generation >= 0:
            assignments = None
            if c.leader == c.member_id:
                assignments = {m: f"{c.generation}:{m}".encode() for m in c.members}
                if c.generation in self.members_of:
                    self.assigned.setdefault(c.generation, assignments)
            c.sync_handles.add(
                h.sync(c.member_id, c.generation, assignments, instance_id=c.instance_id)
            )
        elif kind == "hb" and c.member_id:
            code = h.heartbeat(c.member_id, c.generation, instance_id=c.instance_id)
            if code in (ErrorCode.UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID):
                c.member_id, c.generation = "", -1
            c.must_rejoin = code != ErrorCode.NONE
        elif kind == "leave" and c.member_id:
            h.leave(MemberIdentity(member_id=c.member_id, group_instance_id=c.instance_id))
            c.member_id, c.generation = "", -1
        elif kind == "kick" and c.instance_id is not None:  # an admin removes a static member
            h.leave(MemberIdentity(member_id="", group_instance_id=c.instance_id))
        elif kind == "tick":
            h.tick(arg * 500)
        elif kind == "failover":
            h.apply(h.mgr.abandon())
            h.mgr = h.rebuilt()
        self.absorb_answers()

    def absorb_answers(self) -> None:
        for c in self.clients:
            for handle in sorted(c.join_handles & self.h.answers.keys()):
                c.join_handles.discard(handle)
                self.on_join(c, self.h.join_answer(handle))
            for handle in sorted(c.sync_handles & self.h.answers.keys()):
                c.sync_handles.discard(handle)
                self.on_sync(c, self.h.sync_answer(handle))

    def on_join(self, c: Client, r: JoinGroupResponse) -> None:
        c.must_rejoin = r.error_code != ErrorCode.NONE
        if r.error_code == ErrorCode.NONE:
            # KIP-345: a restarted static member keeps its place (and leadership, and
            # assignment) under a new member id: identities are instance ids
            sent = self.assigned.get(r.generation_id, {})
            for old in [m for m in sent if identity(m) == identity(r.member_id)]:
                sent.setdefault(r.member_id, sent[old])
            c.member_id, c.generation, c.leader = r.member_id, r.generation_id, r.leader
            c.members = tuple(m.member_id for m in r.members)
            leader = identity(r.leader)
            expected = self.leader_of.setdefault(r.generation_id, (leader, r.protocol_name))
            assert expected == (leader, r.protocol_name), "two leaders in one generation"
            if r.members:
                members = frozenset(identity(m) for m in c.members)
                assert self.members_of.setdefault(r.generation_id, members) == members
            self.max_told = max(self.max_told, r.generation_id)
        elif r.error_code == MEMBER_ID_REQUIRED:
            c.member_id = r.member_id
        elif r.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID):
            c.member_id, c.generation = "", -1

    def on_sync(self, c: Client, r: SyncGroupResponse) -> None:
        c.must_rejoin = r.error_code != ErrorCode.NONE
        if r.error_code == ErrorCode.NONE:
            c.synced = c.generation
            sent = self.assigned.get(c.generation)
            if sent is not None:
                assert r.assignment == sent.get(c.member_id, b""), "not the leader's assignment"
        elif r.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID):
            c.member_id, c.generation = "", -1

    # --- invariants -----------------------------------------------------------------------

    def check(self) -> None:
        mgr = self.h.mgr
        parked = self.h.parked()
        held: set[object] = set()
        for g in mgr.groups().values():
            for m in g.members.values():
                held.update(x for x in (m.join_handle, m.sync_handle) if x is not None)
        assert parked == held, "a request is neither answered nor parked on a member"
        group = mgr.groups().get("g")
        if group is None:
            return
        counts: dict[str, int] = {}
        for m in group.members.values():
            for p in m.protocols:
                counts[p.name] = counts.get(p.name, 0) + 1
        assert group.protocol_counts == counts
        assert group.awaiting_join_count == sum(m.awaiting_join for m in group.members.values())
        assert group.generation_id >= self.last_generation, "the generation went back"
        assert group.generation_id >= self.max_told, "a generation a member knows was lost"
        self.last_generation = group.generation_id
        if group.state in (S.COMPLETING_REBALANCE, S.STABLE):
            assert group.leader_id in group.members
            leader = identity(group.leader_id or "")
            assert self.leader_of.get(group.generation_id, (leader, None))[0] == leader
        if group.state in (S.EMPTY, S.COMPLETING_REBALANCE, S.STABLE):
            assert group.snapshot() == group.persisted, "a group at rest differs from its record"
        if group.state is S.STABLE:
            sent = self.assigned.get(group.generation_id)
            if sent is not None:  # (unknown only if a failover lost the leader's view)
                for m in group.members.values():
                    assert m.assignment == sent.get(m.member_id, b"")
        rebuilt = self.h.rebuilt().groups()
        assert {gid: g.persisted for gid, g in rebuilt.items()} == {
            gid: g.persisted for gid, g in mgr.groups().items()
        }, "the log does not rebuild the persisted groups"


act = st.tuples(st.just("act"), st.integers(0, CLIENTS - 1), st.just(0))
op = st.one_of(
    act,
    act,
    act,
    act,
    st.tuples(st.just("tick"), st.just(0), st.integers(0, 4)),
    st.tuples(st.just("join"), st.integers(0, CLIENTS - 1), st.integers(0, 5)),
    st.tuples(st.just("sync"), st.integers(0, CLIENTS - 1), st.just(0)),
    st.tuples(st.just("hb"), st.integers(0, CLIENTS - 1), st.just(0)),
    st.tuples(st.just("leave"), st.integers(0, CLIENTS - 1), st.just(0)),
    st.tuples(st.just("kick"), st.sampled_from(sorted(STATIC)), st.just(0)),
    st.tuples(st.just("tick"), st.just(0), st.integers(0, 24)),
    st.tuples(st.just("failover"), st.just(0), st.just(0)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=20, max_size=150))
def test_invariants_hold_over_random_interleavings(ops: list[tuple[str, int, int]]) -> None:
    model = Model()
    for o in ops:
        model.step(o)
        model.check()


def test_a_well_behaved_group_converges_to_stable() -> None:
    """Clients that rejoin and sync when told converge to one Stable generation."""
    model = Model()
    for i in range(CLIENTS):
        model.step(("join", i, 0))
    for _ in range(200):
        model.step(("tick", 0, 1))
        for c in model.clients:
            if c.join_handles or c.sync_handles:
                continue
            if c.generation < 0 or not c.member_id:
                model.step(("join", c.index, 0))
            else:
                model.step(("sync", c.index, 0))
                code = model.h.heartbeat(c.member_id, c.generation, instance_id=c.instance_id)
                if code != ErrorCode.NONE:
                    model.step(("join", c.index, 0))
        model.check()
        group = model.h.mgr.groups()["g"]
        if group.state is S.STABLE and len(group.members) == CLIENTS:
            break
    group = model.h.mgr.groups()["g"]
    assert group.state is S.STABLE and len(group.members) == CLIENTS
