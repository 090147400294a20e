"""The suite's one shared kraft cluster (3 controllers, 3 brokers): a session-scoped pytest
fixture, ``kraft_cluster``.

Registered for the whole suite by ``tests/conftest.py``, so that the Kafka-protocol tests
(``tests/kafka_wire``, ``tests/kafka_java``) and any other test that needs no special settings
share one: the first test that asks for it starts it, and it stops at the end of the run (or of
the pytest-xdist worker that ran it). Each test uses its own topics and groups, and kills or
pauses nothing in it; a test that does needs a cluster of its own.

Its brokers sit in three racks with Kafka's rack-aware replica selector (KIP-392), which
changes nothing for a consumer that sends no ``client.rack``; they serve Prometheus metrics
(``tests/kafka_wire/test_fetch_from_follower.py`` reads which broker served a consumer there).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import pytest

from kraft.cluster import LocalCluster
from replication.core.replica_selector import RACK_AWARE_SELECTOR

RACKS: Final = ("rack-a", "rack-b", "rack-c")
"""``broker.rack`` of the brokers, in id order."""


@pytest.fixture(scope="session")
def kraft_cluster() -> Iterator[LocalCluster]:
    with LocalCluster(  # a real 3+3, as issue 25 asks
        controllers=3,
        brokers=3,
        broker_racks=RACKS,
        broker_config={"replica.selector.class": RACK_AWARE_SELECTOR},
        metrics=True,
    ) as c:
        c.wait_until_healthy(timeout=60)
        yield c
