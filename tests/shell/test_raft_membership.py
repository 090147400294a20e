"""KIP-853 through `RaftDriver`: a quorum grows from one voter to three and replaces a voter
while proposals flow, over the in-memory transport (the shell's part: futures settled by the
commit, voter addresses learnt from the log, snapshots that carry the voter set)."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest

from kraft.raft_shell import METADATA_GROUP, DurableRaftStorage, InMemoryNetwork, RaftDriver
from storage.errors import KraftError, NotControllerError, RequestTimedOutError
from tests.shell.raft_drivers import Recorder, until

pytestmark = pytest.mark.timeout(60)


def _driver(root: Path, net: InMemoryNetwork, node_id: int, recorder: Recorder) -> RaftDriver:
    return RaftDriver(
        node_id,
        {1: "node-1:9093"},  # the initial voter: the bootstrap everyone is given
        DurableRaftStorage(root / f"n{node_id}"),
        net.transport(node_id),
        group=METADATA_GROUP,
        state_machine=recorder,
        snapshot_interval_bytes=2000,
        seed=node_id,
        dynamic_voters=True,
    )


async def _leader(drivers: dict[int, RaftDriver]) -> RaftDriver:
    await until(lambda: any(d.is_leader for d in drivers.values()), "a leader")
    return next(d for d in drivers.values() if d.is_leader)


async def _change(drivers: dict[int, RaftDriver], add: int | None, remove: int | None) -> None:
    """Ask whoever leads, retrying the retriable refusals, until the change commits."""
    for _ in range(400):
        leader = await _leader(drivers)
        try:
            if add is not None:
                await leader.add_voter(add, f"node-{add}:9093")
            else:
                assert remove is not None
                await leader.remove_voter(remove)
            return
        except (RequestTimedOutError, NotControllerError):
            await asyncio.sleep(0.02)
    raise AssertionError(f"the change add={add} remove={remove} never committed")


def test_a_quorum_grows_from_one_to_three_and_replaces_a_voter_under_load(tmp_path: Path) -> None:
    async def main() -> None:
        net = InMemoryNetwork()
        recorders = {i: Recorder() for i in (1, 2, 3, 4)}
        drivers = {i: _driver(tmp_path, net, i, recorders[i]) for i in (1, 2, 3, 4)}
        for d in drivers.values():
            d.start()
        acked: list[bytes] = []
        stop = asyncio.Event()

        async def produce() -> None:
            for i in itertools.count():
                if stop.is_set():
                    return
                value = b"v%05d" % i
                try:
                    leader = await _leader(drivers)
                    await leader.propose(value)
                    acked.append(value)
                except KraftError:
                    await asyncio.sleep(0.005)

        producer = asyncio.create_task(produce())
        try:
            await until(lambda: len(acked) > 20, "writes to the one-voter quorum")
            await _change(drivers, add=2, remove=None)
            await _change(drivers, add=3, remove=None)
            leader = await _leader(drivers)
            assert set(leader.node.voters) == {1, 2, 3}
            assert leader.voter_endpoints()[3] == "node-3:9093"
            await _change(drivers, add=4, remove=None)
            await _change(drivers, add=None, remove=1)  # the first voter, likely the leader
            await until(lambda: len(acked) > 150, "writes after the replacement")
            stop.set()
            await producer
            leader = await _leader(drivers)
            assert leader.node_id != 1 and set(leader.node.voters) == {2, 3, 4}
            assert not drivers[1].is_leader
            end = leader.high_watermark
            for i, d in drivers.items():  # the removed node too: it follows as an observer
                await until(lambda d=d: d.high_watermark >= end, f"node {i} to catch up")
                assert set(d.node.voters) == {2, 3, 4}, i
            applied = set(recorders[leader.node_id].values)
            assert set(acked) <= applied, "an acknowledged write was lost"
            assert leader.node.log_start_offset > 0  # snapshots were taken along the way
        finally:
            stop.set()
            producer.cancel()
            for d in drivers.values():
                await d.stop(graceful=False)

    asyncio.run(main())
