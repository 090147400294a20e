"""An embeddable replicated log: your own state machine, replicated by kraft's Raft.

This is what PySyncObj users do, and what kraft's controller is built on::

    from kraft import ReplicatedLog

    class Counter:
        def __init__(self): self.value = 0
        def apply(self, offset: int, data: bytes) -> None: self.value += int(data)
        def snapshot(self) -> bytes: return str(self.value).encode()
        def restore(self, data: bytes) -> None: self.value = int(data)

    counter = Counter()
    voters = {1: "127.0.0.1:9101", 2: "127.0.0.1:9102", 3: "127.0.0.1:9103"}
    with ReplicatedLog(1, voters, "/tmp/node1", state_machine=counter) as log:
        log.wait_for_leader(timeout=10)
        offset = log.propose(b"5").result(timeout=5)   # NotControllerError off the leader

``apply`` runs on the log's own thread, in offset order, once per committed entry; a restarted
node first ``restore``s its latest snapshot and is then given the entries after it. Use
`AsyncReplicatedLog` (`kraft.raft_shell.RaftServer` itself) inside an asyncio program.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Self

from kraft.raft import RaftConfig
from kraft.raft_shell.describe import QuorumStatus
from kraft.raft_shell.server import RaftServer
from kraft.raft_shell.state_machine import StateMachine
from storage.errors import KraftError, RequestTimedOutError

AsyncReplicatedLog = RaftServer
"""The asyncio flavour: ``await log.start()``, ``await log.propose(data)``, ``await log.stop()``."""


class ReplicatedLog:
    """The thread-backed flavour: an event loop of its own on a daemon thread.

    Args:
        node_id: this node's id; a voter if it is in ``voters``, else an observer.
        voters: ``{id: "host:port"}`` of every voter.
        data_dir: where this node keeps its log, election state and snapshots.
        state_machine: ``apply(offset, data)``, ``snapshot() -> bytes``, ``restore(bytes)``.
        listen: the address to serve on (default: this node's address in ``voters``).
        config: Raft timeouts (`RaftConfig`, Kafka's ``controller.quorum.*`` keys).
        snapshot_interval_bytes: snapshot after this many applied bytes (0: only on demand).
    """

    def __init__(
        self,
        node_id: int,
        voters: Mapping[int, str],
        data_dir: str | Path,
        *,
        state_machine: StateMachine | None = None,
        listen: str | None = None,
        config: RaftConfig | None = None,
        snapshot_interval_bytes: int = 0,
    ) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"kraft-raft-{node_id}", daemon=True
        )
        self._leader_callbacks: list[Callable[[int | None, int], None]] = []
        self.server = RaftServer(
            node_id,
            voters,
            data_dir,
            listen=listen if listen is not None else voters.get(node_id),
            config=config,
            state_machine=state_machine,
            snapshot_interval_bytes=snapshot_interval_bytes,
            on_leader_change=self._on_leader_change,
        )
        self._started = False

    def _call(self, coro: Any, timeout: float | None = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def start(self) -> Self:
        if not self._started:
            self._thread.start()
            self._call(self.server.start())
            self._started = True
        return self

    def stop(self, *, graceful: bool = True) -> None:
        """Stop serving and close the files (resigning leadership first when ``graceful``)."""
        if not self._started:
            return
        self._started = False
        try:
            self._call(self.server.stop(graceful=graceful))
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._loop.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- writes -------------------------------------------------------------------------------

    def propose(self, data: bytes) -> concurrent.futures.Future[int]:
        """Replicate one entry. The future gives its offset once committed, or raises
        `NotControllerError` (with the leader's id and address) when this node is not the
        leader or loses leadership before the entry commits."""
        return self.propose_many([data])

    def propose_many(self, entries: Sequence[bytes]) -> concurrent.futures.Future[int]:
        """Replicate consecutive entries; the future gives the first one's offset."""
        result: concurrent.futures.Future[int] = concurrent.futures.Future()

        def submit() -> None:
            try:
                fut = self.server.propose_nowait(entries)
            except KraftError as e:
                result.set_exception(e)
                return
            fut.add_done_callback(lambda f: _copy_result(f, result))

        self._loop.call_soon_threadsafe(submit)
        return result

    def snapshot(self) -> None:
        """Snapshot the state machine now and trim the log below it."""
        self._call(self.server.take_snapshot())

    def resign(self) -> None:
        """Hand leadership to the most caught-up voter (KIP-595 EndQuorumEpoch)."""
        self._call(self.server.resign())

    # --- state --------------------------------------------------------------------------------

    @property
    def node_id(self) -> int:
        return int(self.server.node_id)

    @property
    def is_leader(self) -> bool:
        return self.server.is_leader

    @property
    def leader_id(self) -> int | None:
        return self.server.leader_id

    @property
    def epoch(self) -> int:
        return self.server.epoch

    def describe(self) -> QuorumStatus:
        result: QuorumStatus = self._call(_as_coro(self.server.describe))
        return result

    def on_leader_change(self, callback: Callable[[int | None, int], None]) -> None:
        """Call ``callback(leader_id, epoch)`` (on the log's thread) when either changes."""
        self._leader_callbacks.append(callback)

    def _on_leader_change(self, leader_id: int | None, epoch: int) -> None:
        for cb in self._leader_callbacks:
            cb(leader_id, epoch)

    def wait_for_leader(self, timeout: float = 10.0) -> int:
        """Block until some leader is known; return its id.

        Raises:
            RequestTimedOutError: no leader within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lid = self.server.leader_id
            if lid is not None:
                return lid
            time.sleep(0.01)
        raise RequestTimedOutError(f"no leader elected within {timeout}s")


async def _as_coro(fn: Callable[[], Any]) -> Any:
    return fn()


def _copy_result(src: asyncio.Future[int], dst: concurrent.futures.Future[int]) -> None:
    if src.cancelled():
        dst.cancel()
    elif (exc := src.exception()) is not None:
        dst.set_exception(exc)
    else:
        dst.set_result(src.result())


__all__ = ["AsyncReplicatedLog", "ReplicatedLog"]
