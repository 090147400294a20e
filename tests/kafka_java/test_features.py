"""Kafka's ``kafka-features.sh`` (Kafka 4.x's FeatureCommand) against kraft, as a user types it
(``kraft peer kafka tool kafka-features ...``): ``downgrade`` and ``upgrade`` change the level
every broker advertises, with a newer epoch, and describe shows ``transaction.version`` with
its supported range, the new finalized level and that epoch. Three JVMs, the fewest that show
each. The refusals (an ``upgrade`` to a lower level among them) are checked on the wire, in
tests/kafka_wire/test_update_features.py.

The shared cluster's other tests expect ``transaction.version`` 2: the test puts it back.
"""

from __future__ import annotations

import re

import pytest

from kraft.cluster import LocalCluster
from storage.errors import ErrorCode
from tests.kafka_java.conftest import run_kraft_tool, run_tool
from tests.kafka_wire.test_update_features import TV, await_level, update

pytestmark = [pytest.mark.java, pytest.mark.process, pytest.mark.timeout(300)]

_DESCRIBED = re.compile(
    r"Feature: transaction\.version\s+SupportedMinVersion: 0\s+SupportedMaxVersion: 2\s+"
    r"FinalizedVersionLevel: (\d+)\s+Epoch: (\d+)"
)


def described(cluster: LocalCluster) -> tuple[int, int]:
    """``kafka-features.sh describe``: the finalized level and epoch of transaction.version."""
    done = run_kraft_tool(
        "kafka-features", "--bootstrap-server", cluster.kafka_bootstrap, "describe"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = _DESCRIBED.search(done.stdout)
    assert found is not None, done.stdout
    return int(found[1]), int(found[2])


def test_kafka_features_describes_downgrades_and_upgrades_transaction_version(
    cluster: LocalCluster,
) -> None:
    first = cluster.kafka_addresses[cluster.broker_ids[0]]
    bootstrap = ("--bootstrap-server", cluster.kafka_bootstrap)
    try:
        epoch = await_level(cluster, 2)

        out = run_tool("kafka-features", *bootstrap, "downgrade", "--feature", f"{TV}=1")
        assert f"{TV} was downgraded to 1." in out
        lowered = await_level(cluster, 1)
        assert lowered > epoch
        assert described(cluster) == (1, lowered)

        out = run_tool("kafka-features", *bootstrap, "upgrade", "--feature", f"{TV}=2")
        assert f"{TV} was upgraded to 2." in out
        assert await_level(cluster, 2) > lowered
    finally:
        assert int(update(first, (TV, 2, 1)).error_code) == ErrorCode.NONE
        await_level(cluster, 2)
