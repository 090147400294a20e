"""Kafka-style node properties files, shared by controllers and brokers: reading and writing
``key=value`` files, and the values every node parses the same way (the KIP-595 voter list,
listeners, integers). What each key means, its default and its range are in the config
registry (`storage.config_registry`); the node configs (`kraft.controller.node_config`,
`replication.broker.config`) read their keys with these helpers.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from storage.errors import InvalidConfigError


def load_properties(path: str | Path) -> dict[str, str]:
    """Parse a Java ``.properties`` file: ``key=value`` or ``key: value`` lines, ``#``/``!``
    comments, a trailing backslash continues a line.

    Raises:
        OSError: the file cannot be read.
        InvalidConfigError: a non-comment line has no key.
    """
    props: dict[str, str] = {}
    pending = ""
    for number, raw in enumerate(Path(path).read_text().splitlines(), start=1):
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        key, value = _split(line)
        if not key:
            raise InvalidConfigError(f"{path}:{number}: no key in {raw!r}")
        props[key] = value
    if pending:
        key, value = _split(pending)
        props[key] = value
    return props


def _split(line: str) -> tuple[str, str]:
    positions = [i for i in (line.find("="), line.find(":")) if i >= 0]
    if not positions:
        return line.strip(), ""
    i = min(positions)
    return line[:i].strip(), line[i + 1 :].strip()


def parse_voters(spec: str) -> dict[int, str]:
    """``"1@host:9091,2@host:9092"`` -> ``{1: "host:9091", 2: "host:9092"}`` (KIP-595 format).

    Raises:
        InvalidConfigError: an entry is not ``id@host:port`` or an id repeats.
    """
    voters: dict[int, str] = {}
    for entry in filter(None, (e.strip() for e in spec.split(","))):
        node, sep, address = entry.partition("@")
        host, colon, port = address.rpartition(":")
        if not sep or not colon or not host or not port.isdigit() or not node.strip().isdigit():
            raise InvalidConfigError(
                f"controller.quorum.voters: expected id@host:port, got {entry!r}"
            )
        node_id = int(node)
        if node_id in voters:
            raise InvalidConfigError(f"controller.quorum.voters: node {node_id} listed twice")
        voters[node_id] = address
    if not voters:
        raise InvalidConfigError("controller.quorum.voters is empty")
    return voters


def quorum_property(props: Mapping[str, str]) -> tuple[str | None, bool]:
    """Where a node finds the controller quorum: ``controller.quorum.voters`` (a static voter
    set) or ``controller.quorum.bootstrap.servers`` (KIP-853: the voters then live in the
    metadata log), never both. Returns the spec (None when neither is set) and whether the
    voter set is dynamic.

    Raises:
        InvalidConfigError: both are set.
    """
    static = props.get("controller.quorum.voters")
    bootstrap = props.get("controller.quorum.bootstrap.servers")
    if static and bootstrap:
        raise InvalidConfigError(
            "set controller.quorum.voters (static) or controller.quorum.bootstrap.servers "
            "(dynamic, KIP-853), not both"
        )
    return (static or bootstrap or None), bool(bootstrap) and not static


def format_voters(voters: Mapping[int, str]) -> str:
    """The inverse of `parse_voters`."""
    return ",".join(f"{node_id}@{address}" for node_id, address in sorted(voters.items()))


def listener_address(spec: str) -> str:
    """The ``host:port`` of the first listener of ``CONTROLLER://host:port,...``."""
    first = spec.split(",")[0].strip()
    return first.split("://", 1)[1] if "://" in first else first


def int_property(props: Mapping[str, str], key: str, default: int) -> int:
    """An integer property, ``default`` when absent or empty.

    Raises:
        InvalidConfigError: the value is not an integer.
    """
    raw = props.get(key)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw.strip())
    except ValueError:
        raise InvalidConfigError(f"{key}: not an integer: {raw!r}") from None


def metrics_port_property(props: Mapping[str, str]) -> int:
    """``metrics.port``: -1 (no endpoint, the default), 0 (a free port) or a port.

    Raises:
        InvalidConfigError: not an integer in [-1, 65535].
    """
    port = int_property(props, "metrics.port", -1)
    if not -1 <= port <= 65535:
        raise InvalidConfigError(f"metrics.port: must be -1, 0 or a port, got {port}")
    return port


def write_properties(path: str | Path, props: Mapping[str, str]) -> None:
    """Write ``props`` as a properties file, keys sorted."""
    lines = [f"{key}={value}" for key, value in sorted(props.items())]
    Path(path).write_text("\n".join(lines) + "\n")


__all__ = [
    "format_voters",
    "int_property",
    "listener_address",
    "load_properties",
    "parse_voters",
    "quorum_property",
    "write_properties",
]
