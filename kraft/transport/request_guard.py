"""`RejectUnparseable`: a server interceptor that answers a request that is not its message
with INVALID_ARGUMENT, as Kafka answers a malformed request with INVALID_REQUEST.

Without it, grpc.aio answers bytes that do not parse as the method's request message with
status UNKNOWN ("Unexpected DecodeError"), the status it also gives a servicer that raised: a
client, an operator or the fuzzer (``kraft fuzz``) could not tell a malformed request from a
bug. The interceptor wraps each method's request deserializer: a request that fails to parse
becomes a marker, and the method's behaviour, wrapped too, aborts on it before any kraft code
runs. On a stream (the Raft stream), a malformed message ends the stream the same way.
Synchronous servicers (grpc's health service) are left alone: they parse no kraft input.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final, final

import grpc
from google.protobuf.message import DecodeError

DETAIL_BYTES: Final = 120


@final
class _Unparseable:
    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _guard_deserializer(deserialize: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    def guarded(data: bytes) -> Any:
        try:
            return deserialize(data)
        except (DecodeError, ValueError, TypeError) as e:
            return _Unparseable(str(e)[:DETAIL_BYTES])

    return guarded


async def _abort(context: grpc.aio.ServicerContext[Any, Any], bad: _Unparseable) -> None:
    await context.abort(
        grpc.StatusCode.INVALID_ARGUMENT, f"INVALID_REQUEST: malformed request: {bad.reason}"
    )


def _guard_unary(behaviour: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a unary-request behaviour, keeping its shape (grpc.aio tells an async generator
    from a coroutine function by inspection)."""
    if inspect.isasyncgenfunction(behaviour):

        async def guarded_stream(
            request: Any, context: grpc.aio.ServicerContext[Any, Any]
        ) -> AsyncIterator[Any]:
            if isinstance(request, _Unparseable):
                await _abort(context, request)
            async for response in behaviour(request, context):
                yield response

        return guarded_stream

    async def guarded(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        if isinstance(request, _Unparseable):
            await _abort(context, request)
        return await behaviour(request, context)

    return guarded


class UnparseableRequest(Exception):
    """Raised by a stream's guarded request iterator at a request that did not parse; the
    guarded behaviour aborts on it in the handler's own task. NB: not `_abort` where the
    iterator is read: a behaviour may read its requests in a task of its own (a pipelined
    stream), and an abort there sends the status while the handler's task still has answers
    to send, which then never leave (the stream stays open until its deadline)."""

    def __init__(self, bad: _Unparseable) -> None:
        super().__init__(bad.reason)
        self.bad = bad


def _guard_stream(behaviour: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a stream-request behaviour (same shape rule as `_guard_unary`)."""

    async def checked(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for request in requests:
            if isinstance(request, _Unparseable):
                raise UnparseableRequest(request)
            yield request

    if inspect.isasyncgenfunction(behaviour):

        async def guarded_stream(
            requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]
        ) -> AsyncIterator[Any]:
            try:
                async for response in behaviour(checked(requests), context):
                    yield response
            except UnparseableRequest as e:
                await _abort(context, e.bad)

        return guarded_stream

    async def guarded(
        requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]
    ) -> Any:
        try:
            return await behaviour(checked(requests), context)
        except UnparseableRequest as e:
            await _abort(context, e.bad)

    return guarded


@final
class RejectUnparseable(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """See the module docstring."""

    def __init__(self) -> None:
        self._handlers: dict[str, grpc.RpcMethodHandler] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        # One guarded handler per method, built on its first call (a server's handlers are
        # fixed once it starts): per RPC, a dict lookup.
        method = handler_call_details.method
        handler = self._handlers.get(method)
        if handler is None:
            handler = _guarded(await continuation(handler_call_details))
            if handler is not None:  # NB: an unknown method is not kept (any name can come)
                self._handlers[method] = handler
        return handler


def _guarded(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """``handler`` with its deserializer and behaviour guarded (see the module docstring)."""
    if handler is None or handler.request_deserializer is None:
        return handler
    behaviour = handler.unary_unary or handler.stream_stream or handler.unary_stream
    if behaviour is not None and not (
        inspect.iscoroutinefunction(behaviour) or inspect.isasyncgenfunction(behaviour)
    ):
        return handler  # a sync servicer (grpc's health): grpc runs it as it is
    deserializer = _guard_deserializer(handler.request_deserializer)
    serializer = handler.response_serializer
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(
            _guard_unary(handler.unary_unary), deserializer, serializer
        )
    if handler.stream_stream is not None:
        return grpc.stream_stream_rpc_method_handler(
            _guard_stream(handler.stream_stream), deserializer, serializer
        )
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(
            _guard_unary(handler.unary_stream), deserializer, serializer
        )
    return handler


__all__ = [
    "RejectUnparseable",
    "UnparseableRequest",
]
