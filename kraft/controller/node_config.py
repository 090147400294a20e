"""A controller node's configuration: a Kafka-style properties file plus command-line flags.

This is the one place that turns Kafka's dotted keys into snake_case fields (STYLE §4)::

    # controller-1.properties
    process.roles=controller
    node.id=1
    controller.quorum.voters=1@127.0.0.1:9091,2@127.0.0.1:9092,3@127.0.0.1:9093
    listeners=CONTROLLER://127.0.0.1:9091
    log.dirs=/var/lib/kraft/controller-1
    broker.session.timeout.ms=3000
    metadata.log.max.record.bytes.between.snapshots=65536
    controller.quorum.election.timeout.ms=150

    config = ControllerNodeConfig.from_properties(load_properties("controller-1.properties"))

(`load_properties` and the other helpers of properties files, which brokers share, are in
`kraft.properties`.)

Keys read (unknown keys are ignored, as Kafka ignores keys meant for other components):

- ``node.id``; ``controller.quorum.voters`` (``id@host:port,...``, KIP-595), or
  ``controller.quorum.bootstrap.servers`` (the same syntax: the initial voters of a voter set
  that then lives in the log and changes, KIP-853);
- ``listeners`` (``NAME://host:port,...``; the first one is served; default: this node's
  address in the voters) ;
- ``metadata.log.dir``, else the first of ``log.dirs`` (``log.dir``): the Raft data directory;
- ``broker.session.timeout.ms``, ``num.partitions``, ``default.replication.factor``,
  ``auto.leader.rebalance.enable``, ``leader.imbalance.*`` (`ControllerConfig`);
- ``metadata.log.max.record.bytes.between.snapshots`` (KIP-630 snapshot interval);
- ``controller.quorum.*`` Raft timeouts (`RaftConfig.from_properties`);
- ``listeners=SSL://...`` with the ``ssl.*`` keys: mTLS (`kraft.security.tls.node_tls`).

Every key, its default and its range are in the config registry (`storage.config_registry`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraft.controller.core import ControllerConfig
from kraft.loop_watch import LOOP_STALL_LOG_MS, STALL_WARN_FIELD
from kraft.properties import (
    format_voters,
    int_property,
    listener_address,
    metrics_port_property,
    parse_voters,
    quorum_property,
)
from kraft.raft import RaftConfig
from kraft.security.settings import AuthorizationSettings
from kraft.security.tls import TlsConfig, node_tls
from kraft.transport.channels import SOCKET_REQUEST_MAX_BYTES
from storage.config import bool_fields_from_properties, int_fields_from_properties
from storage.config_key import ConfigType
from storage.config_registry import NODE_KEYS, node_property_fields
from storage.errors import InvalidConfigError

_CONTROLLER_ALL_FIELDS = node_property_fields("ControllerConfig")
_CONTROLLER_BOOL_FIELDS = {
    k: f for k, f in _CONTROLLER_ALL_FIELDS.items() if NODE_KEYS[k].type is ConfigType.BOOLEAN
}
_CONTROLLER_FIELDS = {
    k: f for k, f in _CONTROLLER_ALL_FIELDS.items() if k not in _CONTROLLER_BOOL_FIELDS
}
_NODE_FIELDS = {
    **node_property_fields("ControllerNodeConfig"),
    **STALL_WARN_FIELD,  # a key of both roles, held by each node config
}
"""Key -> field of `ControllerConfig` and of `ControllerNodeConfig`'s integer settings, from
the config registry (where their defaults and docs are)."""

DEFAULT_SNAPSHOT_INTERVAL_BYTES = int(
    NODE_KEYS["metadata.log.max.record.bytes.between.snapshots"].default or 0
)
"""Kafka's default is 20 MiB; kraft's metadata logs are small, and a small interval keeps the
snapshot path (KIP-630: take, trim, fetch, install) exercised in every local cluster."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerNodeConfig:
    """Everything one controller process needs (Kafka key in brackets)."""

    node_id: int
    """[node.id]"""
    voters: Mapping[int, str]
    """[controller.quorum.voters] id -> host:port of every voter."""
    listen: str
    """[listeners] the address this node serves Raft, Controller and health on."""
    data_dir: Path
    """[metadata.log.dir / log.dirs] the Raft log, election state and snapshots."""
    raft: RaftConfig = field(default_factory=RaftConfig)
    """[controller.quorum.*]"""
    controller: ControllerConfig = field(default_factory=ControllerConfig)
    """[broker.session.timeout.ms, num.partitions, default.replication.factor]"""
    snapshot_interval_bytes: int = DEFAULT_SNAPSHOT_INTERVAL_BYTES
    """[metadata.log.max.record.bytes.between.snapshots]"""
    socket_request_max_bytes: int = SOCKET_REQUEST_MAX_BYTES
    """[socket.request.max.bytes] the largest request the gRPC server accepts."""
    metrics_port: int = -1
    """[metrics.port] the Prometheus endpoint's port (-1: none, 0: a free one)."""
    event_loop_stall_warn_ms: int = LOOP_STALL_LOG_MS
    """[event.loop.stall.warn.ms] (`kraft.loop_watch`)"""
    authorization: AuthorizationSettings = field(default_factory=AuthorizationSettings)
    """[authorizer.class.name, super.users, allow.everyone.if.no.acl.found,
    ssl.principal.mapping.rules] (`kraft.security.guard`)."""
    tls: TlsConfig | None = None
    """[listeners=SSL://, ssl.*] the controller serves TLS and dials the other voters with its
    certificate (`kraft.security.tls.node_tls`); None: plaintext."""
    dynamic_voters: bool = False
    """[controller.quorum.bootstrap.servers] KIP-853: ``voters`` is the initial set; the set
    in use is the latest in the metadata log (`kraft quorum add-controller`)."""

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ControllerNodeConfig:
        """Build the config from properties (a file's, with flags already merged in).

        Raises:
            InvalidConfigError: a required key is missing or a value is malformed.
        """
        quorum, dynamic = quorum_property(props)
        missing = [k for k in ("node.id",) if not props.get(k)]
        if quorum is None:
            missing.append("controller.quorum.voters")
        data_dir = (
            props.get("metadata.log.dir")
            or (props.get("log.dirs") or props.get("log.dir") or "").split(",")[0].strip()
        )
        if not data_dir:
            missing.append("log.dirs")
        if missing:
            raise InvalidConfigError(f"missing required config: {', '.join(missing)}")
        node_id = int_property(props, "node.id", -1)
        voters = parse_voters(str(quorum))
        listeners = props.get("listeners", "").strip()
        listen = listener_address(listeners) if listeners else voters.get(node_id, "")
        if not listen:
            raise InvalidConfigError(
                f"node {node_id} is not in controller.quorum.voters and has no listeners"
            )
        controller_fields: dict[str, Any] = {
            **int_fields_from_properties(props, _CONTROLLER_FIELDS),
            **bool_fields_from_properties(props, _CONTROLLER_BOOL_FIELDS),
        }
        node_fields = int_fields_from_properties(props, _NODE_FIELDS)  # ranges checked
        return cls(
            node_id=node_id,
            voters=voters,
            listen=listen,
            data_dir=Path(data_dir),
            raft=RaftConfig.from_properties(props),
            controller=ControllerConfig(**controller_fields),
            metrics_port=metrics_port_property(props),
            authorization=AuthorizationSettings.from_properties(props),
            tls=node_tls(props),
            dynamic_voters=dynamic,
            **node_fields,
        )

    def to_properties(self) -> dict[str, str]:
        """The config as properties (`from_properties` inverts it)."""
        return {
            "process.roles": "controller",
            "node.id": str(self.node_id),
            (
                "controller.quorum.bootstrap.servers"
                if self.dynamic_voters
                else "controller.quorum.voters"
            ): format_voters(self.voters),
            "listeners": f"{'CONTROLLER' if self.tls is None else 'SSL'}://{self.listen}",
            "log.dirs": str(self.data_dir),
            **{k: str(getattr(self.controller, f)) for k, f in _CONTROLLER_FIELDS.items()},
            **{
                k: str(getattr(self.controller, f)).lower()
                for k, f in _CONTROLLER_BOOL_FIELDS.items()
            },
            **{k: str(getattr(self, f)) for k, f in _NODE_FIELDS.items()},
            **self.raft.to_properties(),
            **({"metrics.port": str(self.metrics_port)} if self.metrics_port != -1 else {}),
            **self.authorization.to_properties(),
            **(self.tls.to_properties() if self.tls is not None else {}),
        }


__all__ = ["DEFAULT_SNAPSHOT_INTERVAL_BYTES", "ControllerNodeConfig"]
