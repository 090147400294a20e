"""The Kafka listener of brokers on separate network hosts (issues 25 and 29): librdkafka, in
a client namespace of its own, produces through a plaintext netns cluster's Kafka listener and
reads every record back, and Metadata gives it the brokers' host addresses (the listener binds
``0.0.0.0``; ``advertised.listeners`` names the host). The broker's properties are
docs/operations.md's plaintext example. The SSL listener is tested on the TLS cluster of
test_netns_cluster.py.

Needs root (CI has it); where namespaces cannot be made it fails with one line, it does not
skip.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kraft.cluster.netns_cluster import NetnsCluster
from kraft.properties import load_properties
from tests.netns import require_namespaces
from tests.netns.kafka_roundtrip import run_on_host
from tests.netns.operations_doc import check_in_step

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def cluster() -> Iterator[NetnsCluster]:
    require_namespaces()
    with NetnsCluster(controllers=1, brokers=1) as c:
        c.wait_until_running(60)
        yield c


def test_librdkafka_on_a_client_host_produces_and_reads_back_through_the_kafka_listener(
    cluster: NetnsCluster,
) -> None:
    assert cluster.network is not None
    (broker,) = cluster.broker_ids
    check_in_step(load_properties(cluster.config_path(broker)), tls=False)
    client = cluster.network.add_host("kafka-client")
    cluster.create_topic("kafka-plain", 1, 1)
    result = run_on_host(client.exec_prefix(), cluster.kafka_bootstrap, "kafka-plain", 50, {})
    assert result["errors"] == []
    assert result["brokers"] == {str(broker): cluster.kafka_addresses[broker]}
    assert result["delivered"] == list(range(50))
    assert result["read"] == [f"v{i}" for i in range(50)]
