"""The suite's one Apache Kafka cluster: a session-scoped pytest fixture, ``kafka_peer``.

Registered for the whole suite by ``tests/conftest.py`` (``pytest_plugins``), so any test
module may ask for it; the first one to do so starts it, and it stops at the end of the run.
A 3-controller, 3-broker `KafkaCluster` took 18-23 s to start (formatting included) on the
2-core development machine under load from other work, so the suite starts one and every
test uses its own topics. Mark such tests ``@pytest.mark.kafka`` (``pytest -m kafka``).

The jars are fetched on first use if they are missing (at the versions of
``kraft/peer/pom.xml``; ``kraft peer kafka fetch`` does it ahead). Without Java, Maven or the
registry, the tests are skipped with that reason.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from kraft.peer import KafkaCluster
from kraft.peer.jars import PeerToolError, fetch, find_java, kafka_jars

KAFKA_PEER_CONTROLLERS = 3
KAFKA_PEER_BROKERS = 3
KAFKA_PEER_START_TIMEOUT_S = 240.0
"""Generous: six JVMs start on two cores that other tests may be using."""


def kafka_peer_unavailable() -> str | None:
    """Why the Kafka peer cannot run here (None: it can), fetching its jars if needed."""
    try:
        find_java()
        if not kafka_jars().complete:
            if shutil.which("mvn") is None:
                return "Kafka's jars are not fetched and mvn is missing (kraft peer kafka fetch)"
            fetch(kafka_jars())
    except PeerToolError as e:
        return str(e)
    return None


@pytest.fixture(scope="session")
def kafka_peer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    reason = kafka_peer_unavailable()
    if reason is not None:
        pytest.skip(f"no Apache Kafka peer: {reason}")
    cluster = KafkaCluster(
        controllers=KAFKA_PEER_CONTROLLERS,
        brokers=KAFKA_PEER_BROKERS,
        data_dir=tmp_path_factory.mktemp("kafka-peer"),
    )
    try:
        cluster.start(timeout=KAFKA_PEER_START_TIMEOUT_S)
        yield cluster
    finally:
        cluster.close()
