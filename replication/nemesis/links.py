"""The network faults of a nemesis run, on either kind of network it runs on:

- `ProxyLinks`: a `LocalCluster` on loopback with a TCP fault proxy on every link
  (`kraft.cluster.fault_network`, ``--network local``, the default);
- `HostLinks`: a `NetnsCluster`, one network namespace per node, faults on the hosts' links
  (`kraft.cluster.netns`, ``--network netns``): packets dropped, lost, delayed (netem, or the
  delaying relay where the kernel has no netem) or throttled, as on a real network.

Both take node ids and give the nemesis the same verbs. A partition between two sides drops
what each side sends to the other; clients on this machine still reach both sides, as the
proxies' partitions leave the client links alone.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from kraft.cluster.fault_network import DROP

if TYPE_CHECKING:
    from kraft.cluster.fault_network import FaultNetwork
    from kraft.cluster.local import LocalCluster
    from kraft.cluster.netns_cluster import NetnsCluster


class ProxyLinks:
    """Faults through the proxies of a `LocalCluster(fault_network=True)`."""

    def __init__(self, network: FaultNetwork) -> None:
        self.network = network

    def isolate(self, node: int) -> None:
        self.network.isolate(node)

    def partition(self, side_a: Collection[int], side_b: Collection[int]) -> None:
        self.network.partition(set(side_a), set(side_b))

    def one_way(self, node: int) -> None:
        """What ``node`` sends is dropped, on every link; what it receives arrives."""
        for source, destination in self.network.links:
            if source == node:
                self.network.cut(source, destination, one_way=True)
            elif destination == node:
                self.network.set_faults(source, destination, downstream=DROP)

    def slow(
        self, node: int, *, delay_ms: int = 0, jitter_ms: int = 0, rate_bytes_per_s: int | None
    ) -> str:
        self.network.slow(
            node, delay_ms=delay_ms, jitter_ms=jitter_ms, rate_bytes_per_s=rate_bytes_per_s
        )
        return "proxy"

    def loss(self, node: int, percent: float) -> None:
        raise ValueError("packet loss needs --network netns (a TCP proxy carries bytes)")

    def disorder(self, node: int, *, reorder_ms: int = 0, duplicate_percent: float = 0.0) -> str:
        raise ValueError("reordered or duplicated packets need --network netns")

    def heal(self, *, reset: bool = True) -> None:
        """Every link healthy; with ``reset`` the connections that lived through a blackhole
        start afresh."""
        self.network.heal()
        if reset:
            self.network.reset()


class HostLinks:
    """Faults on the links of a `NetnsCluster`'s hosts (``seed``: the delay relays' jitter).
    `heal` touches only the hosts given a fault since the last heal: each host's heal is a
    dozen ``ip``/``tc`` runs, which take seconds on a loaded machine."""

    def __init__(self, cluster: NetnsCluster, seed: int = 0) -> None:
        assert cluster.network is not None
        self.network = cluster.network
        self.host_name = cluster.host_name
        self.seed = seed
        self._delays = 0
        self._faulted: set[str] = set()

    def host(self, node: int) -> str:
        """The host of ``node``, remembered for `heal`.

        Raises:
            ValueError: no host is ``node``'s (a role that resolved to no node, -1): nothing
                is remembered, so `heal` still heals every other host.
        """
        name = self.host_name(node)
        if name not in self.network.hosts:
            raise ValueError(f"no host for node {node}")
        self._faulted.add(name)
        return name

    def isolate(self, node: int) -> None:
        self.network.isolate(self.host(node))

    def partition(self, side_a: Collection[int], side_b: Collection[int]) -> None:
        for here, there in ((side_a, side_b), (side_b, side_a)):
            for node in here:
                self.network.cut(self.host(node), [self.host_name(n) for n in there])

    def one_way(self, node: int) -> None:
        self.network.cut(self.host(node))

    def slow(
        self, node: int, *, delay_ms: int = 0, jitter_ms: int = 0, rate_bytes_per_s: int | None
    ) -> str:
        """Delay (netem or the relay: which ran is returned) and/or a token bucket."""
        ran = "tbf"
        if rate_bytes_per_s is not None:
            self.network.bandwidth(self.host(node), max(8, rate_bytes_per_s * 8 // 1000))
        if delay_ms:
            self._delays += 1
            ran = self.network.delay(
                self.host(node),
                delay_ms,
                jitter_ms=jitter_ms,
                seed=self.seed * 1000 + self._delays,
            )
        return ran

    def loss(self, node: int, percent: float) -> None:
        self.network.loss(self.host(node), percent, "both")

    def disorder(self, node: int, *, reorder_ms: int = 0, duplicate_percent: float = 0.0) -> str:
        """Packets held each up to twice ``reorder_ms`` at its own time (overtaking each
        other), and ``duplicate_percent`` of them sent twice (netem or the relay)."""
        self._delays += 1
        return self.network.delay(
            self.host(node),
            reorder_ms,
            jitter_ms=reorder_ms,
            seed=self.seed * 1000 + self._delays,
            reorder=reorder_ms > 0,
            duplicate_percent=duplicate_percent,
        )

    def heal(self, *, reset: bool = True) -> None:
        """Every fault removed (connections survive, as on a real network)."""
        for name in sorted(self._faulted):
            self.network.heal(name)
        self._faulted.clear()


def fault_cluster(
    network: str,
    *,
    controllers: int,
    brokers: int,
    data_dir: Path,
    broker_config: Mapping[str, str],
    controller_config: Mapping[str, str] | None = None,
) -> LocalCluster | NetnsCluster:
    """A cluster (not started) whose network faults `links_of` injects: ``netns``, a host
    per node; ``local``, loopback with a fault proxy on every link."""
    from kraft.cluster.local import LocalCluster
    from kraft.cluster.netns_cluster import NetnsCluster

    if network == "netns":
        return NetnsCluster(
            controllers=controllers,
            brokers=brokers,
            data_dir=data_dir,
            broker_config=broker_config,
            controller_config=controller_config,
        )
    return LocalCluster(
        controllers,
        brokers,
        data_dir=data_dir,
        fault_network=True,
        broker_config=broker_config,
        controller_config=controller_config,
    )


def links_of(cluster: LocalCluster | NetnsCluster, seed: int = 0) -> ProxyLinks | HostLinks:
    """The faults of ``cluster``'s network: its proxies (a `LocalCluster` started with
    ``fault_network=True``) or its hosts' links."""
    from kraft.cluster.netns_cluster import NetnsCluster

    if isinstance(cluster, NetnsCluster):
        return HostLinks(cluster, seed)
    if cluster.network is None:
        raise ValueError("LocalCluster(fault_network=True) is needed for network faults")
    return ProxyLinks(cluster.network)


__all__ = ["HostLinks", "ProxyLinks", "fault_cluster", "links_of"]
