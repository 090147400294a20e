"""`RaftServer`: one Raft replica as a process runs it: a `RaftDriver` on `DurableRaftStorage`,
over a `GrpcRaftTransport`, with gRPC health. It is the embeddable asyncio API
(`kraft.AsyncReplicatedLog`) and what the controller and the broker's metadata observer run.

A server serves the metadata group by default; give it ``group`` (and a shared ``transport``)
to host another group over a transport that carries several.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from kraft.logs import ensure_configured
from kraft.raft import RaftConfig, RaftNode
from kraft.raft.messages import RaftMessage, SnapshotId
from kraft.raft_shell.clock import clock_ms
from kraft.raft_shell.describe import QuorumStatus
from kraft.raft_shell.driver import RaftDriver
from kraft.raft_shell.grpc_transport import GrpcRaftTransport
from kraft.raft_shell.state_machine import NullStateMachine, StateMachine
from kraft.raft_shell.store import DurableRaftStorage
from kraft.security.tls import TlsConfig
from kraft.supervision import LoopSupervisor
from kraft.transport.channels import aio_server, bind
from kraft.transport.codec import METADATA_GROUP
from kraft.types import NodeId
from storage.errors import NetworkError, NotControllerError


class RaftServer:
    """One Raft replica: voters are ``{id: "host:port"}``; a node not in it is an observer.

    Args:
        node_id: this node's id.
        voters: every voter's id and address.
        data_dir: where the log, the election state and the snapshots live.
        listen: the address to serve the Raft RPCs on; None for an observer that serves none.
        state_machine: receives committed records (`StateMachine`).
        snapshot_interval_bytes: take a snapshot after this many applied bytes (0: never).
        on_leader_change: called with (leader id or None, epoch) whenever either changes.
        server: a gRPC server shared with other services (started by `start_serving`).
        supervisor: the process's `LoopSupervisor` (one of its own by default).
        transport: a transport shared with other groups (its owner serves and closes it);
            by default the server makes its own.
        group: the Raft group this replica belongs to.
        tls: the node's mTLS settings (None: plaintext): it serves and dials with them.
    """

    def __init__(
        self,
        node_id: int,
        voters: Mapping[int, str],
        data_dir: str | Path,
        *,
        listen: str | None = None,
        config: RaftConfig | None = None,
        state_machine: StateMachine | None = None,
        snapshot_interval_bytes: int = 0,
        on_leader_change: Callable[[int | None, int], None] | None = None,
        server: grpc.aio.Server | None = None,
        seed: int | None = None,
        supervisor: LoopSupervisor | None = None,
        transport: GrpcRaftTransport | None = None,
        group: str = METADATA_GROUP,
        tls: TlsConfig | None = None,
        dynamic_voters: bool = False,
    ) -> None:
        self.node_id = NodeId(node_id)
        self.dynamic_voters = dynamic_voters
        self.voters = {NodeId(k): v for k, v in voters.items()}
        self.data_dir = Path(data_dir)
        self.listen = listen
        self.config = config or RaftConfig()
        self.state_machine: StateMachine = state_machine or NullStateMachine()
        self.snapshot_interval_bytes = snapshot_interval_bytes
        self.group = group
        self._leader_listeners: list[Callable[[int | None, int], None]] = []
        if on_leader_change is not None:
            self._leader_listeners.append(on_leader_change)
        self._server = server
        self._own_server = server is None
        self._seed = seed
        ensure_configured()
        self._log = structlog.get_logger("kraft.raft.server").bind(node_id=node_id)
        self.supervisor = supervisor if supervisor is not None else LoopSupervisor(self._log)
        """Watches the Raft loop: if it dies, health says NOT_SERVING and proposals fail;
        a server process (the controller, the broker) then exits."""
        self.supervisor.on_death(lambda: self.set_serving(False))
        self._own_transport = transport is None
        self._tls = tls
        self.transport = transport or GrpcRaftTransport(
            node_id, voters, request_timeout_ms=self.config.request_timeout_ms, tls=tls
        )
        self._storage: DurableRaftStorage | None = None
        self._driver: RaftDriver | None = None
        self._health: health.HealthServicer | None = None
        self._running = False
        self.bound_port: int | None = None

    # --- lifecycle ----------------------------------------------------------------------------

    @property
    def driver(self) -> RaftDriver:
        assert self._driver is not None, "start() first"
        return self._driver

    @property
    def node(self) -> RaftNode:
        return self.driver.node

    @property
    def storage(self) -> DurableRaftStorage:
        assert self._storage is not None, "start() first"
        return self._storage

    @property
    def grpc_server(self) -> grpc.aio.Server | None:
        return self._server

    @property
    def loop_task(self) -> asyncio.Task[None] | None:
        """The Raft loop; it ends with an exception if the loop crashed (e.g. a state machine
        that raised), which a server should treat as fatal."""
        return None if self._driver is None else self._driver.loop_task

    def set_serving(self, serving: bool) -> None:
        """What gRPC health checks answer for this node."""
        if self._health is not None:
            status = health_pb2.HealthCheckResponse
            self._health.set("", status.SERVING if serving else status.NOT_SERVING)

    def add_leader_listener(self, fn: Callable[[int | None, int], None]) -> None:
        """Call ``fn(leader id or None, epoch)`` whenever either changes (before or after
        `start`)."""
        self._leader_listeners.append(fn)
        if self._driver is not None:
            self._driver.add_leader_listener(fn)

    async def start(self) -> None:
        """Open the files, restore the latest snapshot, start serving and the loop."""
        storage = DurableRaftStorage(self.data_dir)
        self._storage = storage
        driver = self._driver = RaftDriver(
            self.node_id,
            {int(k): v for k, v in self.voters.items()},
            storage,
            self.transport,
            group=self.group,
            config=self.config,
            state_machine=self.state_machine,
            snapshot_interval_bytes=self.snapshot_interval_bytes,
            clock=clock_ms,
            seed=self._seed,
            supervisor=self.supervisor,
            dynamic_voters=self.dynamic_voters,
        )
        for fn in self._leader_listeners:
            driver.add_leader_listener(fn)
        if self.listen is not None and self._own_transport:
            if self._server is None:
                self._server = aio_server()
            self.transport.add_to_server(self._server)
            self._health = health.HealthServicer()
            health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
            try:
                self.bound_port = bind(self._server, self.listen, self._tls)
            except RuntimeError as e:  # grpc's way of saying the bind failed
                raise NetworkError(f"cannot listen on {self.listen}: {e}") from e
            if self._own_server:
                await self._server.start()
            self._health.set("", health_pb2.HealthCheckResponse.SERVING)
        self._running = True
        driver.start()

    async def start_serving(self) -> None:
        """Start a shared gRPC server once every service was added (when one was passed in)."""
        if self._server is not None and not self._own_server:
            await self._server.start()

    async def stop(self, *, graceful: bool = True) -> None:
        """Stop the loop and close the files. ``graceful`` resigns leadership first (KIP-595
        EndQuorumEpoch) so a successor is elected at once rather than after a timeout."""
        if not self._running:
            return
        self._running = False
        self.supervisor.close()
        if self._driver is not None:
            await self._driver.stop(graceful=graceful)
        if self._own_transport:
            await self.transport.close()
        if self._server is not None and self._own_server:
            await self._server.stop(grace=0.2)
        if self._storage is not None:
            self._storage.close()

    # --- the embeddable API (see `RaftDriver`) ------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self._driver is not None and self._driver.is_leader

    @property
    def leader_id(self) -> int | None:
        return None if self._driver is None else self._driver.leader_id

    @property
    def epoch(self) -> int:
        return -1 if self._driver is None else self._driver.epoch

    @property
    def high_watermark(self) -> int:
        return -1 if self._driver is None else self._driver.high_watermark

    def leader_address(self) -> str:
        if self._driver is not None:
            return self._driver.leader_address()  # NB: knows voters added since (KIP-853)
        lid = self.leader_id
        return self.voters.get(NodeId(lid), "") if lid is not None else ""

    def voter_endpoints(self) -> dict[int, str]:
        """The voter set in use (KIP-853: the latest in the log) with each voter's address;
        empty before `start`."""
        return {} if self._driver is None else self._driver.voter_endpoints()

    def not_leader_error(self) -> NotControllerError:
        return self.driver.not_leader_error()

    def propose_nowait(self, records: Sequence[bytes]) -> asyncio.Future[int]:
        """Append ``records`` as consecutive entries; the future gives the first one's offset
        once all are committed.

        Raises:
            NotControllerError: this node is not the leader (carries the leader's id and
                address).
            LogClosedError: the Raft loop died.
        """
        return self.driver.propose_nowait(records)

    async def propose(self, data: bytes) -> int:
        """Replicate one entry; returns its offset once committed."""
        return await self.driver.propose(data)

    async def resign(self) -> None:
        await self.driver.resign()

    async def take_snapshot(self) -> SnapshotId | None:
        """Snapshot the state machine at the last applied offset, then trim the log."""
        return await self.driver.take_snapshot()

    def describe(self) -> QuorumStatus:
        """The quorum as this node sees it; per-replica progress (the leader first) only on
        the leader, as in Kafka's DescribeQuorum."""
        return self.driver.describe()

    def wake(self) -> None:
        self.driver.wake()

    def step(self, msg: RaftMessage) -> None:
        """Deliver an inbound message as the transport would."""
        if self._driver is not None:
            self._driver.deliver(msg)


__all__ = ["RaftServer"]
