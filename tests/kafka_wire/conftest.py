"""The one kraft cluster (3 controllers, 3 brokers) the process tests of this package share
(the suite's time is tight): started by the first test that asks for it, stopped after the
session. Each test uses its own topics and groups."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kraft.cluster import LocalCluster


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(controllers=3, brokers=3) as c:  # a real 3+3, as issue 25 asks
        c.wait_until_healthy(timeout=60)
        yield c
