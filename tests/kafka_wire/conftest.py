"""The process tests of this package share the suite's kraft cluster (``kraft_cluster``,
tests/kraft_cluster.py) under the name ``cluster``. Each test uses its own topics and groups."""

from __future__ import annotations

import pytest

from kraft.cluster import LocalCluster


@pytest.fixture(scope="session")
def cluster(kraft_cluster: LocalCluster) -> LocalCluster:
    return kraft_cluster
