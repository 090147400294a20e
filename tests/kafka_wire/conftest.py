"""One real cluster (1 controller, 3 brokers, Kafka listeners on) for every process test of
this package: the real-client tests (`test_clients_cluster`) and the short Kafka fuzz
(`test_kafka_fuzz`). Starting one costs seconds of the suite's tight time; each test makes its
own topics."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kraft.cluster import LocalCluster


@pytest.fixture(scope="package")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(controllers=1, brokers=3) as c:
        c.wait_until_healthy(timeout=60)
        yield c
