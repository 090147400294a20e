"""Where a `LocalCluster`'s nodes listen: node ids and loopback addresses, from one port draw."""

from __future__ import annotations

from dataclasses import dataclass, field

from kraft.cluster.ports import free_ports

BROKER_ID_BASE = 100
"""Broker ids are 101, 102, ...: disjoint from the controllers' 1, 2, 3 (one Raft id space)."""


@dataclass(frozen=True, slots=True)
class ClusterAddresses:
    controller_ids: list[int]
    controller_addresses: dict[int, str]
    broker_ids: list[int]
    broker_addresses: dict[int, str]
    """Each broker's gRPC (inter-broker) listener."""
    kafka_addresses: dict[int, str] = field(default_factory=dict)
    """Each broker's Kafka-protocol listener (issue 25), if the cluster has them."""
    metrics_addresses: dict[int, str] = field(default_factory=dict)
    """Each node's Prometheus endpoint, if the cluster has them."""


def plan_addresses(
    controllers: int, brokers: int, base_port: int | None, *, metrics: bool, kafka: bool
) -> ClusterAddresses:
    """Ports in this order: controllers, brokers, the nodes' metrics endpoints (``metrics``),
    the brokers' Kafka listeners (``kafka``); free ones, or consecutive from ``base_port``.

    NB: one draw of free ports for all (two draws may return one port twice).
    """
    nodes = controllers + brokers
    drawn = nodes * (2 if metrics else 1) + (brokers if kafka else 0)
    ports = free_ports(drawn) if base_port is None else [base_port + i for i in range(drawn)]
    controller_ids = list(range(1, controllers + 1))
    broker_ids = [BROKER_ID_BASE + i for i in range(1, brokers + 1)]
    node_ids = [*controller_ids, *broker_ids]

    def addresses(ids: list[int], first: int) -> dict[int, str]:
        return {i: f"127.0.0.1:{p}" for i, p in zip(ids, ports[first:], strict=False)}

    return ClusterAddresses(
        controller_ids=controller_ids,
        controller_addresses=addresses(controller_ids, 0),
        broker_ids=broker_ids,
        broker_addresses=addresses(broker_ids, controllers),
        metrics_addresses=addresses(node_ids, nodes) if metrics else {},
        kafka_addresses=addresses(broker_ids, drawn - brokers) if kafka else {},
    )


__all__ = ["BROKER_ID_BASE", "ClusterAddresses", "plan_addresses"]
