"""Helpers for tests that run `RaftDriver`s in one event loop: a recording state machine,
`DriverGroup` (one Raft group's drivers on several nodes) and `until` (wait with a deadline)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from kraft.raft_shell import DurableRaftStorage, RaftDriver, Transport
from kraft.supervision import LoopSupervisor
from storage.errors import NotControllerError


async def until(predicate: Callable[[], bool], what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


class Recorder:
    """A state machine that records what it is given."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, bytes]] = []

    def apply(self, offset: int, data: bytes) -> None:
        self.entries.append((offset, data))

    def snapshot(self) -> bytes:
        return b""

    def restore(self, data: bytes) -> None:
        self.entries = []

    @property
    def values(self) -> list[bytes]:
        return [v for _, v in self.entries]


class DriverGroup:
    """One Raft group: a driver per node, each on its own `DurableRaftStorage` under ``root``
    and on the transport ``transports(node_id)`` gives."""

    def __init__(
        self,
        root: Path,
        node_ids: Iterable[int],
        transports: Callable[[int], Transport],
        *,
        group: str,
        supervisors: dict[int, LoopSupervisor] | None = None,
    ) -> None:
        ids = list(node_ids)
        voters = {i: f"node-{i}" for i in ids}
        self.group = group
        self.recorders = {i: Recorder() for i in ids}
        self.storages = {i: DurableRaftStorage(root / group / f"n{i}") for i in ids}
        self.drivers = {
            i: RaftDriver(
                i,
                voters,
                self.storages[i],
                transports(i),
                group=group,
                state_machine=self.recorders[i],
                seed=i,
                supervisor=(supervisors or {}).get(i),
            )
            for i in ids
        }

    def start(self) -> None:
        for d in self.drivers.values():
            d.start()

    async def stop(self) -> None:
        for d in self.drivers.values():
            await d.stop(graceful=False)
        for s in self.storages.values():
            s.close()

    def leader(self, among: Iterable[int] | None = None) -> RaftDriver | None:
        ids = self.drivers if among is None else among
        leaders = [self.drivers[i] for i in ids if self.drivers[i].is_leader]
        return max(leaders, key=lambda d: d.epoch) if leaders else None

    async def elected(
        self, among: Iterable[int] | None = None, after_epoch: int = -1
    ) -> RaftDriver:
        ids = list(self.drivers if among is None else among)

        def found() -> bool:
            leader = self.leader(ids)
            return leader is not None and leader.epoch > after_epoch

        await until(found, f"a leader of {self.group} among {ids}")
        leader = self.leader(ids)
        assert leader is not None
        return leader

    async def commit(self, data: bytes, among: Iterable[int] | None = None) -> int:
        """Propose ``data`` at whoever leads (retrying across leader changes); its offset."""
        ids = list(self.drivers if among is None else among)
        deadline = time.monotonic() + 20
        while True:
            leader = self.leader(ids)
            if leader is not None:
                try:
                    return await asyncio.wait_for(leader.propose(data), 5)
                except (NotControllerError, TimeoutError):
                    pass
            assert time.monotonic() < deadline, f"{self.group}: nothing commits"
            await asyncio.sleep(0.02)
