"""`KafkaListener`: the asyncio shell around `KafkaConnection` for one named listener.

Per connection: a reader loop feeds the socket's bytes to the connection and starts a task per
request (clients pipeline); each task builds the `RequestContext`, calls the handler of the
request's API key, and hands the response to the connection, which releases frames in request
order; they are written without joining them (`replication.broker.kafka.frame_writer`: record
bytes by identity, one ``writev`` per response while the socket takes it) and drained. An SSL
connection writes them with its transport's ``writelines``.

*Back-pressure* (Kafka's ``queued.max.requests``): a connection holds at most that many requests
between decoding and the writing of their response. At the bound the reader stops reading, so
TCP pushes back on the client; a client that never reads its responses stops being read from,
and holds no more than the bound. Of those, at most `HANDLED_PER_CONNECTION` are handled at once
or hold a response not yet written, taken in request order: a client that pipelines Fetch
requests and never reads would otherwise make the broker build ``queued.max.requests``
responses at once (measured by ``kraft fuzz``: 500 responses of 4 MiB, 2 GiB of memory and
5 s of every other client's latency). Kafka handles one request per connection at a time.
Bad input closes only its own connection, with one log line.

*SSL* listeners serve TLS with the broker's certificate (``ssl.*``, `KafkaListenerConfig.tls`)
and ask for a client certificate as ``ssl.client.auth`` says. The verified certificate's subject,
through ``ssl.principal.mapping.rules``, is the principal of every request on the connection
(``User:CN=alice``), read once after the handshake; no certificate is ``User:ANONYMOUS``. The
broker API then authorizes it exactly as a gRPC call with that certificate.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, cast

import structlog

from kraft.security.guard import principal_of_certificate
from kraft.security.principals import DEFAULT_RULES, MappingRule, parse_mapping_rules
from kraft.security.tls import TlsConfig
from replication.broker.api import RequestContext
from replication.broker.api.context import ANONYMOUS
from replication.broker.kafka.api import KafkaBrokerApi
from replication.broker.kafka.apis import HANDLERS, SUPPORTED_VERSIONS
from replication.broker.kafka.entities import Chunk, build
from replication.broker.kafka.frame_writer import prepare, write_frames
from replication.broker.kafka.frames import (
    DEFAULT_MAX_REQUEST_BYTES,
    Closed,
    Encoded,
    KafkaConnection,
    NeedData,
    Request,
    response_class,
)

DEFAULT_QUEUED_MAX_REQUESTS: Final = 500
"""Kafka's ``queued.max.requests`` default."""
HANDLED_PER_CONNECTION: Final = 8
"""Requests of one connection handled at once or holding an unwritten response (see above)."""
READ_CHUNK_BYTES: Final = 256 * 1024
_log = structlog.get_logger("replication.broker.kafka")


@dataclass(frozen=True, slots=True, kw_only=True)
class KafkaListenerConfig:
    """One Kafka-protocol listener (``listeners`` entry) of a broker."""

    name: str
    """The listener's name (``PLAINTEXT``, ``EXTERNAL``, ...): Metadata answers with the
    endpoints registered under it."""
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    """[socket.request.max.bytes]"""
    queued_max_requests: int = DEFAULT_QUEUED_MAX_REQUESTS
    """[queued.max.requests] per connection."""
    tls: TlsConfig | None = None
    """[ssl.*] the certificate and ``ssl.client.auth`` of an ``SSL`` listener."""
    principal_rules: Sequence[MappingRule] = parse_mapping_rules(DEFAULT_RULES)
    """[ssl.principal.mapping.rules] client certificate subject -> principal."""


class KafkaListener:
    """Serves the Kafka protocol on one listener, over a `KafkaBrokerApi`."""

    def __init__(self, config: KafkaListenerConfig, api: KafkaBrokerApi) -> None:
        self.config = config
        self._api = api
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.bound_port: int | None = None

    async def start(self) -> None:
        """Bind and serve. Raises OSError when the address cannot be bound."""
        context: ssl.SSLContext | None = None
        if self.config.security_protocol == "SSL":
            if self.config.tls is None:
                raise OSError(f"listener {self.config.name} is SSL: it needs the ssl.* keys")
            context = self.config.tls.server_ssl_context()
        elif self.config.security_protocol != "PLAINTEXT":
            raise OSError(
                f"listener {self.config.name}: the Kafka protocol is served on PLAINTEXT and "
                f"SSL listeners, not {self.config.security_protocol}"
            )
        self._server = await asyncio.start_server(
            self._serve, self.config.host, self.config.port, limit=READ_CHUNK_BYTES, ssl=context
        )
        self.bound_port = self._server.sockets[0].getsockname()[1]
        _log.info("kafka_listener_started", listener=self.config.name, port=self.bound_port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await _Connection(self, reader, writer).run()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def principal(self, writer: asyncio.StreamWriter) -> str:
        """The principal of a connection: its verified client certificate's mapped subject,
        else `ANONYMOUS` (plaintext, no certificate, or no rule maps the subject)."""
        tls = writer.get_extra_info("ssl_object")
        der = tls.getpeercert(binary_form=True) if isinstance(tls, ssl.SSLObject) else None
        if not der:
            return ANONYMOUS
        pem = ssl.DER_cert_to_PEM_cert(der).encode()
        return principal_of_certificate(pem, tuple(self.config.principal_rules))

    def context(
        self,
        request: Request,
        peer: Any,
        principal: str = ANONYMOUS,
        *,
        file_regions: bool = False,
    ) -> RequestContext:
        """``file_regions``: the connection sends a Fetch's records from the file (plaintext)."""
        spec = HANDLERS.get(request.api_key)
        return RequestContext(
            principal=principal,
            client_host=peer[0] if isinstance(peer, tuple) and peer else "",
            listener=self.config.name,
            client_id=request.client_id,
            api=spec.name if spec is not None else str(request.api_key),
            api_version=request.api_version,
            security_protocol=self.config.security_protocol,
            file_regions=file_regions,
        )


class _Connection:
    def __init__(
        self, owner: KafkaListener, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self._owner = owner
        self._reader = reader
        self._writer = writer
        self._peer = writer.get_extra_info("peername")
        self._principal = owner.principal(writer)
        self._protocol = KafkaConnection(
            SUPPORTED_VERSIONS, max_request_bytes=owner.config.max_request_bytes
        )
        self._slots = asyncio.Semaphore(owner.config.queued_max_requests)
        self._handling = asyncio.Semaphore(
            min(HANDLED_PER_CONNECTION, owner.config.queued_max_requests)
        )
        self._write_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._sent = 0
        """Requests whose frames have been written (their slots released)."""
        self._failed = False
        sock = writer.get_extra_info("socket")
        self._fd: int | None = None
        """The socket to write frames to directly (a Fetch's records with sendfile, from the
        segment file); None on SSL (its transport encrypts)."""
        if writer.get_extra_info("sslcontext") is None and sock is not None:
            self._fd = sock.fileno()
            prepare(writer)

    async def run(self) -> None:
        try:
            while not self._failed:
                event = self._protocol.next_event()
                if isinstance(event, Closed):
                    if event.reply:
                        self._writer.write(event.reply)
                        await self._writer.drain()
                    if event.reason != "end of stream":
                        _log.warning(
                            "kafka_connection_closed",
                            listener=self._owner.config.name,
                            peer=str(self._peer),
                            reason=event.reason,
                        )
                    return
                if isinstance(event, NeedData):
                    self._protocol.receive_data(await self._reader.read(READ_CHUNK_BYTES))
                    continue
                await self._slots.acquire()  # back-pressure: stop reading at the bound
                if self._failed:  # woken by `_fail`
                    return
                task = asyncio.create_task(self._handle(event))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        finally:
            for task in list(self._tasks):
                task.cancel()

    async def _handle(self, request: Request) -> None:
        # Tasks are created in request order and wait here in that order (asyncio's semaphores
        # are FIFO), so the request whose response is due next always holds a permit.
        async with self._handling:
            await self._handle_one(request)

    async def _handle_one(self, request: Request) -> None:
        try:
            if request.unsupported:
                frames = self._protocol.unsupported_api_versions(request)
            else:
                spec = HANDLERS[request.api_key]
                ctx = self._owner.context(
                    request, self._peer, self._principal, file_regions=self._fd is not None
                )
                answer = await spec.handle(self._owner._api, request, ctx)
                if answer is None:
                    frames = self._protocol.skip(request)
                elif isinstance(answer, Encoded):
                    frames = self._protocol.send_encoded(request, answer.body)
                else:
                    cls = response_class(request.api_key, request.api_version)
                    values = {"throttle_time": datetime.timedelta(0), **answer}
                    frames = self._protocol.send(request, build(cls, values))
        except asyncio.CancelledError:
            raise
        except Exception:
            # NB: a broken handler closes this connection (the client retries elsewhere);
            # the broker and every other connection go on. One log line per connection.
            if not self._failed:
                _log.exception(
                    "kafka_request_failed", api_key=request.api_key, version=request.api_version
                )
            self._fail()
            return
        await self._write(frames)

    async def _write(self, frames: list[Chunk]) -> None:
        async with self._write_lock:
            released = self._protocol.sent - self._sent
            if self._failed or self._writer.is_closing():
                return  # the connection is going: nothing more is written, nothing logged
            if frames:
                try:
                    if self._fd is not None:
                        await write_frames(self._writer, self._fd, frames)
                    else:  # SSL: no region (`RequestContext.file_regions` is False)
                        self._writer.writelines(cast(list[bytes], frames))
                        await self._writer.drain()
                except (ConnectionError, OSError):
                    # NB: the client went away (reset) while its responses were due: close,
                    # quietly. This used to raise out of every pending request's task, each
                    # logged with its traceback ("Task exception was never retrieved"), and
                    # to leave the reader waiting for a slot forever (found by `kraft fuzz`).
                    self._fail()
                    return
            for _ in range(released):
                self._slots.release()
            self._sent += released

    def _fail(self) -> None:
        """Close the connection; wake the reader if it waits for a slot, so it ends too."""
        self._failed = True
        self._writer.close()
        self._slots.release()


__all__ = ["DEFAULT_QUEUED_MAX_REQUESTS", "KafkaListener", "KafkaListenerConfig"]
