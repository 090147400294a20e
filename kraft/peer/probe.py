"""Ask a Kafka broker which brokers its metadata lists: the readiness check of a peer cluster.

One Metadata request (v12, no topics) over a fresh connection, encoded and decoded by kio
(the codec generated from Kafka's message schemas). A KRaft broker lists only the brokers that
are registered and unfenced, so "every broker lists every broker" means the cluster serves.
"""

from __future__ import annotations

import io
import socket
import struct

from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.request_header.v2.header import RequestHeader as MetadataRequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

_CLIENT_ID = "kraft-peer-probe"
_SIZE = struct.Struct(">i")


def _frame(correlation_id: int) -> bytes:
    body = io.BytesIO()
    header = MetadataRequestHeader(
        request_api_key=MetadataRequest.__api_key__,
        request_api_version=MetadataRequest.__version__,
        correlation_id=i32(correlation_id),
        client_id=_CLIENT_ID,
    )
    entity_writer(MetadataRequestHeader)(body, header)
    request = MetadataRequest(
        topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    entity_writer(MetadataRequest)(body, request)
    payload = body.getvalue()
    return _SIZE.pack(len(payload)) + payload


def _read_exactly(sock: socket.socket, count: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < count:
        chunk = sock.recv(count - len(chunks))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks += chunk
    return bytes(chunks)


def listed_brokers(address: str, timeout: float = 2.0) -> dict[int, str]:
    """The brokers (id -> ``host:port``) that the broker at ``address`` lists in Metadata.

    Raises:
        OSError: no connection, or it closed or timed out.
    """
    host, _, port = address.rpartition(":")
    correlation_id = 1
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(_frame(correlation_id))
        (size,) = _SIZE.unpack(_read_exactly(sock, _SIZE.size))
        payload = _read_exactly(sock, size)
    header, used = entity_reader(ResponseHeader)(payload, 0)
    if header.correlation_id != correlation_id:
        raise ConnectionError(f"answer to correlation id {header.correlation_id}")
    response, _ = entity_reader(MetadataResponse)(payload, used)
    return {int(b.node_id): f"{b.host}:{b.port}" for b in response.brokers}


__all__ = ["listed_brokers"]
