"""Real broker processes: a topic's ``min.insync.replicas`` changed with IncrementalAlterConfigs
takes effect on the running leader at once (Kafka applies dynamic topic configs live), with no
leader change and no restart."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from kraft.cluster import LocalCluster
from replication.clients import AdminClient, Producer
from storage.errors import NotEnoughReplicasError
from tests.broker.clusters import running_cluster

pytestmark = [pytest.mark.process, pytest.mark.timeout(240)]

TOPIC = "live-config"


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    with running_cluster() as c:
        yield c


def _produce(bootstrap: str, value: bytes) -> Exception | None:
    """One acks=all record with a short delivery timeout; the error it failed with, if any."""
    with Producer(
        bootstrap, acks="all", linger_ms=0, request_timeout_ms=1000, delivery_timeout_ms=2000
    ) as producer:
        try:
            producer.send(TOPIC, value=value, partition=0).result(timeout=30)
        except Exception as e:  # the test inspects it
            return e
    return None


def test_raising_min_insync_replicas_above_the_live_isr_refuses_acks_all_at_once(
    cluster: LocalCluster,
) -> None:
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topic(
            TOPIC, partitions=1, replication_factor=3, config={"min.insync.replicas": "2"}
        )
        admin.wait_for_leaders(TOPIC, timeout=30)
        partition = admin.describe_topic(TOPIC).partitions[0]
        follower = next(b for b in partition.replicas if b != partition.leader)
        cluster.kill_broker(follower)
        deadline = time.monotonic() + 30
        while len(admin.describe_topic(TOPIC).partitions[0].isr) != 2:
            assert time.monotonic() < deadline, "the dead follower was never shrunk out"
            time.sleep(0.1)
        assert _produce(cluster.bootstrap, b"isr of 2, min 2") is None

        admin.alter_topic_config(TOPIC, {"min.insync.replicas": "3"})
        deadline = time.monotonic() + 30
        while (error := _produce(cluster.bootstrap, b"isr of 2, min 3")) is None:
            assert time.monotonic() < deadline, "the leader never took min.insync.replicas=3"
        assert isinstance(error, NotEnoughReplicasError), repr(error)

        admin.alter_topic_config(TOPIC, delete_configs=["min.insync.replicas"])  # back to 1
        deadline = time.monotonic() + 30
        while _produce(cluster.bootstrap, b"isr of 2, min 1") is not None:
            assert time.monotonic() < deadline, "the leader never took the default back"
        after = admin.describe_topic(TOPIC).partitions[0]
        assert (after.leader, after.leader_epoch) == (partition.leader, partition.leader_epoch)
