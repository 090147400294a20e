"""Where a cluster's nodes listen: a `LocalCluster`'s node ids and loopback addresses, from one
port draw (`plan_addresses`), and the listener keys of a node's properties file, the one home of
how kraft's own clusters configure them (`listener_properties`: `LocalCluster`, ``kraft cluster
up``, `NetnsCluster`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

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


KAFKA_LISTENER = "KAFKA"
"""The name of a broker's Kafka-protocol listener in the clusters kraft starts."""


def listener_properties(
    address: str,
    *,
    name: str = "PLAINTEXT",
    kafka: str = "",
    kafka_advertised: str = "",
    keystore: Path | None = None,
    truststore: Path | None = None,
) -> dict[str, str]:
    """A node's listener keys, as an operator writes them (docs/operations.md):

    - ``listeners``: the gRPC listener at ``address`` (named ``name``, or ``SSL`` with a
      ``keystore``), then, for a broker with ``kafka``, its Kafka listener ``KAFKA`` bound there
      (``0.0.0.0:9192`` binds every interface);
    - ``listener.security.protocol.map`` (with ``kafka``): each listener's protocol, the
      Kafka listener's the gRPC listener's (PLAINTEXT, or SSL with the same certificate);
    - ``advertised.listeners`` (with ``kafka_advertised``: where Kafka clients reach the Kafka
      listener, when that is not where it binds): both listeners' addresses;
    - with ``keystore`` and ``truststore``: the ``ssl.*`` keys, mTLS
      (``ssl.client.auth=required``).
    """
    tls = keystore is not None
    grpc = "SSL" if tls else name
    listeners = [f"{grpc}://{address}", *([f"{KAFKA_LISTENER}://{kafka}"] if kafka else [])]
    props = {"listeners": ",".join(listeners)}
    if kafka:
        protocol = "SSL" if tls else "PLAINTEXT"
        props["listener.security.protocol.map"] = f"{grpc}:{protocol},{KAFKA_LISTENER}:{protocol}"
    if kafka_advertised:
        props["advertised.listeners"] = f"{grpc}://{address},{KAFKA_LISTENER}://{kafka_advertised}"
    if keystore is not None:
        assert truststore is not None, "a keystore needs a truststore"
        props.update(  # ssl.keystore.type and ssl.truststore.type: PEM, the default
            {
                "ssl.keystore.location": str(keystore),
                "ssl.truststore.location": str(truststore),
                "ssl.client.auth": "required",
            }
        )
    return props


__all__ = [
    "BROKER_ID_BASE",
    "KAFKA_LISTENER",
    "ClusterAddresses",
    "listener_properties",
    "plan_addresses",
]
