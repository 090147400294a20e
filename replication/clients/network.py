"""The clients' gRPC shell: one channel per broker, typed errors, metadata with retries.

Every call goes through `BrokerNetwork`: dataclass in, dataclass out (`replication.codec` is
the only proto boundary), and a failed call becomes kraft's typed error at one place
(`kraft.transport.channels.map_grpc_errors`, STYLE §5): UNAVAILABLE -> `NetworkError`,
DEADLINE_EXCEEDED -> `RequestTimedOutError`, both retriable. Calls are synchronous (`call`)
or callback-driven (`call_async`, gRPC's ``.future()``), which is how the producer keeps up to
``max.in.flight.requests.per.connection`` Produce requests outstanding per broker without a
thread per request.

`fetch_metadata` asks any broker (the last one that answered first, then the bootstrap list in
turn) and retries retriable failures with tenacity's exponential backoff under one deadline,
as `kraft.controller.client.ControllerClient` does for the controllers.

A broker is *suspect* from a call to it that failed in transport (unreachable, timed out) or
that a client found stalled (`mark_suspect`; a paused process keeps its socket and answers
nothing) until a call to it succeeds. `call_any` (metadata, InitProducerId) tries suspects
last, so a refresh meant to route around a stalled leader does not wait on that leader
(Kafka's ``NetworkClient.leastLoadedNode`` skips nodes it cannot talk to).

Thread-safe: gRPC channels are; the channel table is behind a lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

import grpc

from kraft._generated import broker_pb2_grpc
from kraft.security.tls import TlsConfig
from kraft.transport.channels import (
    CLIENT_ID_METADATA,
    client_channel,
    map_grpc_errors,
    parse_bootstrap_servers,
    translate_rpc_error,
)
from kraft.transport.retry import StopRetrying, retry_retriable
from kraft.transport.unreachable import BootstrapRefusals
from replication.clients.produce_stream import ProduceStreams
from replication.codec import decode, encode
from replication.messages import MetadataRequest, MetadataResponse
from storage.errors import (
    KraftError,
    NetworkError,
    RequestTimedOutError,
)

R = TypeVar("R")


class Cancellable(Protocol):
    """What `BrokerNetwork.call_async` returns: the call, which may be abandoned."""

    def cancel(self) -> bool: ...


class _Done:
    """The handle of a call that ended before it started."""

    def cancel(self) -> bool:
        return False


_TRANSPORT_ERRORS = (NetworkError, RequestTimedOutError)


class BrokerNetwork:
    """Channels and stubs of the ``Broker`` service, by address.

    Args:
        bootstrap: ``"host:port,host:port"`` of (some of) the brokers.
        request_timeout_s: the default deadline of one call.
        tls: mTLS settings (`kraft.security.tls.client_tls`); None: plaintext.
    """

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        request_timeout_s: float = 30.0,
        tls: TlsConfig | None = None,
        client_id: str = "",
    ) -> None:
        self.bootstrap = parse_bootstrap_servers(bootstrap, "bootstrap.servers")
        # ``client.id`` rides on every call, as in a Kafka request's header: the broker's
        # request context, its logs and its quotas name it.
        self._call_metadata = ((CLIENT_ID_METADATA, client_id),) if client_id else None
        self.request_timeout_s = request_timeout_s
        self.tls = tls
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}
        self._stubs: dict[str, broker_pb2_grpc.BrokerStub] = {}
        self._next = 0
        self._last_good: str | None = None
        self._suspects: set[str] = set()
        self._closed = False
        self._refusals = BootstrapRefusals(self.bootstrap, peer="broker")
        self._produce_streams = ProduceStreams(self.stub, self._call_metadata)

    # -- suspects ------------------------------------------------------------------------------

    def mark_suspect(self, address: str) -> None:
        """``address`` did not answer (see the module docstring): `call_any` tries it last."""
        with self._lock:
            self._suspects.add(address)
            if self._last_good == address:
                self._last_good = None

    def is_suspect(self, address: str) -> bool:
        return address in self._suspects

    @property
    def ever_answered(self) -> bool:
        """Whether any broker ever answered a call of this client."""
        return self._refusals.has_answered

    def unreachable(self) -> NetworkError | None:
        """The error to give up with when no broker ever answered and every bootstrap address
        refused connections (`kraft.transport.unreachable`); None otherwise."""
        return self._refusals.verdict(time.monotonic())

    def _note_outcome(self, address: str, error: KraftError | None) -> None:
        if error is None:
            self._refusals.answered()
            if address in self._suspects:
                with self._lock:
                    self._suspects.discard(address)
        elif isinstance(error, _TRANSPORT_ERRORS):
            self._refusals.failed(address, error, time.monotonic())
            self.mark_suspect(address)

    def close(self) -> None:
        self._produce_streams.close()
        with self._lock:
            self._closed = True
            channels = list(self._channels.values())
            self._channels.clear()
            self._stubs.clear()
        for channel in channels:
            channel.close()

    def stub(self, address: str) -> broker_pb2_grpc.BrokerStub:
        with self._lock:
            if self._closed:
                raise NetworkError("client closed")
            stub = self._stubs.get(address)
            if stub is None:
                channel = client_channel(address, self.tls)
                self._channels[address] = channel
                stub = self._stubs[address] = broker_pb2_grpc.BrokerStub(channel)
            return stub

    def call(
        self,
        address: str,
        method: str,
        request: Any,
        response_cls: type[R],
        timeout_s: float | None = None,
    ) -> R:
        """One blocking RPC (``method`` of the Broker service).

        Raises:
            NetworkError, RequestTimedOutError: the broker is unreachable or too slow.
        """
        stub = self.stub(address)
        try:
            with map_grpc_errors(address, "broker", self.tls):
                reply = getattr(stub, method)(
                    encode(request),
                    timeout=timeout_s or self.request_timeout_s,
                    metadata=self._call_metadata,
                )
        except KraftError as e:
            self._note_outcome(address, e)
            raise
        self._note_outcome(address, None)
        return decode(reply, response_cls)

    def call_async(
        self,
        address: str,
        method: str,
        request: Any,
        response_cls: type[R],
        on_done: Callable[[R | None, KraftError | None], None],
        timeout_s: float | None = None,
    ) -> Cancellable:
        """Start one RPC; ``on_done(response, None)`` or ``on_done(None, error)`` runs on a
        gRPC thread when it ends (it must not block). Returns the call: cancelling it ends
        it with a `NetworkError` (the server may still have acted on it). ``Produce`` goes on
        the broker's ``ProduceStream`` call (`replication.clients.produce_stream`): the same
        outcomes, without a call's set-up per request."""
        timeout_s = timeout_s or self.request_timeout_s

        def done(reply: Any, error: grpc.RpcError | None) -> None:
            if error is not None:
                # NB: no probe on gRPC's callback thread (it must not block).
                failure = translate_rpc_error(error, address, "broker", self.tls, probe=False)
                self._note_outcome(address, failure)
                on_done(None, failure)
                return
            self._note_outcome(address, None)
            on_done(decode(reply, response_cls), None)

        def unary() -> Cancellable:
            try:
                future = getattr(self.stub(address), method).future(
                    message, timeout=timeout_s, metadata=self._call_metadata
                )
            except KraftError as e:
                on_done(None, e)
                return _Done()

            def finished(f: Any) -> None:
                try:
                    reply = f.result()
                except grpc.RpcError as e:
                    done(None, e)
                    return
                except Exception as e:  # a cancelled future raises grpc.FutureCancelledError
                    on_done(None, NetworkError(f"broker {address}: {e!r}"))
                    return
                done(reply, None)

            future.add_done_callback(finished)
            cancellable: Cancellable = future
            return cancellable

        message = encode(request)
        if method != "Produce":
            return unary()
        call: Cancellable = self._produce_streams.send(address, message, timeout_s, done, unary)
        return call

    def fetch_metadata(
        self,
        topics: Iterable[str],
        *,
        addresses: Iterable[str] = (),
        timeout_s: float = 30.0,
    ) -> MetadataResponse:
        """The Metadata of ``topics`` (none: every topic) from any broker, retried under one
        deadline.

        Args:
            addresses: known broker addresses to try besides the bootstrap ones.

        Raises:
            NetworkError, RequestTimedOutError: no broker answered within ``timeout_s``.
        """
        request = MetadataRequest(topics=tuple(sorted(topics)))
        return self.call_any(
            "Metadata", request, MetadataResponse, addresses=addresses, timeout_s=timeout_s
        )

    def call_any(
        self,
        method: str,
        request: Any,
        response_cls: type[R],
        *,
        addresses: Iterable[str] = (),
        timeout_s: float = 30.0,
        check: Callable[[R], None] | None = None,
    ) -> R:
        """``method`` on any broker: the last one that answered, else the bootstrap and known
        ``addresses`` in turn; retriable failures (and retriable errors ``check`` raises on
        the response) are retried with backoff until ``timeout_s``.

        Raises:
            NetworkError: at once when no broker ever answered and every bootstrap address
                has refused connections for a second (`unreachable`).
            KraftError: a non-retriable error at once, a retriable one when time is up.
        """
        candidates = list(dict.fromkeys([*self.bootstrap, *addresses]))
        started = time.monotonic()

        def attempt() -> R:
            address = self._pick(candidates)
            remaining = max(0.05, timeout_s - (time.monotonic() - started))
            try:
                response = self.call(
                    address, method, request, response_cls, min(self.request_timeout_s, remaining)
                )
            except KraftError:
                unreachable = self.unreachable()
                if unreachable is not None:
                    raise StopRetrying(unreachable) from None
                raise
            if check is not None:
                check(response)
            with self._lock:
                self._last_good = address
            return response

        return retry_retriable(attempt, timeout_s=timeout_s)

    def _pick(self, candidates: list[str]) -> str:
        with self._lock:
            if self._last_good is not None:
                address, self._last_good = self._last_good, None  # a failure moves on
                return address
            n = len(candidates)
            for i in range(n):  # suspects last
                address = candidates[(self._next + i) % n]
                if address not in self._suspects:
                    self._next += i + 1
                    return address
            # Every candidate is suspect: try them in turn, as Kafka's leastLoadedNode falls
            # back to a node in reconnect backoff. NB: scanning all n and returning the last
            # one advanced the cursor by n, so every attempt asked the same (possibly dead)
            # broker: a producer whose brokers had all been killed once stayed stuck after the
            # next leader kill until that broker came back (issue 12).
            address = candidates[self._next % n]
            self._next += 1
            return address


__all__ = [
    "BrokerNetwork",
    "Cancellable",
]
