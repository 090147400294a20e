"""`FaultProxy`: a TCP proxy for one network link that can drop, delay, throttle and reset.

Network faults without root: a cluster started with a proxy in front of a node's port (the
other side dials the proxy's address instead of the node's) can have that link cut one way
or both ways, slowed or reset, while the processes on either end run unchanged. This is how
a Jepsen-style nemesis partitions real processes on one machine (issue 16); gRPC's HTTP/2
runs over it byte for byte.

Directions are named from the dialling side: ``upstream`` carries what the client (the
dialler) sends to the server, ``downstream`` the server's replies. A `LinkFaults` per
direction says what happens to its bytes:

- ``drop``: a blackhole. Bytes are read and discarded; the connection stays open, as with
  packets lost on a partitioned network (the sender's gRPC keepalive or deadline notices,
  not a reset). Dropping only one direction is a one-way partition.
- ``delay_ms``: every chunk is held that long before it is written (order is kept), varied
  by up to ``jitter_ms`` either way (`kraft.cluster.delay_line`, drawn from the proxy's
  ``seed``).
- ``rate_bytes_per_s``: the direction's bandwidth is capped.

`reset_connections` closes every open connection at once (both ends see a reset), and
``refuse`` makes new connections close as soon as they are accepted. Faults apply to open
connections and to new ones from the moment they are set.

::

    proxy = FaultProxy(target=("127.0.0.1", 9092))
    await proxy.start()                       # proxy.address: "127.0.0.1:<free port>"
    proxy.set_faults(upstream=LinkFaults(drop=True), downstream=LinkFaults(drop=True))
    proxy.heal()
    await proxy.close()

The proxy runs in the event loop that started it; `FaultProxy` methods other than `start`
and `close` are plain calls that take effect for the next chunk, safe from that loop only
(`kraft.cluster.fault_network.FaultNetwork` runs many of them on a thread of their own).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from dataclasses import dataclass, field
from typing import Final, final

import structlog

from kraft.cluster.delay_line import delivery_time

CHUNK_BYTES: Final = 64 * 1024
"""The most one read takes from a socket."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkFaults:
    """What happens to the bytes of one direction of a link (see the module docstring)."""

    drop: bool = False
    delay_ms: int = 0
    jitter_ms: int = 0
    rate_bytes_per_s: int | None = None

    def __post_init__(self) -> None:
        if self.delay_ms < 0 or self.jitter_ms < 0:
            raise ValueError(
                f"delay_ms, jitter_ms must be >= 0, got {self.delay_ms}, {self.jitter_ms}"
            )
        if self.rate_bytes_per_s is not None and self.rate_bytes_per_s <= 0:
            raise ValueError(f"rate_bytes_per_s must be > 0, got {self.rate_bytes_per_s}")

    @property
    def healthy(self) -> bool:
        return (
            not self.drop
            and self.delay_ms == 0
            and self.jitter_ms == 0
            and self.rate_bytes_per_s is None
        )


HEALTHY: Final = LinkFaults()


@dataclass(slots=True)
class LinkCounters:
    """Bytes forwarded and dropped per direction, and connections accepted and reset."""

    upstream_bytes: int = 0
    downstream_bytes: int = 0
    upstream_dropped_bytes: int = 0
    downstream_dropped_bytes: int = 0
    connections: int = 0
    resets: int = 0
    refused: int = 0


@dataclass(slots=True, eq=False)
class _Connection:
    client: asyncio.StreamWriter
    server: asyncio.StreamWriter
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def abort(self) -> None:
        for writer in (self.client, self.server):
            transport = writer.transport
            if not transport.is_closing():
                transport.abort()
        for task in self.tasks:
            task.cancel()


@final
class FaultProxy:
    """One link's proxy: listens on ``listen_host``:``listen_port`` (0: a free port) and
    forwards every connection to ``target``, applying the faults set."""

    def __init__(
        self,
        target: tuple[str, int],
        *,
        listen_host: str = "127.0.0.1",
        listen_port: int = 0,
        name: str = "",
        seed: int = 0,
    ) -> None:
        self.target = target
        self.name = name or f"{target[0]}:{target[1]}"
        self._listen = (listen_host, listen_port)
        self._server: asyncio.Server | None = None
        self._connections: set[_Connection] = set()
        self.upstream = HEALTHY
        self.downstream = HEALTHY
        self.refuse = False
        self.counters = LinkCounters()
        self._random = random.Random(seed)
        """Jitter's draws (`delivery_time`): a link's schedule replays from its seed."""
        self._logger = structlog.get_logger("kraft.cluster.fault_proxy").bind(link=self.name)

    # --- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen (the port is bound on return)."""
        self._server = await asyncio.start_server(
            self._accept, self._listen[0], self._listen[1], reuse_address=True
        )

    @property
    def port(self) -> int:
        assert self._server is not None, "start() first"
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    @property
    def address(self) -> str:
        """``host:port`` to dial instead of the target."""
        return f"{self._listen[0]}:{self.port}"

    async def close(self) -> None:
        """Stop listening and abort every connection."""
        if self._server is not None:
            self._server.close()
            self.reset_connections()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    # --- faults ------------------------------------------------------------------------------

    def set_faults(
        self, *, upstream: LinkFaults | None = None, downstream: LinkFaults | None = None
    ) -> None:
        """Set either direction's faults (a direction not given keeps its own)."""
        if upstream is not None:
            self.upstream = upstream
        if downstream is not None:
            self.downstream = downstream
        self._logger.info(
            "link_faults_set", upstream=str(self.upstream), downstream=str(self.downstream)
        )

    def heal(self) -> None:
        """Both directions healthy, new connections accepted (open ones stay open)."""
        self.upstream = HEALTHY
        self.downstream = HEALTHY
        self.refuse = False

    def reset_connections(self) -> int:
        """Abort every open connection (both ends see a reset); how many there were."""
        connections = list(self._connections)
        for connection in connections:
            connection.abort()
        self._connections.clear()
        self.counters.resets += len(connections)
        return len(connections)

    @property
    def open_connections(self) -> int:
        return len(self._connections)

    # --- forwarding --------------------------------------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refuse:
            self.counters.refused += 1
            writer.transport.abort()
            return
        try:
            server_reader, server_writer = await asyncio.open_connection(*self.target)
        except OSError:
            # The node behind the link is down: the dialler sees what it would see without
            # the proxy, a connection that closes.
            writer.transport.abort()
            return
        connection = _Connection(client=writer, server=server_writer)
        self._connections.add(connection)
        self.counters.connections += 1
        connection.tasks = [
            asyncio.ensure_future(self._pump(reader, server_writer, upstream=True)),
            asyncio.ensure_future(self._pump(server_reader, writer, upstream=False)),
        ]
        try:
            await asyncio.gather(*connection.tasks, return_exceptions=True)
        finally:
            connection.abort()
            self._connections.discard(connection)

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, upstream: bool
    ) -> None:
        """Copy one direction until EOF, applying its faults to each chunk. A chunk read
        while the direction is delayed is written ``delay_ms`` after it was read; the order
        of chunks never changes."""
        pending: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()
        writer_task = asyncio.ensure_future(self._drain(pending, writer, upstream=upstream))
        due = 0.0
        try:
            while True:
                try:
                    chunk = await reader.read(CHUNK_BYTES)
                except (ConnectionError, OSError):
                    break
                if not chunk:
                    break
                faults = self.upstream if upstream else self.downstream
                if faults.drop:
                    if upstream:
                        self.counters.upstream_dropped_bytes += len(chunk)
                    else:
                        self.counters.downstream_dropped_bytes += len(chunk)
                    continue
                due = delivery_time(
                    time.monotonic(),
                    faults.delay_ms / 1000,
                    faults.jitter_ms / 1000,
                    self._random.random(),
                    due,
                )
                pending.put_nowait((due, chunk))
        finally:
            pending.put_nowait(None)
            with contextlib.suppress(asyncio.CancelledError, ConnectionError, OSError):
                await writer_task

    async def _drain(
        self,
        pending: asyncio.Queue[tuple[float, bytes] | None],
        writer: asyncio.StreamWriter,
        *,
        upstream: bool,
    ) -> None:
        while (item := await pending.get()) is not None:
            due, chunk = item
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            faults = self.upstream if upstream else self.downstream
            if faults.rate_bytes_per_s is not None:
                await asyncio.sleep(len(chunk) / faults.rate_bytes_per_s)
            writer.write(chunk)
            await writer.drain()
            if upstream:
                self.counters.upstream_bytes += len(chunk)
            else:
                self.counters.downstream_bytes += len(chunk)
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            if writer.can_write_eof():
                writer.write_eof()


__all__ = ["HEALTHY", "FaultProxy", "LinkCounters", "LinkFaults"]
