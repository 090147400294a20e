"""A minimal shell for the classic group manager: effects' records go to an in-memory log
(committed at once, as after acks=all), replies are kept by handle and checked to come once."""

from __future__ import annotations

from collections.abc import Sequence

from replication.group.classic import (
    MEMBER_ID_REQUIRED,
    ClassicGroupConfig,
    ClassicGroupManager,
    ConsumerGroupLookup,
    Effects,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberIdentity,
    Protocol,
    Record,
    Response,
    SyncGroupAssignment,
    SyncGroupRequest,
    SyncGroupResponse,
    is_classic_record,
)
from tests.group.helpers import Shell

RANGE = (Protocol(name="range", metadata=b"sub"),)


def protocols(*names: str) -> tuple[Protocol, ...]:
    return tuple(Protocol(name=n, metadata=f"{n}-meta".encode()) for n in names)


class Harness:
    def __init__(
        self,
        config: ClassicGroupConfig | None = None,
        consumer_groups: ConsumerGroupLookup | None = None,
        *,
        kip848: Shell | None = None,
    ) -> None:
        """``kip848``: a KIP-848 coordinator's shell sharing the partition (its log; the
        records that are not classic are replayed into it)."""
        self.config = config or ClassicGroupConfig()
        self.kip848 = kip848
        if kip848 is not None:
            consumer_groups = kip848.coord.groups().get
        self.consumer_groups = consumer_groups
        self.mgr = ClassicGroupManager(self.config, consumer_groups=consumer_groups)
        self.log: list[Record] = [] if kip848 is None else kip848.log
        self.now = 1_000
        self.answers: dict[int, Response] = {}
        self.issued = 0
        self.uuids = 0

    # --- plumbing ----------------------------------------------------------------------------

    def apply(self, fx: Effects) -> Effects:
        for key, value in fx.records:
            self.log.append((key, value))
            if is_classic_record(key):
                self.mgr.replay(key, value)  # its own record: changes nothing
            elif self.kip848 is not None:
                self.kip848.coord.replay(key, value)
        for reply in fx.replies:
            assert isinstance(reply.handle, int)
            assert reply.handle not in self.answers, f"handle {reply.handle} answered twice"
            assert reply.handle < self.issued
            self.answers[reply.handle] = reply.response
        return fx

    def handle(self) -> int:
        self.issued += 1
        return self.issued - 1

    def answer(self, handle: int) -> Response | None:
        return self.answers.get(handle)

    def join_answer(self, handle: int) -> JoinGroupResponse:
        a = self.answers[handle]
        assert isinstance(a, JoinGroupResponse)
        return a

    def sync_answer(self, handle: int) -> SyncGroupResponse:
        a = self.answers[handle]
        assert isinstance(a, SyncGroupResponse)
        return a

    def parked(self) -> set[int]:
        return set(range(self.issued)) - set(self.answers)

    def tick(self, advance_ms: int = 0) -> Effects:
        self.now += advance_ms
        return self.apply(self.mgr.tick(self.now))

    def tick_until_quiet(self, until_ms: int) -> None:
        """Tick at every deadline up to ``until_ms`` (as a shell sleeping on deadlines)."""
        for _ in range(10_000):
            deadline = self.mgr.next_deadline_ms()
            if deadline is None or deadline > until_ms:
                break
            self.now = max(self.now, deadline)
            self.apply(self.mgr.tick(self.now))
        self.now = max(self.now, until_ms)
        self.apply(self.mgr.tick(self.now))

    def tick_until_answered(self, handles: Sequence[int], limit_ms: int = 600_000) -> None:
        """Tick at each next deadline until every handle is answered (a member that waits
        on a parked JoinGroup does not heartbeat)."""
        end = self.now + limit_ms
        while not all(h in self.answers for h in handles):
            deadline = self.mgr.next_deadline_ms()
            assert deadline is not None and deadline <= end, "nothing left to wait for"
            self.now = max(self.now, deadline)
            self.apply(self.mgr.tick(self.now))

    def rebuilt(self) -> ClassicGroupManager:
        m = ClassicGroupManager(self.config, consumer_groups=self.consumer_groups)
        for key, value in self.log:
            if is_classic_record(key):
                m.replay(key, value)
        return m

    # --- requests ----------------------------------------------------------------------------

    def join(
        self,
        member_id: str = "",
        *,
        group: str = "g",
        protos: Sequence[Protocol] = RANGE,
        session_ms: int = 10_000,
        rebalance_ms: int = 30_000,
        instance_id: str | None = None,
        client_id: str = "client",
        api_version: int = 9,
        protocol_type: str = "consumer",
    ) -> int:
        h = self.handle()
        self.uuids += 1
        req = JoinGroupRequest(
            group_id=group,
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            member_id=member_id,
            group_instance_id=instance_id,
            protocol_type=protocol_type,
            protocols=tuple(protos),
            client_id=client_id,
            client_host="/127.0.0.1",
            api_version=api_version,
        )
        self.apply(self.mgr.join_group(req, h, self.now, new_member_uuid=f"u{self.uuids}"))
        return h

    def new_member(self, group: str = "g", **kw: object) -> tuple[str, int]:
        """KIP-394: a first JoinGroup gets MEMBER_ID_REQUIRED; the second one parks."""
        first = self.join(group=group, **kw)  # type: ignore[arg-type]
        got = self.join_answer(first)
        assert got.error_code == MEMBER_ID_REQUIRED, got
        return got.member_id, self.join(got.member_id, group=group, **kw)  # type: ignore[arg-type]

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        group: str = "g",
        instance_id: str | None = None,
    ) -> int:
        h = self.handle()
        req = SyncGroupRequest(
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance_id,
            protocol_type="consumer",
            assignments=tuple(
                SyncGroupAssignment(member_id=m, assignment=a)
                for m, a in (assignments or {}).items()
            ),
        )
        self.apply(self.mgr.sync_group(req, h, self.now))
        return h

    def heartbeat(
        self, member_id: str, generation: int, *, group: str = "g", instance_id: str | None = None
    ) -> int:
        h = self.handle()
        req = HeartbeatRequest(
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance_id,
        )
        self.apply(self.mgr.heartbeat(req, h, self.now))
        answer = self.answers[h]
        assert isinstance(answer, HeartbeatResponse)
        return answer.error_code

    def leave(self, *members: MemberIdentity, group: str = "g") -> LeaveGroupResponse:
        h = self.handle()
        self.apply(
            self.mgr.leave_group(LeaveGroupRequest(group_id=group, members=members), h, self.now)
        )
        answer = self.answers[h]
        assert isinstance(answer, LeaveGroupResponse)
        return answer

    # --- scenarios ---------------------------------------------------------------------------

    def stable_group(self, n: int, group: str = "g") -> tuple[list[str], int]:
        """``n`` members joined, synced and Stable; (member ids, generation)."""
        ids: list[str] = []
        handles: list[int] = []
        for i in range(n):
            mid, h = self.new_member(group=group, client_id=f"c{i}")
            ids.append(mid)
            handles.append(h)
        self.tick_until_answered(handles)
        answers = [self.join_answer(h) for h in handles]
        generation = answers[0].generation_id
        leader = answers[0].leader
        syncs = [
            self.sync(
                mid,
                generation,
                {m: f"assign-{m}".encode() for m in ids} if mid == leader else None,
                group=group,
            )
            for mid in sorted(ids, key=lambda m: m == leader)
        ]
        assert all(self.sync_answer(h).error_code == 0 for h in syncs)
        return ids, generation
