"""`python -m kraft.bench.kafka_listener`: a real listener on loopback answers every pipelined
Produce (and Fetch), in order (its client raises otherwise), and the bench reports the loop's
CPU."""

from __future__ import annotations

import pytest

from kraft.bench.kafka_listener import run


@pytest.mark.parametrize("version", [3, 10])
def test_the_listener_bench_answers_every_request_in_order(version: int) -> None:
    assert run(requests=200, version=version, partitions=2, batch_bytes=1024, in_flight=5) > 0


def test_the_listener_bench_answers_fetch_requests_of_large_records_in_order() -> None:
    cpu = run(requests=50, version=10, partitions=3, batch_bytes=200_000, in_flight=5, fetch=True)
    assert cpu > 0
