"""gRPC options of every server and channel: the one home of the request-size limit.

``socket.request.max.bytes`` (Kafka's name and default, 100 MiB) bounds a request a server
accepts: gRPC refuses a larger message with RESOURCE_EXHAUSTED before it is decoded, and the
server carries on. The same bound applies to what channels send and receive, so a response
(a fetch carries at least one whole batch) fits the limit the peer applies.

The controller reads the key from its config (`kraft.controller.node_config`); the other servers
and the clients use the default.

`parse_bootstrap_servers` checks every address list a client or the CLI is given (brokers or
controllers) before any channel is built: a malformed address fails at once, named.

Every channel and server is built here (`client_channel`, `peer_channel`, `aio_server`,
`bind`), and each takes the `kraft.security.tls.TlsConfig` of its owner (None: plaintext):
`bind` serves TLS with the node's certificate and its ``ssl.client.auth``, and a channel dials
TLS presenting its owner's certificate (a node's own, for mTLS between nodes; a client's). The
value is passed down, never kept process-wide, so clients of one process may hold different
certificates. Through the dial map, a TLS channel checks the server's certificate against the
address it means (``grpc.ssl_target_name_override``), not the proxy's. And a failed call
becomes kraft's typed error here (`map_grpc_errors`, `translate_rpc_error`; STYLE §5: one
boundary), whoever made the call: a refused handshake is SSL_AUTHENTICATION_FAILED, naming the
side that refused and why (`kraft.security.tls.refusal_reason`).

**Dial map** (a test seam for fault injection, issue 16): a process whose environment has
``KRAFT_DIAL_MAP=host:port=proxy:port,...`` (or that calls `set_dial_map`) dials the proxy
wherever it would dial the address: the nodes of a `LocalCluster(fault_network=True)` reach
each other only through per-link fault proxies (`kraft.cluster.fault_network`), while every
address they advertise and log stays the real one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Final

import grpc

from kraft.metrics.registry import RequestMetrics
from kraft.security.guard import AccessGuard, AuthorizeCalls, authorization_error
from kraft.security.tls import TlsConfig, refusal_reason
from kraft.transport.request_guard import RejectUnparseable
from storage.errors import (
    InvalidRequestError,
    KraftError,
    NetworkError,
    RequestTimedOutError,
    SslAuthenticationFailedError,
    UnknownServerError,
    UnsupportedVersionError,
)

SOCKET_REQUEST_MAX_BYTES: Final = 100 * 1024 * 1024
"""Kafka's ``socket.request.max.bytes`` default: the largest request a server accepts."""

Options = list[tuple[str, int | str]]

DIAL_MAP_ENV: Final = "KRAFT_DIAL_MAP"
"""The environment variable of the dial map (see the module docstring)."""


def format_dial_map(mapping: Mapping[str, str]) -> str:
    """``a=b,c=d``: the value of `DIAL_MAP_ENV` for ``mapping``."""
    return ",".join(f"{address}={dial}" for address, dial in sorted(mapping.items()))


def parse_dial_map(text: str) -> dict[str, str]:
    """The mapping of a `DIAL_MAP_ENV` value.

    Raises:
        ValueError: an entry is not ``address=address``.
    """
    mapping: dict[str, str] = {}
    for entry in filter(None, (e.strip() for e in text.split(","))):
        address, sep, dial = entry.partition("=")
        if not sep or not address or not dial:
            raise ValueError(f"{DIAL_MAP_ENV}: expected address=address, got {entry[:80]!r}")
        mapping[address] = dial
    return mapping


_dial_map: dict[str, str] = parse_dial_map(os.environ.get(DIAL_MAP_ENV, ""))


def set_dial_map(mapping: Mapping[str, str]) -> None:
    """Dial ``mapping[address]`` instead of ``address`` from now on, in this process (an
    empty mapping: dial addresses as they are). Channels built before keep their target."""
    global _dial_map
    _dial_map = dict(mapping)


def dial_target(address: str) -> str:
    """Where a channel to ``address`` connects (the dial map's entry, or the address)."""
    return _dial_map.get(address, address)


def size_options(max_bytes: int = SOCKET_REQUEST_MAX_BYTES) -> Options:
    """The message-size limits, both directions."""
    return [
        ("grpc.max_receive_message_length", max_bytes),
        ("grpc.max_send_message_length", max_bytes),
    ]


PEER_KEEPALIVE_MS: Final = 5000
"""How often a server pings a peer server it is connected to. A ping unanswered for
`PEER_KEEPALIVE_TIMEOUT_MS` (and, through ``TCP_USER_TIMEOUT``, data unacknowledged that long)
closes the connection, and the channel dials again (at most 1 s apart). Without it, a
connection that a partition cut stays open and silent after the heal until TCP's own
retransmission, which backs off to tens of seconds: a follower cut off for 40 s could wait that
long again before it fetches and rejoins the ISR. Both exceed the Raft fetch timeout (2 s), so
a connection closed this way never makes a follower campaign earlier than the timeout would."""
PEER_KEEPALIVE_TIMEOUT_MS: Final = 10000
SERVER_KEEPALIVE_MS: Final = 30000
"""How often a server pings each connection it accepted, calls or none. A client that closes
its connection while a partition drops its FIN (a peer's own pings, `PEER_KEEPALIVE_MS`, give
up during a cut) leaves the server's end open and silent, one descriptor and its buffers per
cut, until gRPC's default server ping (2 hours): a 12-minute soak with link faults only (200
partitions) ended with four such ends on its brokers and controllers, and none with the pings.
A ping on such a connection draws a reset from the client's host, or no answer while the cut
lasts (closed after `PEER_KEEPALIVE_TIMEOUT_MS`), so it is gone at most 40 s after the cut; a
live client answers from gRPC's own threads, whatever its event loop is doing. Kafka closes a
connection idle for ``connections.max.idle.ms`` (10 minutes); a gRPC stream may be idle for
longer and still wanted, so kraft pings instead."""


def _keepalive_options(keepalive_ms: int, timeout_ms: int) -> Options:
    """Ping every ``keepalive_ms``; close the connection when a ping goes unanswered for
    ``timeout_ms``."""
    return [
        ("grpc.keepalive_time_ms", keepalive_ms),
        ("grpc.keepalive_timeout_ms", timeout_ms),
        # NB: gRPC 1.85 waits for a ping's answer for this long (default 60 s), whatever
        # ``keepalive_timeout_ms`` says; both bound the wait.
        ("grpc.http2.ping_timeout_ms", timeout_ms),
    ]


def server_options(
    max_request_bytes: int = SOCKET_REQUEST_MAX_BYTES,
    *,
    keepalive_ms: int = SERVER_KEEPALIVE_MS,
    keepalive_timeout_ms: int = PEER_KEEPALIVE_TIMEOUT_MS,
) -> Options:
    """Options of every grpc.aio server (controller, broker, a bare Raft server);
    ``keepalive_ms`` and ``keepalive_timeout_ms``: its pings (`SERVER_KEEPALIVE_MS`)."""
    return [
        *size_options(max_request_bytes),
        *_keepalive_options(keepalive_ms, keepalive_timeout_ms),
        # NB: gRPC sets SO_REUSEPORT by default, so a second server can bind a port that is in
        # use and the kernel splits connections between them: two local clusters that race for
        # the same free port would then talk to each other. Fail the bind instead.
        ("grpc.so_reuseport", 0),
        # Accept the peers' keepalive pings (`PEER_KEEPALIVE_MS`), with or without calls,
        # rather than closing the connection with GOAWAY "too_many_pings"; and send ours on
        # connections without calls too.
        ("grpc.http2.min_recv_ping_interval_without_data_ms", PEER_KEEPALIVE_MS // 2),
        ("grpc.http2.max_ping_strikes", 0),
        ("grpc.keepalive_permit_without_calls", 1),
    ]


def peer_channel_options() -> Options:
    """Channels between servers (Raft peers, broker to broker)."""
    return [
        *size_options(),
        # Reconnect to a restarted peer within ~0.1-1 s, not gRPC's default 1-120 s backoff.
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.min_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 1000),
        *_keepalive_options(PEER_KEEPALIVE_MS, PEER_KEEPALIVE_TIMEOUT_MS),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
    ]


def client_channel_options() -> Options:
    """Channels of the blocking clients (producer, consumer, admin, controller client)."""
    return [
        *size_options(),
        # Fail fast on a dead node instead of waiting for the deadline.
        ("grpc.initial_reconnect_backoff_ms", 50),
        ("grpc.max_reconnect_backoff_ms", 500),
    ]


def _tls_options(address: str, target: str) -> Options:
    """Through a proxy, check the certificate against the host of the address meant."""
    if target == address:
        return []
    host = address.rpartition(":")[0].strip("[]")
    return [("grpc.ssl_target_name_override", host)]


def client_channel(address: str, tls: TlsConfig | None = None) -> grpc.Channel:
    """A blocking channel of a client (producer, consumer, admin, controller client, probes);
    TLS with ``tls``."""
    target = dial_target(address)
    if tls is None:
        return grpc.insecure_channel(target, options=client_channel_options())
    options = [*client_channel_options(), *_tls_options(address, target)]
    return grpc.secure_channel(target, tls.channel_credentials(), options=options)


def peer_channel(address: str, tls: TlsConfig | None = None) -> grpc.aio.Channel:
    """An asyncio channel from one server to another (Raft peers, follower to leader); TLS
    with the node's ``tls``, presenting its certificate."""
    target = dial_target(address)
    if tls is None:
        return grpc.aio.insecure_channel(target, options=peer_channel_options())
    options = [*peer_channel_options(), *_tls_options(address, target)]
    return grpc.aio.secure_channel(target, tls.channel_credentials(), options=options)


def aio_server(
    max_request_bytes: int = SOCKET_REQUEST_MAX_BYTES,
    *,
    guard: AccessGuard | None = None,
    api_services: Collection[str] = (),
) -> grpc.aio.Server:
    """A grpc.aio server (controller, broker, a bare Raft server); `bind` gives it its port.
    Its requests are counted and timed per RPC (`kraft.metrics.RequestMetrics`), one that
    does not parse is answered INVALID_ARGUMENT (`RejectUnparseable`), and with a ``guard``
    whose authorizer is on, every call is authorized first (`kraft.security.guard`).

    ``api_services`` (``kraft.v1.Broker``, ...) are served by an API layer that authorizes
    and measures its own requests (a broker's `replication.broker.api`): the interceptors
    leave their calls alone, so nothing is checked or counted twice."""
    interceptors: list[grpc.aio.ServerInterceptor] = [
        RequestMetrics(skip=api_services),
        RejectUnparseable(),
    ]
    if guard is not None and guard.enabled:
        interceptors.append(AuthorizeCalls(guard, skip=api_services))
    return grpc.aio.server(options=server_options(max_request_bytes), interceptors=interceptors)


def bind(server: grpc.aio.Server, listen: str, tls: TlsConfig | None = None) -> int:
    """Listen on ``listen`` (HOST:PORT; port 0 picks one), TLS with the node's ``tls``;
    returns the port bound."""
    if tls is None:
        return int(server.add_insecure_port(listen))
    return int(server.add_secure_port(listen, tls.server_credentials()))


GRPC_ERRORS: Final[dict[grpc.StatusCode, type[KraftError]]] = {
    grpc.StatusCode.UNAVAILABLE: NetworkError,
    grpc.StatusCode.CANCELLED: NetworkError,
    grpc.StatusCode.DEADLINE_EXCEEDED: RequestTimedOutError,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequestError,
    grpc.StatusCode.UNIMPLEMENTED: UnsupportedVersionError,
}
"""The gRPC status of a failed call -> kraft's error; any other status is UNKNOWN_SERVER_ERROR."""


def translate_rpc_error(
    error: grpc.RpcError,
    address: str,
    peer: str,
    tls: TlsConfig | None = None,
    *,
    probe: bool = True,
) -> KraftError:
    """kraft's typed error for a failed gRPC call to ``peer`` (what ``address`` is: a broker,
    a controller, a forwarding broker) at ``address``, made with ``tls`` (None: plaintext).

    A connection refused at the TLS handshake is `SslAuthenticationFailedError`; ``probe``
    lets `kraft.security.tls.refusal_reason` probe a server that hung up (a blocking second
    connection: pass False on a gRPC callback thread)."""
    code = error.code() if hasattr(error, "code") else None
    detail = error.details() if hasattr(error, "details") else str(error)
    if code == grpc.StatusCode.PERMISSION_DENIED:  # TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED
        return authorization_error(str(detail))
    if code == grpc.StatusCode.UNAVAILABLE and detail:
        reason = refusal_reason(detail, address, peer, tls, probe=probe)
        if reason is not None:
            return SslAuthenticationFailedError(reason)
    cls = GRPC_ERRORS.get(code, UnknownServerError) if code else UnknownServerError
    return cls(f"{peer} {address}: {detail or code}")


@contextmanager
def map_grpc_errors(address: str, peer: str, tls: TlsConfig | None = None) -> Iterator[None]:
    """Raise a failed gRPC call in the block as `translate_rpc_error` names it."""
    try:
        yield
    except grpc.RpcError as e:
        raise translate_rpc_error(e, address, peer, tls) from None


_HOST = re.compile(r"^(\[[0-9A-Fa-f:.%\w-]+\]|[\w.-]+)$")
"""A host name, an IPv4 address, or an IPv6 address in brackets (``[::1]``)."""
_QUOTE_MAX = 60


def parse_bootstrap_servers(
    value: str | Sequence[str], key: str = "bootstrap.servers"
) -> list[str]:
    """``"host:port,host:port"`` (or a list) -> the addresses, each checked to be HOST:PORT
    with a port in 1..65535, as Kafka's ``ClientUtils.parseAndValidateAddresses`` checks
    ``bootstrap.servers`` before connecting: a malformed address fails at once, not after
    the connect deadline.

    Args:
        key: what to call the setting in the error (``--bootstrap`` on the command line).

    Raises:
        ValueError: no address, or one that is not HOST:PORT (the message names it).
    """
    items = value.split(",") if isinstance(value, str) else list(value)
    addresses = [a.strip() for a in items if a.strip()]
    if not addresses:
        raise ValueError(f"{key}: no address given (expected HOST:PORT[,HOST:PORT...])")
    for address in addresses:
        problem = _address_problem(address)
        if problem is not None:
            shown = address if len(address) <= _QUOTE_MAX else address[:_QUOTE_MAX] + "..."
            raise ValueError(f"{key}: bad address {shown!r}: {problem}")
    return addresses


def _address_problem(address: str) -> str | None:
    """Why ``address`` is not HOST:PORT, or None."""
    if "://" in address:
        return "give HOST:PORT without a scheme (e.g. 127.0.0.1:9092)"
    host, colon, port = address.rpartition(":")
    if not colon:
        return "no port (expected HOST:PORT, e.g. 127.0.0.1:9092)"
    if not host:
        return "no host (expected HOST:PORT, e.g. 127.0.0.1:9092)"
    if not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
        return "the port must be a number from 1 to 65535"
    if ":" in host and not host.startswith("["):
        return "put an IPv6 address in brackets, e.g. [::1]:9092"
    if not _HOST.match(host):
        return "not a valid host name"
    return None


CLIENT_ID_METADATA: Final = "kafka-client-id"
"""The call metadata key of a client's ``client.id`` (a Kafka request header's client id):
the broker's `replication.broker.api.RequestContext` takes it from there."""


def client_id_of(metadata: Sequence[tuple[str, str | bytes]] | None) -> str:
    """The ``client.id`` a call carries in its metadata ("" if none)."""
    for key, value in metadata or ():
        if key == CLIENT_ID_METADATA:
            return value if isinstance(value, str) else value.decode(errors="replace")
    return ""


__all__ = [
    "CLIENT_ID_METADATA",
    "DIAL_MAP_ENV",
    "GRPC_ERRORS",
    "SERVER_KEEPALIVE_MS",
    "SOCKET_REQUEST_MAX_BYTES",
    "aio_server",
    "bind",
    "client_channel",
    "client_channel_options",
    "client_id_of",
    "dial_target",
    "format_dial_map",
    "map_grpc_errors",
    "parse_bootstrap_servers",
    "parse_dial_map",
    "peer_channel",
    "peer_channel_options",
    "server_options",
    "set_dial_map",
    "size_options",
    "translate_rpc_error",
]
