"""`kraft fuzz`: payloads for every RPC are generated from any seed, and a short run against
real processes finds no handler error, hang, crash or changed data."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.cluster.local import LocalCluster
from replication.nemesis.fuzz import (
    _Caller,
    drive_calls,
    fuzz_cluster,
    replay_payload,
    rpc_methods,
)
from replication.nemesis.fuzz_messages import PAYLOAD_KINDS, REPEATED_BUDGET, PayloadFuzzer

METHODS = list(rpc_methods())
BY_NAME = {m.full_name: m for m in METHODS}


@settings(max_examples=300, deadline=None)
@given(rng=st.randoms(use_true_random=False), index=st.integers(0, len(METHODS) - 1))
def test_every_method_gets_a_payload_of_every_kind_from_any_generator(
    rng: random.Random, index: int
) -> None:
    method = METHODS[index]
    for kind in PAYLOAD_KINDS:
        got_kind, payload = PayloadFuzzer(rng).payload(method.input_type, kind)
        assert got_kind == kind
        assert isinstance(payload, bytes)


def _repeated_elements(message: Message) -> int:
    count = 0
    for field, value in message.ListFields():
        nested = field.type == FieldDescriptor.TYPE_MESSAGE
        if field.is_repeated:
            count += len(value) + (sum(map(_repeated_elements, value)) if nested else 0)
        elif nested:
            count += _repeated_elements(value)
    return count


@settings(max_examples=100, deadline=None)
@given(rng=st.randoms(use_true_random=False), index=st.integers(0, len(METHODS) - 1))
def test_a_payload_carries_at_most_the_budget_of_repeated_elements(
    rng: random.Random, index: int
) -> None:
    message = PayloadFuzzer(rng).message(METHODS[index].input_type)
    assert _repeated_elements(message) <= REPEATED_BUDGET


def test_long_repeated_fields_nested_in_long_repeated_fields_stay_within_the_budget() -> None:
    # Before the budget this generator built a 12 MB message (1,000 resources of 1,000
    # config names each), which cost the fuzzer more than the node it was sent to.
    method = BY_NAME["kraft.v1.Controller.DescribeConfigs"]
    rng = random.Random(f"1:{method.full_name}:16")
    message = PayloadFuzzer(rng).message(method.input_type)
    assert _repeated_elements(message) <= REPEATED_BUDGET
    assert len(message.SerializeToString()) < 1_000_000


def test_calls_are_in_flight_together_and_recorded_in_order() -> None:
    together = threading.Barrier(4, timeout=10)
    recorded: list[int] = []

    def call(job: int) -> int:
        if job < 4:
            together.wait()  # breaks (and the test fails) unless 4 calls run at once
        return job * 2

    crashed, suspects = drive_calls(
        range(100),
        call,
        lambda job, result: recorded.append(result // 2),
        label=str,
        dead=list,
        concurrency=4,
        check_every=10,
    )
    assert (crashed, suspects) == ([], [])
    assert recorded == list(range(100))


def test_a_node_that_dies_stops_the_run_and_the_call_that_killed_it_is_a_suspect() -> None:
    killed = threading.Event()
    recorded: list[int] = []

    def call(job: int) -> int:
        if job == 437:
            killed.set()
        return job

    crashed, suspects = drive_calls(
        range(10_000),
        call,
        lambda job, result: recorded.append(job),
        label=lambda job: f"call#{job}",
        dead=lambda: ["broker-1"] if killed.is_set() else [],
        concurrency=4,
        check_every=50,
    )
    assert crashed == ["broker-1"]
    assert "call#437" in suspects
    assert len(suspects) <= 50 + 2 * 4
    assert recorded == list(range(len(recorded))) and len(recorded) < 600


def test_a_stream_the_server_keeps_open_past_the_timeout_is_a_hang() -> None:
    # The fuzzer used to count a stream open at its deadline as answered ("OK").
    released = threading.Event()

    def never_ends(requests: Iterator[bytes], context: Any) -> Iterator[bytes]:
        for _ in requests:
            pass
        released.wait(10)  # the half-closed stream is never ended
        return iter(())

    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    handler = grpc.stream_stream_rpc_method_handler(never_ends)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("kraft.v1.Raft", {"Stream": handler}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    caller = _Caller()
    try:
        status = caller.stream(f"127.0.0.1:{port}", "/kraft.v1.Raft/Stream", [b"x"], 0.5)
    finally:
        released.set()
        caller.close()
        server.stop(None)
    assert status == "DEADLINE_EXCEEDED"


def test_a_call_replays_from_its_seed_method_and_number() -> None:
    method = METHODS[0]
    assert replay_payload(7, method, 3) == replay_payload(7, method, 3)
    assert replay_payload(7, method, 3) != replay_payload(8, method, 3)


def test_every_service_of_the_wire_contract_is_fuzzed() -> None:
    services = {m.containing_service.name for m in METHODS}
    assert {"Broker", "Controller", "Raft"} <= services
    assert len(METHODS) >= 23


@pytest.mark.process
@pytest.mark.timeout(240)
def test_a_short_fuzz_of_every_rpc_leaves_the_cluster_serving_and_the_data_intact() -> None:
    with LocalCluster(controllers=3, brokers=3) as cluster:
        cluster.wait_until_healthy(timeout=60)
        report = fuzz_cluster(cluster, calls_per_rpc=15, seed=5)
    assert report.calls >= 15 * len(METHODS)
    assert not report.crashed and not report.unhealthy
    assert report.data_intact, report.data_problem
    problems = {n: o.examples for n, o in report.per_rpc.items() if o.violations}
    assert report.valid, problems
