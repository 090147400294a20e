"""The client side of the Kafka wire for `kraft fuzz --target kafka`: blocking loopback
sockets, request frames from plain values, responses decoded by kio, and `check_serving`, the
check that every broker still serves (run after each phase of `replication.nemesis.kafka_fuzz`).
"""

from __future__ import annotations

import random
import socket
import struct
import time
from typing import Any, Final

from kio.index import load_request_schema, load_response_schema

from kraft.cluster.local import LocalCluster
from replication.broker.kafka.entities import build, read_entity
from replication.nemesis.kafka_payloads import frame
from storage.records import build_batch

PROBE_TOPIC: Final = "fuzz-kafka-probe"
"""Where `check_serving` produces and fetches: a partition per broker, never named by the
fuzzed requests."""
PRODUCE, FETCH, METADATA, API_VERSIONS = 0, 1, 3, 18
_SIZE = struct.Struct(">i")


# -- sockets and frames ------------------------------------------------------------------


def connect(address: str, timeout_s: float) -> socket.socket:
    host, _, port = address.rpartition(":")
    sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s)
    # Close with a reset: tens of thousands of short connections leave no TIME_WAIT behind.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return sock


def read_exact(sock: socket.socket, size: int, deadline: float) -> bytes | None:
    """``size`` bytes, or None at end of stream; socket.timeout past ``deadline``."""
    out = bytearray()
    while len(out) < size:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        chunk = sock.recv(min(size - len(out), 1 << 20))
        if not chunk:
            return None
        out += chunk
    return bytes(out)


def read_frame(sock: socket.socket, deadline: float) -> bytes | None:
    """One response frame (without its size), or None at end of stream."""
    prefix = read_exact(sock, 4, deadline)
    if prefix is None:
        return None
    (size,) = _SIZE.unpack(prefix)
    if size < 4:
        raise ValueError(f"response frame of {size} bytes")
    return read_exact(sock, size, deadline)


def decode(api_key: int, version: int, data: bytes) -> tuple[int, Any]:
    """(correlation id, kio response entity) of a response frame."""
    cls = load_response_schema(api_key, version)
    header, offset = read_entity(cls.__header_schema__, data, 0)
    body, _ = read_entity(cls, data, offset)
    return int(header.correlation_id), body


def request(api_key: int, version: int, values: dict[str, Any], correlation_id: int) -> bytes:
    body = build(load_request_schema(api_key, version), values)
    return frame(api_key, version, body, correlation_id, "kraft-fuzz")


def call(sock: socket.socket, api_key: int, version: int, values: dict[str, Any]) -> Any:
    """Send one request and return its decoded response (raises on anything else)."""
    correlation = random.randrange(2**31)
    sock.sendall(request(api_key, version, values, correlation))
    data = read_frame(sock, time.monotonic() + (sock.gettimeout() or 10.0))
    if data is None:
        raise ConnectionError("closed by the broker")
    got, body = decode(api_key, version, data)
    if got != correlation:
        raise ValueError(f"correlation id {got}, expected {correlation}")
    return body


# -- is every broker still serving? ---------------------------------------------------------------


def probe_batch(marker: bytes) -> bytes:
    return build_batch([marker], timestamp_ms=int(time.time() * 1000))


def check_serving(cluster: LocalCluster, timeout_s: float = 15.0) -> list[str]:
    """What is wrong with the brokers' Kafka service: each answers ApiVersions on a fresh
    connection, and a record produced (acks=all) to each partition of `PROBE_TOPIC` through
    its leader fetches back. Empty when all is well."""
    problems: list[str] = []
    for broker_id in cluster.broker_ids:
        address = cluster.kafka_addresses[broker_id]
        try:
            with connect(address, timeout_s) as sock:
                answer = call(sock, API_VERSIONS, 3, {"client_software_name": "kraft-fuzz"})
            if int(answer.error_code) != 0:
                problems.append(f"broker {broker_id}: ApiVersions error {answer.error_code}")
        except Exception as e:  # a checker: any failure is what it reports
            problems.append(f"broker {broker_id}: ApiVersions: {e!r}")
    try:
        partitions = cluster.describe_topic(PROBE_TOPIC, timeout=timeout_s).partitions
    except Exception as e:  # the controller path is not what is checked here
        return [*problems, f"describe {PROBE_TOPIC}: {e!r}"]
    for p in partitions:
        marker = f"probe-{random.randrange(2**63)}".encode()
        where = f"{PROBE_TOPIC}-{p.partition} on broker {p.leader}"
        try:
            with connect(cluster.kafka_addresses[p.leader], timeout_s) as sock:
                produced = call(
                    sock, PRODUCE, 9, produce_values(PROBE_TOPIC, p.partition, marker, timeout_s)
                )
                part = produced.responses[0].partition_responses[0]
                if int(part.error_code) != 0:
                    problems.append(f"{where}: produce error {part.error_code}")
                    continue
                fetched = call(
                    sock, FETCH, 12, fetch_values(PROBE_TOPIC, p.partition, int(part.base_offset))
                )
                records = fetched.responses[0].partitions[0].records or b""
                if marker not in records:
                    problems.append(f"{where}: offset {part.base_offset} did not fetch back")
        except Exception as e:  # a checker: any failure is what it reports
            problems.append(f"{where}: {e!r}")
    return problems


def produce_values(topic: str, partition: int, marker: bytes, timeout_s: float) -> dict[str, Any]:
    return {
        "acks": -1,
        "timeout": int(timeout_s * 1000),
        "topic_data": [
            {
                "name": topic,
                "partition_data": [{"index": partition, "records": probe_batch(marker)}],
            }
        ],
    }


def fetch_values(
    topic: str, partition: int, offset: int, max_bytes: int = 1 << 20
) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 0,
        "max_bytes": 64 << 20,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": max_bytes,
                    }
                ],
            }
        ],
    }


__all__ = [
    "API_VERSIONS",
    "FETCH",
    "METADATA",
    "PROBE_TOPIC",
    "PRODUCE",
    "call",
    "check_serving",
    "connect",
    "decode",
    "fetch_values",
    "probe_batch",
    "produce_values",
    "read_exact",
    "read_frame",
    "request",
]
