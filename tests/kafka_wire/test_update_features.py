"""UpdateFeatures (KIP-584, KIP-778) on the Kafka listener of the shared kraft 3+3 cluster: a
broker forwards it to the active controller, which refuses what Kafka's controller refuses
(INVALID_UPDATE_VERSION) and otherwise commits the level; every broker's ApiVersions
(DescribeFeatures) then shows it with a newer epoch. Kafka's own ``kafka-features.sh`` on the
same path: tests/kafka_java/test_features.py.

The shared cluster's other tests expect ``transaction.version`` 2: a test that changes it puts
it back before it ends.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kraft.cluster import LocalCluster
from storage.errors import ErrorCode
from tests.kafka_wire.wire import call

pytestmark = [pytest.mark.process, pytest.mark.timeout(120)]

TV = "transaction.version"
_CLIENT = {"client_software_name": "kraft-tests", "client_software_version": "1"}
SAFE_DOWNGRADE = 2


def finalized(address: str) -> tuple[int, dict[str, int]]:
    """One broker's ApiVersions: the finalized epoch and levels (what DescribeFeatures reads)."""
    answer = call(address, 18, 4, _CLIENT)
    levels = {f.name: int(f.max_version_level) for f in answer.finalized_features}
    return int(answer.finalized_features_epoch), levels


def await_level(cluster: LocalCluster, level: int, timeout_s: float = 30.0) -> int:
    """Until every broker advertises ``transaction.version`` at ``level`` (0: not finalized);
    the epoch they advertise."""
    deadline = time.monotonic() + timeout_s
    while True:
        seen = [finalized(a) for a in cluster.kafka_addresses.values()]
        if all(levels.get(TV, 0) == level for _, levels in seen):
            epochs = {epoch for epoch, _ in seen}
            if len(epochs) == 1:
                return epochs.pop()
        assert time.monotonic() < deadline, f"brokers advertise {seen}, not {TV}={level}"
        time.sleep(0.05)


def update(
    address: str, *updates: tuple[str, int, int], version: int = 2, validate_only: bool = False
) -> Any:
    """UpdateFeatures ``version`` with (feature, level, upgrade type) updates (v0: type 2 as
    ``allow_downgrade``)."""
    body: dict[str, Any] = {
        "feature_updates": [
            {
                "feature": name,
                "max_version_level": level,
                "upgrade_type": kind,
                "allow_downgrade": kind != 1,
            }
            for name, level, kind in updates
        ],
        "validate_only": validate_only,
    }
    return call(address, 57, version, body)


@pytest.fixture
def restored(cluster: LocalCluster) -> Iterator[str]:
    """A broker's Kafka address; ``transaction.version`` is 2 again after the test."""
    address = cluster.kafka_addresses[cluster.broker_ids[0]]
    try:
        yield address
    finally:
        assert int(update(address, (TV, 2, 1)).error_code) == ErrorCode.NONE
        await_level(cluster, 2)


def test_refused_updates_answer_invalid_update_version_and_change_nothing(
    cluster: LocalCluster, restored: str
) -> None:
    address = cluster.kafka_addresses[cluster.broker_ids[1]]  # not `restored`'s broker
    epoch = await_level(cluster, 2)
    refusals = {
        "unknown feature": ((("no.such.feature", 1, 1),), "does not support this feature"),
        "above the range": (((TV, 3, 1),), "only supports versions 0 to 2"),
        "down without the flag": (((TV, 1, 1),), "without setting the upgrade type"),
        "all or nothing": (((TV, 1, SAFE_DOWNGRADE), ("x", 1, 1)), "feature x"),
    }
    for case, (updates, reason) in refusals.items():
        answer = update(address, *updates)
        assert int(answer.error_code) == ErrorCode.INVALID_UPDATE_VERSION, case
        assert reason in answer.error_message, (case, answer.error_message)
    v1 = update(address, (TV, 1, 1), version=1)
    assert (int(v1.error_code), v1.results) == (ErrorCode.INVALID_UPDATE_VERSION, ())
    dry_run = update(address, (TV, 1, SAFE_DOWNGRADE), validate_only=True)
    assert int(dry_run.error_code) == ErrorCode.NONE
    assert await_level(cluster, 2) == epoch


def test_a_downgrade_and_an_upgrade_show_in_every_brokers_finalized_features(
    cluster: LocalCluster, restored: str
) -> None:
    epoch = await_level(cluster, 2)
    down = update(restored, (TV, 1, SAFE_DOWNGRADE), version=1)
    assert int(down.error_code) == ErrorCode.NONE
    assert [(r.feature, int(r.error_code)) for r in down.results] == [(TV, ErrorCode.NONE)]
    lowered = await_level(cluster, 1)
    assert lowered > epoch
    up = update(restored, (TV, 2, 1), version=0)  # v0: no allow_downgrade is an upgrade
    assert int(up.error_code) == ErrorCode.NONE
    assert await_level(cluster, 2) > lowered


def test_kraft_features_describes_and_changes_the_level_over_grpc(
    cluster: LocalCluster, restored: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """kraft's own admin (gRPC, the broker forwarding the same controller RPC): ``kraft
    features``, like ``kafka-features.sh``."""
    from kraft.cli import main

    where = ("--bootstrap", cluster.bootstrap)
    epoch = await_level(cluster, 2)
    assert main(["features", "describe", "--json", *where]) == 0
    described = json.loads(capsys.readouterr().out)
    assert described == {"epoch": epoch, "features": {TV: {"supported": [0, 2], "finalized": 2}}}

    assert main(["features", "upgrade", "--feature", f"{TV}=1", *where]) == 1
    assert "without setting the upgrade type" in capsys.readouterr().err
    assert main(["features", "downgrade", "--feature", f"{TV}=1", "--dry-run", *where]) == 0
    assert capsys.readouterr().out == f"{TV} can be downgraded to 1.\n"
    assert main(["features", "downgrade", "--feature", f"{TV}=1", *where]) == 0
    assert capsys.readouterr().out == f"{TV} was downgraded to 1.\n"
    lowered = await_level(cluster, 1)
    assert lowered > epoch
    assert main(["features", "describe", *where]) == 0
    assert capsys.readouterr().out == (
        f"Feature: {TV}\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\t"
        f"FinalizedVersionLevel: 1\tEpoch: {lowered}\n"
    )
    assert main(["features", "upgrade", "--feature", f"{TV}=2", *where]) == 0
    assert await_level(cluster, 2) > lowered
