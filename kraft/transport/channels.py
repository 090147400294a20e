"""gRPC options of every server and channel: the one home of the request-size limit.

``socket.request.max.bytes`` (Kafka's name and default, 100 MiB) bounds a request a server
accepts: gRPC refuses a larger message with RESOURCE_EXHAUSTED before it is decoded, and the
server carries on. The same bound applies to what channels send and receive, so a response
(a fetch carries at least one whole batch) fits the limit the peer applies.

The controller reads the key from its config (`kraft.config.ControllerNodeConfig`); the other
servers and the clients use the default.
"""

from __future__ import annotations

from typing import Final

SOCKET_REQUEST_MAX_BYTES: Final = 100 * 1024 * 1024
"""Kafka's ``socket.request.max.bytes`` default: the largest request a server accepts."""

Options = list[tuple[str, int]]


def size_options(max_bytes: int = SOCKET_REQUEST_MAX_BYTES) -> Options:
    """The message-size limits, both directions."""
    return [
        ("grpc.max_receive_message_length", max_bytes),
        ("grpc.max_send_message_length", max_bytes),
    ]


def server_options(max_request_bytes: int = SOCKET_REQUEST_MAX_BYTES) -> Options:
    """Options of every grpc.aio server (controller, broker, a bare Raft server)."""
    return [
        *size_options(max_request_bytes),
        # NB: gRPC sets SO_REUSEPORT by default, so a second server can bind a port that is in
        # use and the kernel splits connections between them: two local clusters that race for
        # the same free port would then talk to each other. Fail the bind instead.
        ("grpc.so_reuseport", 0),
    ]


def peer_channel_options() -> Options:
    """Channels between servers (Raft peers, broker to broker)."""
    return [
        *size_options(),
        # Reconnect to a restarted peer within ~0.1-1 s, not gRPC's default 1-120 s backoff.
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.min_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 1000),
    ]


def client_channel_options() -> Options:
    """Channels of the blocking clients (producer, consumer, admin, controller client)."""
    return [
        *size_options(),
        # Fail fast on a dead node instead of waiting for the deadline.
        ("grpc.initial_reconnect_backoff_ms", 50),
        ("grpc.max_reconnect_backoff_ms", 500),
    ]


__all__ = [
    "SOCKET_REQUEST_MAX_BYTES",
    "client_channel_options",
    "peer_channel_options",
    "server_options",
    "size_options",
]
