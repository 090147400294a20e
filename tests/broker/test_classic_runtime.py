"""Classic groups in the `GroupRuntime` (`GroupShard` + `ClassicGroupService`), over the fake
offsets partition of `test_group_runtime`: a parked JoinGroup is answered by a later tick after
its records commit; a dropped shard and a failed append answer the parked requests with
Kafka's coordinator errors; the snapshot keeps the classic groups; a reload rebuilds them."""

from __future__ import annotations

import asyncio
import dataclasses
import struct
from typing import Any

from replication.broker.coordinators.classic_service import ClassicGroupService
from replication.broker.coordinators.group_shard import GroupShard
from replication.group import GroupConfig, OffsetCommitPartition, OffsetCommitRequest
from replication.group.classic import (
    ClassicGroupConfig,
    ClassicGroupState,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    MemberIdentity,
    Protocol,
    SyncGroupAssignment,
    SyncGroupRequest,
    is_classic_record,
)
from storage.errors import ErrorCode
from storage.records import iter_batches, record_tuples
from tests.broker.test_group_runtime import Harness, run, settle

CLASSIC = ClassicGroupConfig(initial_rebalance_delay_ms=1_000)


def classic_harness(h: Harness) -> ClassicGroupService:
    h.runtime._new_coordinator = lambda: GroupShard(GroupConfig(), CLASSIC)
    return ClassicGroupService(h.runtime, lambda _group_id: 0, lambda _topic: 1)


def join(member_id: str = "") -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id="g",
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        member_id=member_id,
        protocols=(Protocol(name="range", metadata=b"sub"),),
        client_id="client",
    )


def shard(h: Harness) -> GroupShard:
    (loaded,) = h.runtime.loaded_coordinators()
    assert isinstance(loaded, GroupShard)
    return loaded


def classic_keys_in_log(h: Harness) -> int:
    count = 0
    for batch in h.replica.log.batches:
        for pos, header in iter_batches(batch):
            for _, _, key, _, _ in record_tuples(batch[pos : pos + header.size_bytes]):
                count += key is not None and is_classic_record(key)
    return count


async def joined_member(h: Harness, service: ClassicGroupService) -> tuple[str, JoinGroupResponse]:
    """A member's JoinGroup, parked until the initial rebalance delay passes."""
    await h.loaded()
    required = await service.join_group(join())
    assert required.error_code == ErrorCode.MEMBER_ID_REQUIRED and required.member_id
    parked = asyncio.ensure_future(service.join_group(join(required.member_id)))
    await settle()
    assert not parked.done(), "answered before the join phase ended"
    h.now_ms += CLASSIC.initial_rebalance_delay_ms
    for _ in range(50):
        await h.runtime.poll(h.now_ms)
        await settle()
        if parked.done():
            break
    return required.member_id, parked.result()


def test_a_parked_join_is_answered_by_a_tick_after_its_records_commit() -> None:
    async def test(h: Harness) -> None:
        service = classic_harness(h)
        member_id, joined = await joined_member(h, service)
        assert joined.error_code == ErrorCode.NONE
        assert joined.leader == member_id and joined.generation_id == 1
        assert [m.member_id for m in joined.members] == [member_id]
        synced = await service.sync_group(
            SyncGroupRequest(
                group_id="g",
                generation_id=1,
                member_id=member_id,
                assignments=(SyncGroupAssignment(member_id=member_id, assignment=b"all"),),
            )
        )
        assert synced.error_code == ErrorCode.NONE and synced.assignment == b"all"
        assert shard(h).classic.groups()["g"].state is ClassicGroupState.STABLE
        assert classic_keys_in_log(h) >= 2  # the group's records went through the log

        # A reload (a new leader) rebuilds the group from the log alone.
        h.replica.driver.generation += 1
        await h.runtime.poll(h.now_ms)
        await h.loaded()
        reloaded = shard(h).classic.groups()["g"]
        assert reloaded.generation_id == 1 and member_id in reloaded.members

    run(test)


def test_a_dropped_shard_answers_a_parked_join_not_coordinator() -> None:
    async def test(h: Harness) -> None:
        service = classic_harness(h)
        await h.loaded()
        required = await service.join_group(join())
        parked = asyncio.ensure_future(service.join_group(join(required.member_id)))
        await settle()
        assert not parked.done()
        h.replica.driver.is_leader = False
        await h.runtime.poll(h.now_ms)
        await settle()
        assert parked.result().error_code == ErrorCode.NOT_COORDINATOR

    run(test)


def test_a_failed_append_answers_the_request_with_the_coordinator_error() -> None:
    async def test(h: Harness) -> None:
        service = classic_harness(h)
        await h.loaded()
        h.replica.produce_error = ErrorCode.NOT_ENOUGH_REPLICAS
        answer = await service.join_group(join())  # a new group is written at once
        assert answer.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert h.runtime.loaded_coordinators() == []  # dropped: the next poll reloads

    run(test)


def test_the_snapshot_keeps_the_classic_groups() -> None:
    async def test(h: Harness) -> None:
        service = classic_harness(h)
        member_id, joined = await joined_member(h, service)
        assert joined.error_code == ErrorCode.NONE
        assert shard(h).snapshot_records()[-1][0] == shard(h).classic.snapshot_records()[-1][0]
        before = h.replica.log.log_start_offset
        await h.runtime._snapshot(h.runtime.shard(0), shard(h))
        assert h.replica.log.log_start_offset > before
        h.replica.driver.generation += 1
        await h.runtime.poll(h.now_ms)
        await h.loaded()
        assert member_id in shard(h).classic.groups()["g"].members

    run(test)


def test_a_classic_groups_offsets_expire_by_its_rule_and_the_empty_group_is_deleted() -> None:
    """Stable: only offsets of topics no member subscribes to expire; Empty: all of them,
    counted from when it became Empty; then the Empty group without offsets is deleted."""
    config = GroupConfig(offsets_retention_ms=1_000, offsets_retention_check_interval_ms=100)
    s = GroupShard(config, ClassicGroupConfig(initial_rebalance_delay_ms=0))
    answers: dict[object, Any] = {}

    def apply(effects_or_records: Any) -> None:
        records = getattr(effects_or_records, "records", effects_or_records)
        for key, value in records:
            s.replay(key, value)
        for reply in getattr(effects_or_records, "replies", ()):
            answers[reply.handle] = reply.response

    subscription = struct.pack(">hih", 0, 1, 1) + b"t" + struct.pack(">i", -1)
    request = dataclasses.replace(
        join(), protocols=(Protocol(name="range", metadata=subscription),)
    )
    now = 10_000
    apply(s.classic.join_group(request, "j1", now, new_member_uuid="u1"))
    member_id = answers["j1"].member_id
    apply(
        s.classic.join_group(
            dataclasses.replace(request, member_id=member_id), "j2", now, new_member_uuid="-"
        )
    )
    apply(s.tick(now, {}))
    answers.update((r.handle, r.response) for r in s.take_replies())
    assert answers["j2"].generation_id == 1
    apply(
        s.classic.sync_group(
            SyncGroupRequest(group_id="g", generation_id=1, member_id=member_id), "s", now
        )
    )
    assert s.classic.groups()["g"].state is ClassicGroupState.STABLE
    commit = OffsetCommitRequest(
        group_id="g",
        partitions=tuple(
            OffsetCommitPartition(topic=t, partition=0, offset=5) for t in ("t", "other")
        ),
    )
    apply(s.kip848.commit_offsets(commit, now))
    apply(s.tick(now + 2_000, {}))
    assert set(s.kip848.groups()["g"].offsets) == {("t", 0)}  # "t" is subscribed

    left = LeaveGroupRequest(group_id="g", members=(MemberIdentity(member_id=member_id),))
    apply(s.classic.leave_group(left, "l", now + 3_000))
    assert s.classic.groups()["g"].state is ClassicGroupState.EMPTY
    apply(s.tick(now + 3_500, {}))
    assert ("t", 0) in s.kip848.groups()["g"].offsets  # Empty for 500 ms only
    apply(s.tick(now + 4_100, {}))
    assert "g" not in s.kip848.groups() or not s.kip848.groups()["g"].offsets
    assert s.classic.has_group("g")  # deleted by the next check, once no offsets are left
    apply(s.tick(now + 4_300, {}))
    assert not s.classic.has_group("g")
