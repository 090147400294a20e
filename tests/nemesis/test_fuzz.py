"""`kraft fuzz`: payloads for every RPC are generated from any seed, and a short run against
real processes finds no handler error, hang, crash or changed data."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.cluster.local import LocalCluster
from replication.nemesis.fuzz import fuzz_cluster, replay_payload, rpc_methods
from replication.nemesis.fuzz_messages import PAYLOAD_KINDS, PayloadFuzzer

METHODS = list(rpc_methods())


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
