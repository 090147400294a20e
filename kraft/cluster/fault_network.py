"""`FaultNetwork`: a `FaultProxy` per (source, destination) link, and partitions over them.

A link is named by who dials whom: ``("client", 101)`` is the clients' way to broker 101,
``(1, 2)`` is controller 1's way to controller 2. Each link is its own proxy with its own
port, so the configuration of node ``s`` points at the proxy of ``(s, d)`` for every ``d``
it dials, and a fault on one link leaves the others alone. Partitions are sets of links
made to drop:

- `isolate(node)`: every link to and from ``node`` drops both ways;
- `partition(side_a, side_b)`: every link between the two sides drops both ways (a
  majority/minority split, or any other); nodes on neither side are untouched (a bridge is
  a node left out of both sides);
- `cut(source, destination)`: one link, both directions of its traffic (what ``source``
  sends and what it gets back), or only ``upstream``: a one-way partition;
- `heal()`: every link healthy again.

The proxies run in a child process of their own (`FaultNetwork`), on an event loop there
(`LocalFaultNetwork`, which tests may also use in-process): the proxies then never wait for
this process's GIL, which the clients of a fault run keep busy, and a link's latency is the
network's, not the harness's. The sync methods may be called from any thread (a test, the
nemesis scheduler)::

    with FaultNetwork() as network:
        address = network.add_link("client", 101, target=("127.0.0.1", 9092))
        network.isolate(101)
        network.heal()
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import threading
from collections.abc import Callable, Collection, Coroutine, Hashable
from concurrent.futures import Future
from multiprocessing.connection import Connection
from typing import Any, Final, Self, TypeVar, cast, final

import structlog

from kraft.cluster.fault_proxy import HEALTHY, FaultProxy, LinkCounters, LinkFaults
from kraft.cluster.process import PARENT_PID_ENV, die_with_parent
from kraft.logs import ensure_configured

Endpoint = Hashable
"""A node id, or a name such as ``"client"``."""

Link = tuple[Endpoint, Endpoint]
"""``(source, destination)``: who dials whom."""

_T = TypeVar("_T")

DROP: LinkFaults = LinkFaults(drop=True)


@final
class LocalFaultNetwork:
    """The fault proxies of a cluster's links, in this process (see the module docstring)."""

    def __init__(self, listen_host: str = "127.0.0.1") -> None:
        self._listen_host = listen_host
        self._links: dict[Link, FaultProxy] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="fault-network", daemon=True
        )
        self._thread.start()
        self._logger = structlog.get_logger("kraft.cluster.fault_network")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _call(self, fn: Callable[[], Coroutine[Any, Any, _T]], timeout: float = 10.0) -> _T:
        future: Future[_T] = asyncio.run_coroutine_threadsafe(fn(), self._loop)
        return future.result(timeout)

    def _run(self, fn: Callable[[], _T]) -> _T:
        async def call() -> _T:
            return fn()

        return self._call(call)

    # --- links -------------------------------------------------------------------------------

    def add_link(
        self,
        source: Endpoint,
        destination: Endpoint,
        target: tuple[str, int],
        listen_port: int = 0,
    ) -> str:
        """Start the proxy of ``(source, destination)`` in front of ``target``; the address
        ``source`` must dial to reach ``destination``.

        Raises:
            ValueError: the link exists already.
        """
        link = (source, destination)
        if link in self._links:
            raise ValueError(f"link {source}->{destination} exists already")
        proxy = FaultProxy(
            target,
            listen_host=self._listen_host,
            listen_port=listen_port,
            name=f"{source}->{destination}",
        )
        self._call(proxy.start)
        self._links[link] = proxy
        return proxy.address

    def address(self, source: Endpoint, destination: Endpoint) -> str:
        """The proxy address of ``(source, destination)``.

        Raises:
            KeyError: no such link.
        """
        return self._links[(source, destination)].address

    @property
    def links(self) -> list[Link]:
        return list(self._links)

    def counters(self, source: Endpoint, destination: Endpoint) -> LinkCounters:
        return self._links[(source, destination)].counters

    def faults(self, source: Endpoint, destination: Endpoint) -> tuple[LinkFaults, LinkFaults]:
        """``(upstream, downstream)`` of one link."""
        proxy = self._links[(source, destination)]
        return proxy.upstream, proxy.downstream

    # --- faults ------------------------------------------------------------------------------

    def set_faults(
        self,
        source: Endpoint,
        destination: Endpoint,
        *,
        upstream: LinkFaults | None = None,
        downstream: LinkFaults | None = None,
    ) -> None:
        proxy = self._links[(source, destination)]
        self._run(lambda: proxy.set_faults(upstream=upstream, downstream=downstream))

    def cut(self, source: Endpoint, destination: Endpoint, *, one_way: bool = False) -> None:
        """Drop what ``source`` sends to ``destination`` (and, unless ``one_way``, the
        replies on that link too)."""
        self.set_faults(source, destination, upstream=DROP, downstream=HEALTHY if one_way else DROP)

    def isolate(self, node: Endpoint) -> list[Link]:
        """Drop every link to and from ``node``, both ways; the links cut."""
        cut = [link for link in self._links if node in link]
        for link in cut:
            self.cut(*link)
        self._logger.info("node_isolated", node=str(node), links=len(cut))
        return cut

    def partition(self, side_a: Collection[Endpoint], side_b: Collection[Endpoint]) -> list[Link]:
        """Drop every link between the two sides, both ways; the links cut."""
        a, b = set(side_a), set(side_b)
        if a & b:
            raise ValueError(f"a node on both sides: {sorted(map(str, a & b))}")
        cut = [(s, d) for (s, d) in self._links if (s in a and d in b) or (s in b and d in a)]
        for link in cut:
            self.cut(*link)
        self._logger.info(
            "network_partitioned", side_a=sorted(map(str, a)), side_b=sorted(map(str, b))
        )
        return cut

    def slow(
        self,
        node: Endpoint,
        *,
        delay_ms: int = 0,
        jitter_ms: int = 0,
        rate_bytes_per_s: int | None = None,
    ) -> None:
        """Delay (varied by up to ``jitter_ms`` either way) and optionally throttle every link
        to and from ``node``, both ways."""
        faults = LinkFaults(
            delay_ms=delay_ms, jitter_ms=jitter_ms, rate_bytes_per_s=rate_bytes_per_s
        )
        for link in self._links:
            if node in link:
                self.set_faults(*link, upstream=faults, downstream=faults)

    def reset(self, node: Endpoint | None = None) -> int:
        """Reset the open connections of every link touching ``node`` (all if None)."""
        proxies = [p for link, p in self._links.items() if node is None or node in link]
        return sum(self._run(p.reset_connections) for p in proxies)

    def heal(self) -> None:
        """Every link healthy again."""
        for proxy in self._links.values():
            self._run(proxy.heal)
        self._logger.info("network_healed")

    # --- shutdown ----------------------------------------------------------------------------

    def close(self) -> None:
        """Stop every proxy and the thread (idempotent)."""
        if not self._thread.is_alive():
            return
        for proxy in self._links.values():
            try:
                self._call(proxy.close)
            except Exception:
                self._logger.warning("fault_proxy_close_failed", link=proxy.name)
        self._links.clear()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()


_REMOTE_METHODS: Final = frozenset(
    {
        "add_link",
        "address",
        "counters",
        "faults",
        "set_faults",
        "cut",
        "isolate",
        "partition",
        "slow",
        "reset",
        "heal",
    }
)


def _serve(connection: Connection, listen_host: str, parent_pid: int) -> None:
    """The child process: a `LocalFaultNetwork` driven by calls over ``connection``."""
    os.environ[PARENT_PID_ENV] = str(parent_pid)
    die_with_parent()
    ensure_configured()  # warnings to stderr; the faults set are the caller's to log
    network = LocalFaultNetwork(listen_host)
    try:
        while True:
            try:
                request = connection.recv()
            except EOFError:
                return
            if request is None:
                return
            name, args, kwargs = request
            try:
                if name == "links":
                    connection.send((True, network.links))
                elif name in _REMOTE_METHODS:
                    connection.send((True, getattr(network, name)(*args, **kwargs)))
                else:
                    connection.send((False, AttributeError(name)))
            except Exception as e:
                connection.send((False, e))
    finally:
        network.close()


@final
class FaultNetwork:
    """`LocalFaultNetwork`'s methods, run by a child process (see the module docstring)."""

    def __init__(self, listen_host: str = "127.0.0.1") -> None:
        context = multiprocessing.get_context("spawn")  # never fork a process with gRPC in it
        self._connection, child = context.Pipe()
        self._process = context.Process(
            target=_serve,
            args=(child, listen_host, os.getpid()),
            name="kraft-fault-network",
            daemon=True,
        )
        self._process.start()
        child.close()
        self._lock = threading.Lock()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            if not self._process.is_alive():
                raise RuntimeError("the fault network's process is gone")
            self._connection.send((name, args, kwargs))
            if not self._connection.poll(30):
                raise TimeoutError(f"the fault network did not answer {name} within 30s")
            ok, value = self._connection.recv()
        if not ok:
            raise value
        return value

    def add_link(
        self,
        source: Endpoint,
        destination: Endpoint,
        target: tuple[str, int],
        listen_port: int = 0,
    ) -> str:
        return cast(str, self._call("add_link", source, destination, target, listen_port))

    def address(self, source: Endpoint, destination: Endpoint) -> str:
        return cast(str, self._call("address", source, destination))

    @property
    def links(self) -> list[Link]:
        return cast(list[Link], self._call("links"))

    def counters(self, source: Endpoint, destination: Endpoint) -> LinkCounters:
        return cast(LinkCounters, self._call("counters", source, destination))

    def faults(self, source: Endpoint, destination: Endpoint) -> tuple[LinkFaults, LinkFaults]:
        return cast(tuple[LinkFaults, LinkFaults], self._call("faults", source, destination))

    def set_faults(
        self,
        source: Endpoint,
        destination: Endpoint,
        *,
        upstream: LinkFaults | None = None,
        downstream: LinkFaults | None = None,
    ) -> None:
        self._call("set_faults", source, destination, upstream=upstream, downstream=downstream)

    def cut(self, source: Endpoint, destination: Endpoint, *, one_way: bool = False) -> None:
        self._call("cut", source, destination, one_way=one_way)

    def isolate(self, node: Endpoint) -> list[Link]:
        return cast(list[Link], self._call("isolate", node))

    def partition(self, side_a: Collection[Endpoint], side_b: Collection[Endpoint]) -> list[Link]:
        return cast(list[Link], self._call("partition", set(side_a), set(side_b)))

    def slow(
        self,
        node: Endpoint,
        *,
        delay_ms: int = 0,
        jitter_ms: int = 0,
        rate_bytes_per_s: int | None = None,
    ) -> None:
        self._call(
            "slow", node, delay_ms=delay_ms, jitter_ms=jitter_ms, rate_bytes_per_s=rate_bytes_per_s
        )

    def reset(self, node: Endpoint | None = None) -> int:
        return cast(int, self._call("reset", node))

    def heal(self) -> None:
        self._call("heal")

    def close(self) -> None:
        """Stop the proxies and the child process (idempotent)."""
        with self._lock:
            if self._process.is_alive():
                with contextlib.suppress(OSError, BrokenPipeError):
                    self._connection.send(None)
                self._process.join(timeout=10)
                if self._process.is_alive():
                    self._process.kill()
                    self._process.join(timeout=5)
            self._connection.close()


__all__ = ["DROP", "Endpoint", "FaultNetwork", "Link", "LocalFaultNetwork"]
