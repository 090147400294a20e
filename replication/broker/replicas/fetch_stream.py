"""`FetchStreams`: a follower broker's fetches to each leader broker, on one long-lived
``Broker.FetchStream`` call per leader instead of a unary ``Fetch`` call each.

Kafka's ``ReplicaFetcherThread`` keeps one connection per source broker. Here a unary call costs
its set-up on both sides (call object, metadata, status), which a message on an open stream
does not pay, and a follower sends one fetch per batch the leader receives, so the stream is
what a replicated record costs.

`LeaderFetcher` has one request in flight per leader, so a stream carries one request at a time:
write it, read its answer (the leader answers a stream's requests in order). A call that fails,
times out or is cancelled with a request outstanding is dropped (cancelled), and the next fetch
opens a new one. A leader that does not serve ``FetchStream`` (UNIMPLEMENTED: an older broker)
is fetched from with unary ``Fetch`` calls from then on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc
from google.protobuf.message import Message

from kraft._generated import broker_pb2_grpc
from storage.errors import KraftError, NetworkError, RequestTimedOutError


class FetchStreams:
    """The ``FetchStream`` calls of one follower broker, one per leader broker id.

    Args:
        stub: the cached stub of the broker at an address (one channel per address).
    """

    def __init__(self, stub: Callable[[str], broker_pb2_grpc.BrokerStub]) -> None:
        self._stub = stub
        self._calls: dict[int, tuple[str, Any]] = {}
        """leader id -> (address, its open ``FetchStream`` call)."""
        self._unary: set[str] = set()
        """Addresses that answered UNIMPLEMENTED: fetched from with unary calls."""

    async def fetch(
        self,
        leader_id: int,
        address: str,
        request: Message,
        timeout_s: float,
    ) -> Message:
        """Send ``request`` (a ``BrokerFetchRequest``) to the leader and return its answer (a
        ``BrokerFetchResponse``).

        Raises:
            RequestTimedOutError: no answer within ``timeout_s``.
            NetworkError: the call failed or the leader refused it.
        """
        if address in self._unary:
            try:
                reply: Message = await self._stub(address).Fetch(request, timeout=timeout_s)
            except grpc.RpcError as e:
                raise _error(e, leader_id, address) from None
            return reply
        call = self._open(leader_id, address)
        try:
            async with asyncio.timeout(timeout_s):
                await call.write(request)
                reply = await call.read()
        except BaseException as e:
            # NB: a request may be outstanding on it (timeout, cancellation): its answer would
            # be read as the next request's; a new call starts clean.
            self._drop(leader_id)
            if isinstance(e, TimeoutError):
                raise RequestTimedOutError(f"fetch from broker {leader_id} timed out") from None
            if isinstance(e, grpc.RpcError):
                if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                    self._unary.add(address)
                    return await self.fetch(leader_id, address, request, timeout_s)
                raise _error(e, leader_id, address) from None
            if isinstance(e, asyncio.InvalidStateError):  # the call ended under the write
                raise NetworkError(f"fetch stream to broker {leader_id} ended") from None
            raise
        if reply is grpc.aio.EOF:
            self._drop(leader_id)
            raise NetworkError(f"fetch stream to broker {leader_id} at {address} ended")
        return reply

    def close(self) -> None:
        """Cancel every open call."""
        for leader_id in list(self._calls):
            self._drop(leader_id)

    def _open(self, leader_id: int, address: str) -> Any:
        entry = self._calls.get(leader_id)
        if entry is not None and entry[0] == address and not entry[1].done():
            return entry[1]
        self._drop(leader_id)
        call = self._stub(address).FetchStream()
        self._calls[leader_id] = (address, call)
        return call

    def _drop(self, leader_id: int) -> None:
        entry = self._calls.pop(leader_id, None)
        if entry is not None:
            entry[1].cancel()


def _error(e: grpc.RpcError, leader_id: int, address: str) -> KraftError:
    if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
        return RequestTimedOutError(f"fetch from broker {leader_id} timed out")
    return NetworkError(f"fetch from broker {leader_id} at {address}: {e.code()}")


__all__ = ["FetchStreams"]
