"""The one kraft cluster the process tests of the Kafka listener share (starting one takes
seconds of the suite's tight time): 1 controller, 3 brokers, Kafka listeners on."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kraft.cluster import LocalCluster


@pytest.fixture(scope="package")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(controllers=1, brokers=3) as c:
        c.wait_until_healthy(timeout=60)
        yield c
