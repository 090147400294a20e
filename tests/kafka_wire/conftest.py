"""The process tests of this package use the suite's shared kraft 3+3 (``tests/kraft_cluster.py``;
the suite's time is tight). Each test uses its own topics and groups."""

from __future__ import annotations

import pytest

from kraft.cluster import LocalCluster


@pytest.fixture(scope="session")
def cluster(kraft_cluster: LocalCluster) -> LocalCluster:
    return kraft_cluster
