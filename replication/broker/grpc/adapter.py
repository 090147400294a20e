"""gRPC in front of `BrokerApi`: one table of routes, each decoding the proto message,
building the `RequestContext` from the peer, calling the API, and encoding its answer.

- ``kraft.v1.Broker``: the method name is the Kafka API's; the request is bounded on the wire
  message before it is decoded (`replication.broker.limits`, so a huge request costs no
  decoding) and answered by `BrokerApi.call`. A request the caller may not send at all
  (`Refused`) is answered PERMISSION_DENIED ``CODE_NAME: why``, as kraft's clients have always
  been told it (`kraft.security.guard.authorization_error` turns it back into the error);
  refusals of some topics only are inside the response, as Kafka answers them.
  ``FetchStream`` carries a follower's Fetch requests to one leader on one long-lived call,
  ``ProduceStream`` a producer's Produce requests, each answered exactly as the unary method
  (a unary call costs about twice the CPU of a stream message on both sides: the call's
  set-up), in the order they arrived (`STREAMS`).
- ``kraft.v1.Controller``: the admin requests a broker forwards (`FORWARDED`), through
  `BrokerApi.forward`; a controller that cannot be reached in time is UNAVAILABLE (the admin
  client retries), a refusal PERMISSION_DENIED.

A malformed request is INVALID_ARGUMENT ``INVALID_REQUEST: ...`` everywhere. Methods not in
the table are UNIMPLEMENTED (gRPC's answer to an unknown method).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

import grpc
from google.protobuf.message import Message

from kraft._generated import broker_pb2, controller_pb2
from kraft.raft.messages import CurrentLeader
from kraft.security.guard import caller_of
from kraft.security.settings import AuthorizationSettings
from kraft.transport import controller_codec
from kraft.transport.channels import client_id_of
from replication.broker.api.authorization import Refused
from replication.broker.api.broker_api import FORWARDED, Api, BrokerApi
from replication.broker.api.context import RequestContext
from replication.broker.limits import too_many_partitions
from replication.codec import decode, encode
from replication.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnBatchRequest,
    AddPartitionsToTxnRequest,
    BrokerFetchRequest,
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    DeleteGroupsRequest,
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ListGroupsRequest,
    ListOffsetsRequest,
    ListTransactionsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    ProduceRequest,
    TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
)
from storage.errors import ErrorCode, KraftError

Req = TypeVar("Req")
Resp = TypeVar("Resp")

BROKER_SERVICE: Final = "kraft.v1.Broker"
CONTROLLER_SERVICE: Final = "kraft.v1.Controller"
API_SERVICES: Final = frozenset({BROKER_SERVICE, CONTROLLER_SERVICE})
"""The services whose authorization and request metrics `BrokerApi` does (the server's
interceptors leave them alone: `kraft.transport.channels.aio_server`)."""

_REFUSED: Final = frozenset(
    {
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    }
)

Context = Any
"""A ``grpc.aio.ServicerContext`` (grpc ships no types)."""


@dataclass(frozen=True, slots=True)
class Route(Generic[Req, Resp]):
    """One ``kraft.v1.Broker`` method: its request dataclass and the `Api` it calls."""

    request: type[Req]
    api: Callable[[BrokerApi], Api[Req, Resp]]


BROKER_ROUTES: Final[dict[str, Route[Any, Any]]] = {
    "Produce": Route(ProduceRequest, lambda a: a.produce_api),
    "Fetch": Route(BrokerFetchRequest, lambda a: a.fetch_api),
    "ListOffsets": Route(ListOffsetsRequest, lambda a: a.list_offsets_api),
    "Metadata": Route(MetadataRequest, lambda a: a.metadata_api),
    "InitProducerId": Route(InitProducerIdRequest, lambda a: a.init_producer_id_api),
    "WriteTxnMarkers": Route(WriteTxnMarkersRequest, lambda a: a.write_txn_markers_api),
    "FindCoordinator": Route(FindCoordinatorRequest, lambda a: a.find_coordinator_api),
    "ConsumerGroupHeartbeat": Route(
        ConsumerGroupHeartbeatRequest, lambda a: a.consumer_group_heartbeat_api
    ),
    "OffsetCommit": Route(OffsetCommitRequest, lambda a: a.offset_commit_api),
    "OffsetFetch": Route(OffsetFetchRequest, lambda a: a.offset_fetch_api),
    "ListGroups": Route(ListGroupsRequest, lambda a: a.list_groups_api),
    "ConsumerGroupDescribe": Route(
        ConsumerGroupDescribeRequest, lambda a: a.consumer_group_describe_api
    ),
    "DeleteGroups": Route(DeleteGroupsRequest, lambda a: a.delete_groups_api),
    "AddPartitionsToTxn": Route(AddPartitionsToTxnRequest, lambda a: a.add_partitions_to_txn_api),
    "AddPartitionsToTxnBatch": Route(
        AddPartitionsToTxnBatchRequest, lambda a: a.add_partitions_to_txn_batch_api
    ),
    "AddOffsetsToTxn": Route(AddOffsetsToTxnRequest, lambda a: a.add_offsets_to_txn_api),
    "EndTxn": Route(EndTxnRequest, lambda a: a.end_txn_api),
    "TxnOffsetCommit": Route(TxnOffsetCommitRequest, lambda a: a.txn_offset_commit_api),
    "DescribeTransactions": Route(
        DescribeTransactionsRequest, lambda a: a.describe_transactions_api
    ),
    "ListTransactions": Route(ListTransactionsRequest, lambda a: a.list_transactions_api),
    "DescribeProducers": Route(DescribeProducersRequest, lambda a: a.describe_producers_api),
}
"""The ``kraft.v1.Broker`` methods, by name (the Kafka API's)."""
STREAMS: Final = {"FetchStream": "Fetch", "ProduceStream": "Produce"}
"""Streaming methods -> the method whose route answers each of their requests: followers'
fetches on one long-lived stream per leader, producers' requests on one per leader."""
PIPELINED: Final = frozenset({"Produce"})
"""The APIs (`STREAMS`' values) whose streams' requests are handled while the ones before them
still wait (answered in order all the same), as a Kafka broker reads a connection's next
request while an acks=all Produce waits for the followers. One at a time, a producer's stream
held its leader to one Produce in flight: every Produce then cost a fetch round trip per
follower, whatever the producer's ``max.in.flight.requests.per.connection``. A follower's
``FetchStream`` carries one request at a time and is answered in the handler's own task (a
reader task there left streams open after their client's half-close under ``kraft fuzz``)."""
PIPELINED_IN_FLIGHT_MAX: Final = 8
"""Requests of one pipelined stream handled at once; past it the broker stops reading the
stream (gRPC's flow control holds the sender back). Kraft's producer sends at most
``max.in.flight.requests.per.connection`` (5)."""


@dataclass(frozen=True, slots=True)
class GrpcPeers:
    """Builds a call's `RequestContext`: the principal from the client certificate
    (``ssl.principal.mapping.rules``), the peer's IP address, the listener's name."""

    settings: AuthorizationSettings
    listener: str

    def context(self, context: Context, api: str) -> RequestContext:
        caller = caller_of(context, self.settings)
        return RequestContext(
            principal=caller.principal,
            client_host=caller.host,
            listener=self.listener,
            client_id=client_id_of(context.invocation_metadata()),
            api=api,
            security_protocol="SSL" if caller.tls else "PLAINTEXT",
        )


async def _invalid(context: Context, error: KraftError) -> None:
    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, error.message)


async def _refuse(context: Context, code: ErrorCode, message: str) -> None:
    await context.abort(grpc.StatusCode.PERMISSION_DENIED, f"{code.name}: {message}")


@dataclass(frozen=True, slots=True)
class _Abort:
    """A request answered with a gRPC status instead of a message (malformed, refused)."""

    status: grpc.StatusCode
    details: str


def _broker_answer(
    route: Route[Req, Resp], api: BrokerApi
) -> Callable[[Message, RequestContext], Awaitable[Message | _Abort]]:
    """The body of a method: bound, decode, `BrokerApi.call`, encode; `_Abort` for a malformed
    or refused request (the caller ends the call with it)."""
    target = route.api(api)

    async def answer(message: Message, ctx: RequestContext) -> Message | _Abort:
        problem = too_many_partitions(message)
        if problem is not None:
            return _Abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
        try:
            request = decode(message, route.request)
            outcome = await api.call(target, request, ctx)
        except KraftError as e:
            if e.code is not ErrorCode.INVALID_REQUEST:
                raise
            return _Abort(grpc.StatusCode.INVALID_ARGUMENT, e.message)
        if isinstance(outcome, Refused):
            return _Abort(
                grpc.StatusCode.PERMISSION_DENIED, f"{outcome.code.name}: {outcome.message}"
            )
        return encode(outcome)

    return answer


def _request_class(name: str) -> type[Message]:
    method = broker_pb2.DESCRIPTOR.services_by_name["Broker"].methods_by_name[name]
    request_class: type[Message] = getattr(broker_pb2, method.input_type.name)
    return request_class


def _broker_handler(
    name: str, route: Route[Req, Resp], api: BrokerApi, peers: GrpcPeers
) -> grpc.RpcMethodHandler:
    answer = _broker_answer(route, api)

    async def unary(message: Message, context: Context) -> Message:
        reply = await answer(message, peers.context(context, name))
        if isinstance(reply, _Abort):
            await context.abort(reply.status, reply.details)
        assert not isinstance(reply, _Abort)
        return reply

    return grpc.unary_unary_rpc_method_handler(
        unary,
        request_deserializer=_request_class(name).FromString,
        response_serializer=lambda m: m.SerializeToString(),
    )


def _stream_handler(name: str, api: BrokerApi, peers: GrpcPeers) -> grpc.RpcMethodHandler:
    """A stream of ``name`` requests (`STREAMS`): each answered as a unary ``name`` call would
    be (the same bound, authorization and metrics: the context's API is ``name``), one at a
    time, in the order they arrived (the client keeps up to
    ``max.in.flight.requests.per.connection`` of them on the wire). A request a unary call
    would have ended with a status (malformed, refused) ends the stream with that status once
    the answers before it are sent; the requests after it are not handled."""
    answer = _broker_answer(BROKER_ROUTES[name], api)
    if name in PIPELINED:
        return grpc.stream_stream_rpc_method_handler(
            _pipelined(name, answer, peers),
            request_deserializer=_request_class(name).FromString,
            response_serializer=lambda m: m.SerializeToString(),
        )

    async def stream(requests: AsyncIterator[Message], context: Context) -> AsyncIterator[Message]:
        # NB: one request at a time, read in the handler's own task: with a reader task
        # answering up to 32 concurrently, a stream its client half-closed was never ended
        # (kraft fuzz: FetchStream calls still open at their deadline)
        ctx = peers.context(context, name)
        async for message in requests:
            reply = await answer(message, ctx)
            if isinstance(reply, _Abort):
                await context.abort(reply.status, reply.details)
            assert not isinstance(reply, _Abort)
            yield reply

    return grpc.stream_stream_rpc_method_handler(
        stream,
        request_deserializer=_request_class(name).FromString,
        response_serializer=lambda m: m.SerializeToString(),
    )


def _pipelined(
    name: str,
    answer: Callable[[Message, RequestContext], Awaitable[Message | _Abort]],
    peers: GrpcPeers,
) -> Callable[[AsyncIterator[Message], Context], AsyncIterator[Message]]:
    """The behaviour of a stream of a `PIPELINED` API: a reader task starts each request's
    handling as it arrives (up to `PIPELINED_IN_FLIGHT_MAX`; tasks start in creation order, so
    a producer's batches reach a partition in the order it sent them,
    `replication.broker.replicas.sequence_turn`) and the handler's own task answers them in that
    order. What ended the reading (the client's half-close, a malformed request's abort) ends the
    stream after the answers before it; a request a unary call would have ended with a status ends
    it with that status after the answers before it, and the requests after it are cancelled."""

    async def stream(requests: AsyncIterator[Message], context: Context) -> AsyncIterator[Message]:
        ctx = peers.context(context, name)
        handled: asyncio.Queue[asyncio.Future[Message | _Abort] | BaseException | None]
        handled = asyncio.Queue()
        room = asyncio.Semaphore(PIPELINED_IN_FLIGHT_MAX)

        async def read() -> None:
            try:
                async for message in requests:
                    await room.acquire()
                    handled.put_nowait(asyncio.ensure_future(answer(message, ctx)))
            except Exception as e:  # NB: the guard's abort: raised again in the handler's task
                handled.put_nowait(e)
            finally:
                handled.put_nowait(None)

        reader = asyncio.ensure_future(read())
        try:
            while (next_one := await handled.get()) is not None:
                if isinstance(next_one, BaseException):
                    raise next_one
                reply = await next_one
                room.release()
                if isinstance(reply, _Abort):
                    await context.abort(reply.status, reply.details)
                assert not isinstance(reply, _Abort)
                yield reply
        finally:
            reader.cancel()
            while not handled.empty():
                pending = handled.get_nowait()
                if isinstance(pending, asyncio.Future):
                    pending.cancel()

    return stream


def _forward_handler(
    name: str, cls: type[Any], api: BrokerApi, peers: GrpcPeers
) -> grpc.RpcMethodHandler:
    method = controller_pb2.DESCRIPTOR.services_by_name["Controller"].methods_by_name[name]
    request_class: type[Message] = getattr(controller_pb2, method.input_type.name)

    async def unary(message: Message, context: Context) -> Message:
        try:
            request = controller_codec.decode(message, cls)
        except KraftError as e:
            await _invalid(context, e)
            raise  # pragma: no cover - abort raises
        try:
            response = await api.forward(request, peers.context(context, name))
        except KraftError as e:
            if e.code in _REFUSED:
                await _refuse(context, e.code, e.message)
            status = (
                grpc.StatusCode.UNAVAILABLE if e.retriable else grpc.StatusCode.INVALID_ARGUMENT
            )
            await context.abort(status, f"forwarding to the controller failed: {e.message}")
            raise  # pragma: no cover - abort raises
        return controller_codec.encode_response(response, CurrentLeader())

    return grpc.unary_unary_rpc_method_handler(
        unary,
        request_deserializer=request_class.FromString,
        response_serializer=lambda m: m.SerializeToString(),
    )


def add_broker_api_to_server(server: Any, api: BrokerApi, peers: GrpcPeers) -> None:
    """Serve ``api`` on the grpc.aio ``server``: ``kraft.v1.Broker`` and the forwarded
    ``kraft.v1.Controller`` methods. Build the server with ``api_services=API_SERVICES``."""
    broker = {name: _broker_handler(name, r, api, peers) for name, r in BROKER_ROUTES.items()}
    for stream, name in STREAMS.items():
        broker[stream] = _stream_handler(name, api, peers)
    controller = {f.name: _forward_handler(f.name, cls, api, peers) for cls, f in FORWARDED.items()}
    for service, handlers in ((BROKER_SERVICE, broker), (CONTROLLER_SERVICE, controller)):
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, handlers),))
        server.add_registered_method_handlers(service, handlers)


__all__ = [
    "API_SERVICES",
    "BROKER_ROUTES",
    "STREAMS",
    "GrpcPeers",
    "Route",
    "add_broker_api_to_server",
]
