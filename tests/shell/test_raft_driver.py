"""`RaftDriver` without gRPC: three drivers over an `InMemoryNetwork` in one event loop elect,
commit, change leaders and fail proposals the leader loses; two groups over the same
transports stay independent."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import structlog

from kraft.raft.messages import RaftMessage
from kraft.raft_shell import METADATA_GROUP, InMemoryNetwork, Proposals
from kraft.raft_shell.state_machine import AppliedBatch
from kraft.supervision import LoopSupervisor
from storage.errors import LogClosedError, NotControllerError
from tests.shell.raft_drivers import DriverGroup, until

pytestmark = pytest.mark.timeout(60)


def test_drivers_over_an_in_memory_transport_elect_a_leader_and_commit_in_order(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        net = InMemoryNetwork()
        group = DriverGroup(tmp_path, (1, 2, 3), net.transport, group=METADATA_GROUP)
        group.start()
        try:
            leader = await group.elected()
            futures = [leader.propose_nowait([b"e%d" % i]) for i in range(20)]
            offsets = await asyncio.gather(*futures)
            assert offsets == sorted(offsets) and len(set(offsets)) == 20
            want = [b"e%d" % i for i in range(20)]
            for rec in group.recorders.values():
                await until(lambda rec=rec: rec.values == want, "every replica to apply all")
            assert [o for o, _ in group.recorders[leader.node_id].entries] == offsets
            status = leader.describe()
            assert status.leader_id == leader.node_id and status.role == "leader"
            assert {r.node_id for r in status.replicas} == {1, 2, 3}
            assert net.delivered[METADATA_GROUP] > 0
        finally:
            await group.stop()

    asyncio.run(main())


def test_a_follower_refuses_a_proposal_with_not_controller_naming_the_leader(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        net = InMemoryNetwork()
        group = DriverGroup(tmp_path, (1, 2, 3), net.transport, group=METADATA_GROUP)
        group.start()
        try:
            leader = await group.elected()
            await group.commit(b"x")
            follower = next(d for d in group.drivers.values() if d is not leader)
            await until(lambda: follower.leader_id == leader.node_id, "the follower to know")
            with pytest.raises(NotControllerError) as err:
                follower.propose_nowait([b"y"])
            assert err.value.leader_id == leader.node_id
            assert err.value.leader_address == f"node-{leader.node_id}"
        finally:
            await group.stop()

    asyncio.run(main())


def test_a_cut_off_leader_is_replaced_its_proposal_fails_and_it_catches_up_when_healed(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        net = InMemoryNetwork()
        group = DriverGroup(tmp_path, (1, 2, 3), net.transport, group=METADATA_GROUP)
        changes: list[tuple[int | None, int]] = []
        for d in group.drivers.values():
            d.add_leader_listener(lambda lid, epoch: changes.append((lid, epoch)))
        group.start()
        try:
            old = await group.elected()
            await group.commit(b"before")
            net.isolate(old.node_id)
            # The cut-off leader still takes the proposal, but it can never commit: it fails
            # with NOT_CONTROLLER once the leader resigns (check-quorum) or learns the new epoch.
            lost = old.propose_nowait([b"lost"])
            others = [i for i in group.drivers if i != old.node_id]
            new = await group.elected(among=others, after_epoch=old.epoch)
            assert new.node_id != old.node_id
            await group.commit(b"after", among=others)
            with pytest.raises(NotControllerError):
                await asyncio.wait_for(lost, 10)
            net.heal()
            want = [b"before", b"after"]
            for rec in group.recorders.values():
                await until(lambda rec=rec: rec.values == want, "every replica to converge")
            assert (new.node_id, new.epoch) in changes
        finally:
            await group.stop()

    asyncio.run(main())


def test_a_proposal_made_before_a_resignation_fails_or_commits_never_hangs(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        net = InMemoryNetwork()
        group = DriverGroup(tmp_path, (1, 2, 3), net.transport, group=METADATA_GROUP)
        group.start()
        try:
            leader = await group.elected()
            await group.commit(b"warm")
            pending = [leader.propose_nowait([b"p%d" % i]) for i in range(5)]
            epoch = leader.epoch
            await leader.resign()
            results = await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), 10)
            assert all(isinstance(r, int | NotControllerError) for r in results), results
            await group.elected(after_epoch=epoch)
            await group.commit(b"next")
        finally:
            await group.stop()

    asyncio.run(main())


def test_stopping_a_driver_fails_its_pending_proposals_with_log_closed(tmp_path: Path) -> None:
    async def main() -> None:
        net = InMemoryNetwork()
        group = DriverGroup(tmp_path, (1, 2, 3), net.transport, group=METADATA_GROUP)
        group.start()
        try:
            leader = await group.elected()
            await group.commit(b"warm")
            for i in group.drivers:
                if i != leader.node_id:
                    net.isolate(i)  # nothing commits from now on
            pending = leader.propose_nowait([b"never"])
            await leader.stop(graceful=False)
            with pytest.raises(LogClosedError):
                await pending
            with pytest.raises(LogClosedError):
                leader.propose_nowait([b"after"])
        finally:
            await group.stop()

    asyncio.run(main())


def test_a_state_machine_that_raises_kills_the_loop_and_fails_proposals(tmp_path: Path) -> None:
    async def main() -> None:
        net = InMemoryNetwork()
        supervisors = {i: LoopSupervisor(structlog.get_logger("test")) for i in (1, 2, 3)}
        group = DriverGroup(
            tmp_path, (1, 2, 3), net.transport, group=METADATA_GROUP, supervisors=supervisors
        )
        group.start()
        try:
            leader = await group.elected()
            await group.commit(b"fine")
            rec = group.recorders[leader.node_id]

            def boom(offset: int, data: bytes) -> None:
                raise ValueError("state machine bug")

            rec.apply = boom  # type: ignore[method-assign]
            doomed = leader.propose_nowait([b"boom"])
            with pytest.raises((LogClosedError, NotControllerError)):
                await asyncio.wait_for(doomed, 10)
            death = await asyncio.wait_for(supervisors[leader.node_id].wait_for_death(), 10)
            assert isinstance(death, ValueError)
            with pytest.raises(LogClosedError):
                leader.propose_nowait([b"after"])
        finally:
            await group.stop()

    asyncio.run(main())


def test_two_groups_on_the_same_in_memory_transports_are_independent(tmp_path: Path) -> None:
    """Each node's transport carries both groups; each group elects, commits and fails over
    on its own, and never sees the other's entries."""

    async def main() -> None:
        net = InMemoryNetwork()
        meta = DriverGroup(tmp_path, (1, 2, 3), net.transport, group=METADATA_GROUP)
        data = DriverGroup(tmp_path, (1, 2, 3), net.transport, group="orders-0")
        meta.start()
        data.start()
        try:
            await meta.commit(b"m1")
            await data.commit(b"d1")
            # Stop the data group's leader: only the data group elects again.
            data_leader = await data.elected()
            meta_leader = await meta.elected()
            meta_epoch = meta_leader.epoch
            await data_leader.stop(graceful=False)
            rest = [i for i in data.drivers if i != data_leader.node_id]
            await data.elected(among=rest, after_epoch=data_leader.epoch)
            await data.commit(b"d2", among=rest)
            await meta.commit(b"m2")
            assert meta.leader() is meta_leader and meta_leader.epoch == meta_epoch
            for i in (1, 2, 3):
                await until(lambda i=i: meta.recorders[i].values == [b"m1", b"m2"], "meta")
            for i in rest:
                await until(lambda i=i: data.recorders[i].values == [b"d1", b"d2"], "data")
            assert net.delivered[METADATA_GROUP] > 0 and net.delivered["orders-0"] > 0
        finally:
            await data.stop()
            await meta.stop()

    asyncio.run(main())


class _Inbox:
    def deliver(self, msg: RaftMessage) -> None:
        pass


def test_a_transport_refuses_a_second_driver_for_the_same_group() -> None:
    transport = InMemoryNetwork().transport(1)
    transport.register("g", _Inbox())
    with pytest.raises(ValueError, match="already registered"):
        transport.register("g", _Inbox())
    transport.unregister("g")
    transport.register("g", _Inbox())


# --- Proposals, alone ----------------------------------------------------------------------------


def _futures(n: int) -> tuple[asyncio.AbstractEventLoop, list[asyncio.Future[int]]]:
    loop = asyncio.new_event_loop()
    return loop, [loop.create_future() for _ in range(n)]


def test_a_proposal_commits_only_in_a_batch_of_its_own_epoch() -> None:
    loop, (mine, lost) = _futures(2)
    try:
        props = Proposals(lambda: NotControllerError("not leader"))
        props.add(10, 2, 3, mine)  # offsets 10-11, epoch 3
        props.add(12, 1, 3, lost)  # offset 12, epoch 3
        props.committed(AppliedBatch(base_offset=10, end_offset=12, epoch=3))
        assert mine.result() == 10 and not lost.done()
        # Offset 12 committed, but written by the leader of epoch 4: ours was truncated.
        props.committed(AppliedBatch(base_offset=12, end_offset=13, epoch=4))
        assert isinstance(lost.exception(), NotControllerError) and len(props) == 0
    finally:
        loop.close()


def test_a_leader_that_steps_down_fails_its_uncommitted_proposals_at_once() -> None:
    loop, (committed_later, uncommitted) = _futures(2)
    try:
        props = Proposals(lambda: NotControllerError("not leader"))
        props.add(5, 1, 2, committed_later)
        props.add(6, 1, 2, uncommitted)
        props.settle(is_leader=True, epoch=2, high_watermark=5)
        assert not committed_later.done() and not uncommitted.done()
        # Now a follower in epoch 3 with the high watermark at 5: both may or may not survive
        # on the new leader; the caller hears NOT_CONTROLLER (KIP-595) and retries.
        props.settle(is_leader=False, epoch=3, high_watermark=5)
        assert isinstance(committed_later.exception(), NotControllerError)
        assert isinstance(uncommitted.exception(), NotControllerError)
    finally:
        loop.close()
