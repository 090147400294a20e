"""The one kraft cluster (3 controllers, 3 brokers) the process tests of this package share
(the suite's time is tight): started by the first test that asks for it, stopped after the
session. Each test uses its own topics and groups.

Its brokers sit in three racks with Kafka's rack-aware replica selector (KIP-392), which
changes nothing for a consumer that sends no ``client.rack``; they serve Prometheus metrics
(``test_fetch_from_follower`` reads which broker served a consumer there)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import pytest

from kraft.cluster import LocalCluster
from replication.core.replica_selector import RACK_AWARE_SELECTOR

RACKS: Final = ("rack-a", "rack-b", "rack-c")
"""``broker.rack`` of the brokers, in id order."""


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(  # a real 3+3, as issue 25 asks
        controllers=3,
        brokers=3,
        broker_racks=RACKS,
        broker_config={"replica.selector.class": RACK_AWARE_SELECTOR},
        metrics=True,
    ) as c:
        c.wait_until_healthy(timeout=60)
        yield c
