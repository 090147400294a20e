"""`ProduceStreams`: a producer's Produce requests to each broker on one long-lived
``Broker.ProduceStream`` call, instead of a unary ``Produce`` call each.

Kafka's producer keeps one connection per broker with up to
``max.in.flight.requests.per.connection`` requests outstanding, and the broker answers a
connection's requests in the order they came. A stream here is that connection: requests are
written in the order `send` is called and the broker answers them in that order, so answers
are matched to requests first in, first out, with no correlation id on the wire (the broker's
side: `replication.broker.grpc.adapter`). The order is also what an idempotent producer's
sequences need: the broker starts handling a stream's requests in the order they arrived.

Each request behaves as its unary call would, as its caller sees it:

- an answer, or the status the broker ends the stream with (a malformed or refused request
  ends it as it would end a unary call; the requests behind it fail with that status too and
  the producer sends them again on a new stream, as it would after a lost connection);
- a request unanswered after its timeout fails with ``DEADLINE_EXCEEDED``; like Kafka's
  ``NetworkClient`` on a request timeout, the stream is then dropped (cancelled: the broker
  cancels the requests it still handles) and the requests behind it fail with CANCELLED
  (a `NetworkError`: retriable); the next request opens a new stream;
- a request cancelled by its caller (`Cancellable.cancel`: the producer abandons a stalled
  request) completes at once with a `NetworkError`; its answer, if one comes, is read and
  dropped, so the answers behind it still match;
- a broker that does not serve ``ProduceStream`` (UNIMPLEMENTED: an older broker) gets this
  and every later request to it as unary calls (nothing was handled: the broker refused the
  stream before reading it).

Threads: gRPC's synchronous streams read the request iterator on a thread of their own; each
stream has one reader thread that matches answers, and one watchdog thread per `ProduceStreams`
fails requests past their deadline. Callbacks run on those threads and must not block.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Final

import grpc
from google.protobuf.message import Message

from kraft._generated import broker_pb2_grpc
from storage.errors import KraftError

OnReply = Callable[[Message | None, grpc.RpcError | None], None]
"""Called once per request: ``(answer, None)`` or ``(None, the call's error)``."""
Unary = Callable[[], Any]
"""Sends the request as a unary call instead; returns that call (it has ``cancel()``)."""

_END: Final = object()
_TRANSPORT: Final = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED}
)
"""Statuses that end a stream for all its requests alike; any other is the oldest request's
own answer (a unary call for it would have ended with it)."""


class _StreamError(grpc.RpcError):  # type: ignore[misc]
    """A stream's outcome for a request that its broker never answered: an ``RpcError`` with
    ``code()`` and ``details()``, translated as a unary call's error is."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self._code = code
        self._details = details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


class _Request:
    """One request on a stream: settled once (answered, failed, cancelled or moved to a
    unary call); whatever comes for it afterwards is dropped."""

    __slots__ = ("_owner", "deadline", "message", "on_reply", "settled", "unary", "unary_call")

    def __init__(
        self,
        owner: ProduceStreams,
        message: Message,
        deadline: float,
        on_reply: OnReply,
        unary: Unary,
    ) -> None:
        self._owner = owner
        self.message = message
        self.deadline = deadline
        self.on_reply = on_reply
        self.unary = unary
        self.unary_call: Any = None
        self.settled = False

    def cancel(self) -> bool:
        """Abandon the request: it completes now with CANCELLED (see the module docstring)."""
        with self._owner.lock:
            settled, self.settled = self.settled, True
        if settled:
            call = self.unary_call
            return bool(call.cancel()) if call is not None else False
        self.on_reply(None, _StreamError(grpc.StatusCode.CANCELLED, "produce request abandoned"))
        return True


class _Stream:
    """One ``ProduceStream`` call and its requests awaiting answers, oldest first."""

    def __init__(self, owner: ProduceStreams, address: str, call: Any) -> None:
        self.address = address
        self.pending: deque[_Request] = deque()
        self.requests: queue.SimpleQueue[object] = queue.SimpleQueue()
        self.closed = False
        self._owner = owner
        self._call = call(iter(self.requests.get, _END))
        threading.Thread(target=self._read, name="kraft-produce-stream", daemon=True).start()

    def _read(self) -> None:
        owner = self._owner
        error: grpc.RpcError
        try:
            for reply in self._call:
                with owner.lock:
                    request = self.pending.popleft() if self.pending else None
                    if request is None or request.settled:
                        continue  # abandoned (or nothing asked: dropped)
                    request.settled = True
                request.on_reply(reply, None)
            error = _StreamError(grpc.StatusCode.UNAVAILABLE, "produce stream ended")
        except grpc.RpcError as e:
            error = e
        except Exception as e:  # the call broke under us (a closed channel)
            error = _StreamError(grpc.StatusCode.CANCELLED, f"produce stream failed: {e!r}")
        owner.end(self, error)

    def close(self) -> list[_Request]:
        """End the call; returns the requests still unsettled, settled (caller holds the
        owner's lock, and completes them outside it)."""
        self.closed = True
        self.requests.put(_END)
        self._call.cancel()
        left = [r for r in self.pending if not r.settled]
        for request in left:
            request.settled = True
        self.pending.clear()
        return left


class ProduceStreams:
    """The ``ProduceStream`` calls of one producer, one per broker address.

    Args:
        stub: the cached stub of the broker at an address (one channel per address).
        metadata: the call metadata (``client.id``).
    """

    def __init__(
        self,
        stub: Callable[[str], broker_pb2_grpc.BrokerStub],
        metadata: tuple[tuple[str, str], ...] | None,
    ) -> None:
        self._stub = stub
        self._metadata = metadata
        self.lock = threading.Lock()
        self._deadlines = threading.Condition(self.lock)
        self._streams: dict[str, _Stream] = {}
        self._unary: set[str] = set()
        """Addresses that answered UNIMPLEMENTED: sent unary calls."""
        self._watchdog: threading.Thread | None = None
        self._wake_at = float("inf")
        """When the watchdog looks next (inf: not before a request wakes it)."""
        self._closed = False

    def send(
        self, address: str, message: Message, timeout_s: float, on_reply: OnReply, unary: Unary
    ) -> Any:
        """Send ``message`` (a ``ProduceRequest``) on the stream to ``address``, or as ``unary``
        if that broker has no streams; ``on_reply`` gets its outcome. Returns the request
        (``cancel()`` abandons it)."""
        request = _Request(self, message, time.monotonic() + timeout_s, on_reply, unary)
        failure = _StreamError(grpc.StatusCode.CANCELLED, "client closed")
        stream: _Stream | None = None
        with self.lock:
            if address in self._unary:
                request.settled = True
            elif not self._closed:
                stream = self._streams.get(address)
                if stream is None:
                    try:
                        stream = self._open(address)
                    except KraftError as e:  # the client is closing
                        failure = _StreamError(grpc.StatusCode.CANCELLED, e.message)
            if stream is not None:
                if request.deadline < self._wake_at:
                    self._deadlines.notify()
                stream.pending.append(request)
                stream.requests.put(message)  # in the order of `pending`
                return request
        if request.settled:
            request.unary_call = unary()
        else:
            request.settled = True
            on_reply(None, failure)
        return request

    def close(self) -> None:
        """End every stream; their unanswered requests fail with CANCELLED."""
        with self.lock:
            self._closed = True
            self._deadlines.notify()
            left = [r for s in self._streams.values() for r in s.close()]
            self._streams.clear()
        for request in left:
            request.on_reply(None, _StreamError(grpc.StatusCode.CANCELLED, "client closed"))

    def end(self, stream: _Stream, error: grpc.RpcError) -> None:
        """``stream``'s call ended with ``error``: its unanswered requests fail with it, or
        go as unary calls if the broker has no streams."""
        code = error.code()
        with self.lock:
            if self._streams.get(stream.address) is stream:
                del self._streams[stream.address]
            if code is grpc.StatusCode.UNIMPLEMENTED:
                self._unary.add(stream.address)
            left = stream.close()
        if code is grpc.StatusCode.UNIMPLEMENTED:
            for request in left:
                request.unary_call = request.unary()
            return
        behind = error
        if code not in _TRANSPORT:  # the oldest request's own status (malformed, refused)
            behind = _StreamError(
                grpc.StatusCode.CANCELLED, f"produce stream ended by an earlier request: {code}"
            )
        for i, request in enumerate(left):
            request.on_reply(None, error if i == 0 else behind)

    def _open(self, address: str) -> _Stream:
        stub = self._stub(address)

        def call(requests: Iterator[object]) -> Any:
            return stub.ProduceStream(requests, metadata=self._metadata)

        stream = self._streams[address] = _Stream(self, address, call)
        if self._watchdog is None:
            self._watchdog = threading.Thread(
                target=self._watch, name="kraft-produce-deadlines", daemon=True
            )
            self._watchdog.start()
        return stream

    def _watch(self) -> None:
        """Fail the requests past their deadline: a late request drops its stream."""
        while True:
            with self.lock:
                if self._closed:
                    return
                now = time.monotonic()
                late = [
                    s
                    for s in self._streams.values()
                    if any(r.deadline <= now and not r.settled for r in s.pending)
                ]
                if not late:
                    self._wake_at = min(
                        (r.deadline for s in self._streams.values() for r in s.pending),
                        default=float("inf"),
                    )
                    wait = self._wake_at - now
                    self._deadlines.wait(wait if wait != float("inf") else None)
                    self._wake_at = 0.0  # awake: a request need not wake it
                    continue
                ended = []
                for stream in late:
                    del self._streams[stream.address]
                    ended.append((now, stream.close()))
            for now, left in ended:
                for request in left:
                    if request.deadline <= now:
                        error = _StreamError(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
                    else:
                        error = _StreamError(
                            grpc.StatusCode.CANCELLED,
                            "produce stream dropped: a request before this one timed out",
                        )
                    request.on_reply(None, error)


__all__ = ["ProduceStreams"]
