"""The suite's one shared kraft cluster (3 controllers, 3 brokers): a session-scoped pytest
fixture, ``kraft_cluster``.

Registered for the whole suite by ``tests/conftest.py``, so that the Kafka-protocol tests
(``tests/kafka_wire``, ``tests/kafka_java``) and any other test that needs no special settings
share one: the first test that asks for it starts it, and it stops at the end of the run (or of
the pytest-xdist worker that ran it). Each test uses its own topics and groups, and kills or
pauses nothing in it; a test that does needs a cluster of its own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kraft.cluster import LocalCluster


@pytest.fixture(scope="session")
def kraft_cluster() -> Iterator[LocalCluster]:
    with LocalCluster(controllers=3, brokers=3) as c:  # a real 3+3, as issue 25 asks
        c.wait_until_healthy(timeout=60)
        yield c
