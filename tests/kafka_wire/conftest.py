"""The plaintext cluster the Kafka-client tests of this package share (1 controller, 3
brokers, a Kafka listener on each): started once, by the first test that asks for it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kraft.cluster import LocalCluster


@pytest.fixture(scope="package")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(controllers=1, brokers=3) as c:
        c.wait_until_healthy(timeout=60)
        yield c
