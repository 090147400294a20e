"""Fixtures shared by the whole suite (plugins, so that each exists once per run).

`make test` runs the suite on two pytest-xdist workers (``-n 2 --dist loadgroup``). A fixture
wider than a test exists once per worker that runs one of its users, so its users are grouped
onto one worker (`pytest_collection_modifyitems`):

- every test that uses one of the shared clusters (the Apache Kafka peer, six JVMs; the shared
  kraft 3+3) goes to one worker, so each cluster starts once per run, as without xdist;
- the tests of a package with a package fixture (Spark's one SparkSession and cluster) go to
  one worker, and so do the tests of a module with a module fixture (a module's cluster):
  split across both workers, each worker started its own.

A module that names its own group (``pytestmark = xdist_group(...)``) keeps it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
import structlog

pytest_plugins = ["tests.kafka_peer", "tests.kraft_cluster"]

SHARED_CLUSTERS = frozenset({"kafka_peer", "kraft_cluster"})
"""Session fixtures whose users run on one xdist worker (the group below)."""


def _widest_fixture_group(item: pytest.Item) -> str | None:
    """``package:<dir>`` or ``module:<file>`` if ``item`` uses a fixture of that scope."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    scopes = {defs[-1].scope for defs in info.name2fixturedefs.values() if defs}
    if "package" in scopes:
        return f"package:{item.path.parent}"
    if "module" in scopes:
        return f"module:{item.path}"
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # NB: tryfirst: xdist's worker reads the marks in its own hook of this name (it appends
    # ``@group`` to each node id); run after it, these marks grouped nothing, and every
    # shared cluster and the SparkSession started once per worker.
    for item in items:
        if SHARED_CLUSTERS.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.xdist_group("shared-clusters"))
        elif item.get_closest_marker("xdist_group") is None:
            group = _widest_fixture_group(item)
            if group is not None:
                item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(autouse=True)
def _structlog_as_it_was() -> Iterator[None]:
    """Each test leaves structlog's configuration as it found it. A command run in-process
    (``kraft.cli.main``, a client in the library's mode) configures structlog for the process:
    ``kraft compare`` sets the level to ``error``, which would filter the warnings later tests
    on the same worker capture with ``capture_logs``, and ``main`` writes to the stderr of the
    moment, a stream pytest closes after the test (a producer's sender thread then died
    logging, and its record's future never resolved)."""
    configured, saved = structlog.is_configured(), structlog.get_config()
    yield
    if configured:
        structlog.configure(**saved)
    else:
        structlog.reset_defaults()


@pytest.fixture(autouse=True)
def _gc_as_it_was() -> Iterator[None]:
    """Each test leaves the garbage collector as it found it: a command run in-process sets
    kraft's thresholds (`kraft.gc_tuning`), and a server started in-process freezes what it
    holds, which a later test's ``gc.collect()`` would then never free."""
    thresholds = gc.get_threshold()
    yield
    gc.set_threshold(*thresholds)
    gc.unfreeze()
