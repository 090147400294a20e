"""A blocking Kafka-protocol client for the differential test: kio requests over plain sockets.

The same code, and the same request bytes, go to both systems. It negotiates nothing per
system: `Session` is given one version per API (`common_versions`, the newest both serve, up
to the version kraft's own listener tops at), so kraft and Kafka get identical requests. An
API a system does not advertise raises `NotServed` instead of being sent, because a broker
closes the connection on an unknown API key.

Requests are plain mappings of kio's field names (`replication.broker.kafka.entities.build`
fills what a version needs), responses are kio entities, read field by field by the steps.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Mapping
from typing import Any

from kio.index import load_request_schema, load_response_schema

from replication.broker.kafka.entities import build, read_entity, to_chunks

API_VERSIONS = 18
METADATA = 3

PREFERRED: Mapping[int, int] = {
    0: 9,  # Produce: v9 is flexible and the newest without topic ids in both
    1: 12,  # Fetch: the newest by topic name
    2: 6,  # ListOffsets
    3: 12,  # Metadata
    8: 8,  # OffsetCommit
    9: 8,  # OffsetFetch
    10: 4,  # FindCoordinator (batched keys)
    11: 7,  # JoinGroup
    12: 4,  # Heartbeat
    13: 4,  # LeaveGroup
    14: 5,  # SyncGroup
    19: 7,  # CreateTopics
    20: 6,  # DeleteTopics
    22: 4,  # InitProducerId
    24: 3,  # AddPartitionsToTxn: v3, a client's (v4+ is between brokers, KIP-890)
    26: 4,  # EndTxn: v4 (v5 bumps the epoch at every transaction, KIP-890's version 2)
    29: 3,  # DescribeAcls
    30: 3,  # CreateAcls
    32: 4,  # DescribeConfigs
    68: 1,  # ConsumerGroupHeartbeat: v1, the member id chosen by the client (KIP-1082)
    69: 0,  # ConsumerGroupDescribe
}
"""The version this client would like to send of each API it uses."""

API_NAMES: Mapping[int, str] = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    18: "ApiVersions",
    19: "CreateTopics",
    20: "DeleteTopics",
    22: "InitProducerId",
    24: "AddPartitionsToTxn",
    26: "EndTxn",
    29: "DescribeAcls",
    30: "CreateAcls",
    32: "DescribeConfigs",
    68: "ConsumerGroupHeartbeat",
    69: "ConsumerGroupDescribe",
}


class NotServed(Exception):
    """The system does not advertise this API (or no version this client speaks)."""

    def __init__(self, api_key: int) -> None:
        super().__init__(f"{API_NAMES.get(api_key, api_key)} not served")
        self.api_key = api_key


class Connection:
    """One socket to one broker; requests answered in order (Kafka's rule)."""

    def __init__(self, address: str, timeout: float = 30.0) -> None:
        host, _, port = address.rpartition(":")
        self.address = address
        self._sock = socket.create_connection((host, int(port)), timeout=timeout)
        self._correlation = 0

    def close(self) -> None:
        self._sock.close()

    def send(self, api_key: int, version: int, body: Mapping[str, Any]) -> Any:
        """Send one request and return the kio response entity."""
        self._correlation += 1
        cls = load_request_schema(api_key, version)
        header = build(
            cls.__header_schema__,
            {
                "request_api_key": api_key,
                "request_api_version": version,
                "correlation_id": self._correlation,
                "client_id": "kraft-interop",
            },
        )
        payload = to_chunks(header).joined() + to_chunks(build(cls, body)).joined()
        self._sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", self._recv(4))
        frame = self._recv(size)
        response_cls = load_response_schema(api_key, version)
        header_entity, offset = read_entity(response_cls.__header_schema__, frame, 0)
        if int(header_entity.correlation_id) != self._correlation:
            raise ConnectionError(f"{self.address}: answer out of order")
        entity, _ = read_entity(response_cls, frame, offset)
        return entity

    def _recv(self, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self._sock.recv(n - len(chunks))
            if not chunk:
                raise ConnectionError(f"{self.address} closed the connection")
            chunks += chunk
        return bytes(chunks)


def served_versions(address: str) -> dict[int, tuple[int, int]]:
    """ApiVersions (v3) of the broker at ``address``: api key -> (min, max)."""
    conn = Connection(address)
    try:
        answer = conn.send(
            API_VERSIONS,
            3,
            {"client_software_name": "kraft-interop", "client_software_version": "1"},
        )
    finally:
        conn.close()
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in answer.api_keys}


def common_versions(*served: Mapping[int, tuple[int, int]]) -> dict[int, int]:
    """The one version of each API sent to every system: the preferred one, lowered to the
    newest that every system serving the API serves (a system not serving it gets none)."""
    out: dict[int, int] = {}
    for key, want in PREFERRED.items():
        tops = [ranges[key][1] for ranges in served if key in ranges]
        floors = [ranges[key][0] for ranges in served if key in ranges]
        if tops:
            version = min(want, *tops)
            if version >= max(floors):
                out[key] = version
    return out


class Session:
    """Connections to one system's brokers, by node id, found through Metadata."""

    def __init__(
        self,
        bootstrap: str,
        versions: Mapping[int, int],
        served: Mapping[int, tuple[int, int]],
    ) -> None:
        self.bootstrap = bootstrap.split(",")[0]
        self.versions = dict(versions)
        self.served = dict(served)
        self._boot = Connection(self.bootstrap)
        self._nodes: dict[int, Connection] = {}
        self.brokers: dict[int, str] = {}

    def close(self) -> None:
        for conn in [self._boot, *self._nodes.values()]:
            conn.close()
        self._nodes.clear()

    def version(self, api_key: int) -> int:
        lo_hi = self.served.get(api_key)
        version = self.versions.get(api_key)
        if lo_hi is None or version is None or not lo_hi[0] <= version <= lo_hi[1]:
            raise NotServed(api_key)
        return version

    def send(self, api_key: int, body: Mapping[str, Any], node: int | None = None) -> Any:
        """Send to ``node`` (a broker id) or to the bootstrap broker."""
        version = self.version(api_key)
        return self.connection(node).send(api_key, version, body)

    def connection(self, node: int | None) -> Connection:
        if node is None:
            return self._boot
        conn = self._nodes.get(node)
        if conn is None:
            if node not in self.brokers:
                self.metadata([])
            conn = self._nodes[node] = Connection(self.brokers[node])
        return conn

    def fresh_connection(self, node: int) -> Connection:
        """A new connection of its own to ``node`` (a group member's)."""
        if node not in self.brokers:
            self.metadata([])
        return Connection(self.brokers[node])

    def metadata(self, topics: list[str] | None) -> Any:
        body = {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": False,
        }
        answer = self.send(METADATA, body)
        self.brokers = {int(b.node_id): f"{b.host}:{b.port}" for b in answer.brokers}
        return answer

    def leader(self, topic: str, partition: int = 0) -> int:
        for t in self.metadata([topic]).topics:
            for p in t.partitions:
                if int(p.partition_index) == partition and int(p.leader_id) >= 0:
                    return int(p.leader_id)
        raise LookupError(f"no leader for {topic}-{partition}")
