"""Fixtures shared by the whole suite (plugins, so that each exists once per run).

`make test` runs the suite on two pytest-xdist workers (``-n 2 --dist loadgroup``). A session
fixture exists once per worker, so every test that uses one of the shared clusters (the Apache
Kafka peer, six JVMs; the shared kraft 3+3) is sent to one worker: each cluster then starts
once per run, as it does without xdist.
"""

from __future__ import annotations

import pytest

pytest_plugins = ["tests.kafka_peer", "tests.kraft_cluster"]

SHARED_CLUSTERS = frozenset({"kafka_peer", "kraft_cluster"})
"""Session fixtures whose users run on one xdist worker (the group below)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SHARED_CLUSTERS.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.xdist_group("shared-clusters"))
