"""`ProduceStreams` through `BrokerNetwork.call_async` over a real gRPC server on loopback: up to
five Produce requests outstanding on one ``ProduceStream`` call and matched to their answers in
order; a request past its timeout fails as a unary call's would and drops the stream (the ones
behind it fail retriably, the next request opens a new stream); an abandoned request's late
answer is not taken for the next one's; a broker without ``ProduceStream`` gets unary calls."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest

from kraft._generated import broker_pb2
from replication.clients.network import BrokerNetwork
from replication.messages import ProduceRequest, ProduceResponse
from storage.errors import KraftError, NetworkError, RequestTimedOutError

pytestmark = pytest.mark.timeout(60)

HOLD = 999
"""A request with this ``timeout_ms`` is never answered (the broker holds it)."""


class _Broker:
    """A Broker service with Produce and (unless ``unary_only``) ProduceStream. It answers a
    request with its ``acks`` as a topic's name, so an answer names its request."""

    def __init__(self, *, unary_only: bool = False) -> None:
        self.streams = 0
        self.unary_calls = 0
        self.unary_only = unary_only
        self.held = threading.Event()

    def _answer(self, request: Any) -> Any:
        return broker_pb2.ProduceResponse(
            responses=[broker_pb2.ProduceTopicResponse(name=str(request.acks))]
        )

    def produce(self, request: Any, context: Any) -> Any:
        self.unary_calls += 1
        return self._answer(request)

    def produce_stream(self, requests: Iterator[Any], context: Any) -> Iterator[Any]:
        self.streams += 1
        for request in requests:
            if request.timeout_ms == HOLD:
                self.held.wait(30)
                return
            yield self._answer(request)

    def handler(self) -> grpc.GenericRpcHandler:
        serialize = {"response_serializer": lambda m: m.SerializeToString()}
        methods = {
            "Produce": grpc.unary_unary_rpc_method_handler(
                self.produce,
                request_deserializer=broker_pb2.ProduceRequest.FromString,
                **serialize,
            )
        }
        if not self.unary_only:
            methods["ProduceStream"] = grpc.stream_stream_rpc_method_handler(
                self.produce_stream,
                request_deserializer=broker_pb2.ProduceRequest.FromString,
                **serialize,
            )
        return grpc.method_handlers_generic_handler("kraft.v1.Broker", methods)


def _serve(broker: _Broker) -> Iterator[BrokerNetwork]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((broker.handler(),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    network = BrokerNetwork(f"127.0.0.1:{port}", request_timeout_s=5)
    try:
        yield network
    finally:
        broker.held.set()
        network.close()
        server.stop(grace=None)


@pytest.fixture
def broker() -> _Broker:
    return _Broker()


@pytest.fixture
def network(broker: _Broker) -> Iterator[BrokerNetwork]:
    yield from _serve(broker)


def _key(outcome: ProduceResponse | KraftError) -> int | KraftError:
    """The request an answer is for, or the error."""
    if isinstance(outcome, KraftError):
        return outcome
    return int(outcome.responses[0].name)


class _Outcomes:
    def __init__(self) -> None:
        self.done: dict[int, ProduceResponse | KraftError] = {}
        self._cond = threading.Condition()

    def on_done(self, key: int) -> Any:
        def done(response: ProduceResponse | None, error: KraftError | None) -> None:
            with self._cond:
                self.done[key] = error if error is not None else response  # type: ignore[assignment]
                self._cond.notify_all()

        return done

    def wait(self, count: int) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.done) >= count, 15), self.done


def _send(
    network: BrokerNetwork, outcomes: _Outcomes, key: int, *, timeout_ms: int = 0, s: float = 5
) -> Any:
    request = ProduceRequest(acks=key, timeout_ms=timeout_ms)
    address = network.bootstrap[0]
    return network.call_async(
        address, "Produce", request, ProduceResponse, outcomes.on_done(key), timeout_s=s
    )


def test_five_requests_on_one_stream_are_matched_to_their_answers_in_order(
    broker: _Broker, network: BrokerNetwork
) -> None:
    outcomes = _Outcomes()
    for round_ in range(3):
        for key in range(1 + 5 * round_, 6 + 5 * round_):
            _send(network, outcomes, key)
        outcomes.wait(5 * (round_ + 1))
    assert {k: _key(v) for k, v in outcomes.done.items()} == {k: k for k in range(1, 16)}
    assert (broker.streams, broker.unary_calls) == (1, 0)


def test_a_timed_out_request_drops_the_stream_and_the_next_request_opens_a_new_one(
    broker: _Broker, network: BrokerNetwork
) -> None:
    outcomes = _Outcomes()
    _send(network, outcomes, 1)
    outcomes.wait(1)
    _send(network, outcomes, 2, timeout_ms=HOLD, s=0.3)
    _send(network, outcomes, 3, s=5)  # behind the held one: the broker answers in order
    outcomes.wait(3)
    assert isinstance(outcomes.done[2], RequestTimedOutError)
    assert isinstance(outcomes.done[3], NetworkError) and outcomes.done[3].retriable
    _send(network, outcomes, 4)
    outcomes.wait(4)
    assert _key(outcomes.done[4]) == 4
    assert broker.streams == 2


def test_an_abandoned_requests_late_answer_is_not_taken_for_the_next_ones(
    broker: _Broker, network: BrokerNetwork
) -> None:
    outcomes = _Outcomes()
    call = _send(network, outcomes, 1)
    call.cancel()  # may race the answer: either way request 1 is settled once
    _send(network, outcomes, 2)
    outcomes.wait(2)
    assert isinstance(outcomes.done[1], (NetworkError, ProduceResponse))
    assert _key(outcomes.done[2]) == 2
    assert broker.streams == 1


def test_a_broker_without_produce_stream_gets_unary_produce_calls() -> None:
    broker = _Broker(unary_only=True)
    for network in _serve(broker):
        outcomes = _Outcomes()
        for key in range(1, 4):
            _send(network, outcomes, key)
        outcomes.wait(3)
        _send(network, outcomes, 4)
        outcomes.wait(4)
        assert {k: _key(v) for k, v in outcomes.done.items()} == {k: k for k in range(1, 5)}
    assert broker.unary_calls == 4


def test_requests_after_close_fail_with_a_network_error(network: BrokerNetwork) -> None:
    outcomes = _Outcomes()
    network.close()
    _send(network, outcomes, 1)
    outcomes.wait(1)
    assert isinstance(outcomes.done[1], NetworkError)
