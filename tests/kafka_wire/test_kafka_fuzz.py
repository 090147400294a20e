"""`kraft fuzz --target kafka`: the generator builds a well-formed request of every served API
and version from any seed and breaks frames in every way it names; a short run against the
package's real cluster finds no dropped well-formed request, hang, crash or broker that stops
serving, with thousands of connections and a client that never reads."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.cluster import LocalCluster
from replication.broker.kafka.apis import SUPPORTED_VERSIONS
from replication.broker.kafka.frames import NEED_DATA, Closed, KafkaConnection, Request
from replication.nemesis.kafka_fuzz import fuzz_kafka
from replication.nemesis.kafka_payloads import CLOSE_AT_ONCE, MUTATIONS, KafkaPayloadFuzzer

SERVED = [(key, v) for key, (low, high) in SUPPORTED_VERSIONS.items() for v in range(low, high + 1)]


@settings(max_examples=150, deadline=None)
@given(rng=st.randoms(use_true_random=False), index=st.integers(0, len(SERVED) - 1))
def test_every_served_api_and_version_gets_a_request_the_broker_decodes(
    rng: random.Random, index: int
) -> None:
    key, version = SERVED[index]
    _, frame = KafkaPayloadFuzzer(rng, ["t"]).request(key, version, 42)
    conn = KafkaConnection(SUPPORTED_VERSIONS)
    conn.receive_data(frame)
    event = conn.next_event()
    assert isinstance(event, Request), event
    assert (event.api_key, event.api_version, event.correlation_id) == (key, version, 42)
    assert conn.next_event() is NEED_DATA


@settings(max_examples=300, deadline=None)
@given(
    rng=st.randoms(use_true_random=False),
    index=st.integers(0, len(SERVED) - 1),
    kind=st.sampled_from(MUTATIONS),
)
def test_every_mutation_is_decided_by_the_frame_layer_without_raising(
    rng: random.Random, index: int, kind: str
) -> None:
    key, version = SERVED[index]
    fuzzer = KafkaPayloadFuzzer(rng)
    _, frame = fuzzer.request(key, version, 1)
    got, broken = fuzzer.mutated(frame, SUPPORTED_VERSIONS, 4096, kind)
    assert got.partition("+")[0] == kind
    conn = KafkaConnection(SUPPORTED_VERSIONS, max_request_bytes=4096)
    conn.receive_data(broken)
    events = [conn.next_event() for _ in range(3)]
    if kind in CLOSE_AT_ONCE:
        assert isinstance(events[0], Closed), events[0]
    conn.receive_data(b"")  # the client half-closes: every connection ends
    assert isinstance(conn.next_event(), Closed)


@pytest.mark.process
@pytest.mark.timeout(240)
def test_a_short_kafka_fuzz_leaves_every_broker_serving(cluster: LocalCluster) -> None:
    report = fuzz_kafka(cluster, calls_per_api=10, seed=4, max_connections=300, timeout_s=10)
    assert report.calls >= 2 * 10 * len(SUPPORTED_VERSIONS)
    assert not report.crashed, report.crash_suspects
    assert not any(report.serving_problems.values()), report.serving_problems
    assert report.abuse["connections"]["answered"] == report.abuse["connections"]["connections"]
    assert all(
        b["broker_stopped_reading"] for b in report.abuse["never_reads"]["per_broker"].values()
    )
    # One log line per connection closed for bad input, never a traceback.
    assert report.log_lines["tracebacks"] == 0, report.log_lines
    bad_connections = sum(o.calls for o in report.per_mutation.values())
    assert 0 < report.log_lines["connections_closed"] <= bad_connections, report.log_lines
    problems = {
        name: o.examples
        for name, o in {**report.per_api, **report.per_mutation}.items()
        if o.examples
    }
    assert report.valid, problems
