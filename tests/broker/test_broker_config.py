"""`BrokerNodeConfig`: Kafka keys in, snake_case out, and back."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraft.cli import build_parser
from kraft.cli.broker import properties_from_args
from kraft.raft import RaftConfig
from replication.broker import BrokerNodeConfig
from storage.errors import InvalidConfigError

PROPS = {
    "node.id": "101",
    "controller.quorum.voters": "1@127.0.0.1:9091,2@127.0.0.1:9092",
    "listeners": "PLAINTEXT://127.0.0.1:9192",
    "log.dirs": "/tmp/b101,/tmp/other",
    "broker.rack": "rack-a",
    "broker.heartbeat.interval.ms": "250",
    "replica.lag.time.max.ms": "5000",
}


def test_broker_config_reads_kafka_keys() -> None:
    config = BrokerNodeConfig.from_properties(PROPS)
    assert config.node_id == 101
    assert dict(config.voters) == {1: "127.0.0.1:9091", 2: "127.0.0.1:9092"}
    assert config.listen == "127.0.0.1:9192"
    assert config.data_dir == Path("/tmp/b101")
    assert config.rack == "rack-a"
    assert config.heartbeat_interval_ms == 250
    assert config.replication.replica_lag_time_ms_max == 5000


def test_broker_config_round_trips_through_properties() -> None:
    config = BrokerNodeConfig.from_properties(PROPS)
    assert BrokerNodeConfig.from_properties(config.to_properties()) == config


def test_broker_id_must_not_be_a_controller_id() -> None:
    with pytest.raises(InvalidConfigError, match="controller id"):
        BrokerNodeConfig.from_properties({**PROPS, "node.id": "2"})


def test_broker_config_names_missing_keys() -> None:
    with pytest.raises(InvalidConfigError, match="listeners"):
        BrokerNodeConfig.from_properties({k: v for k, v in PROPS.items() if k != "listeners"})


def test_cli_flags_override_the_properties_file(tmp_path: Path) -> None:
    path = tmp_path / "b.properties"
    path.write_text("\n".join(f"{k}={v}" for k, v in PROPS.items()) + "\n")
    args = build_parser().parse_args(
        [
            "broker",
            "--config",
            str(path),
            "--node-id",
            "102",
            "--rack",
            "rack-b",
            "--override",
            "replica.fetch.wait.max.ms=100",
        ]
    )
    config = BrokerNodeConfig.from_properties(properties_from_args(args))
    assert (config.node_id, config.rack, config.replica_fetch_wait_max_ms) == (102, "rack-b", 100)


def test_replica_fetch_settings_default_to_kafkas() -> None:
    config = BrokerNodeConfig.from_properties(PROPS)
    assert config.replica_fetch_min_bytes == 1
    assert config.replica_fetch_wait_max_ms == 500
    assert config.replica_fetch_max_bytes == 1 << 20
    assert config.replica_fetch_response_max_bytes == 10 << 20
    tuned = BrokerNodeConfig.from_properties(
        PROPS | {"replica.fetch.min.bytes": "4096", "replica.fetch.response.max.bytes": "999"}
    )
    assert (tuned.replica_fetch_min_bytes, tuned.replica_fetch_response_max_bytes) == (4096, 999)


def test_quorum_partition_raft_timeouts_are_broker_keys() -> None:
    default = BrokerNodeConfig.from_properties(PROPS).partition_raft_config()
    assert (default.election_timeout_ms, default.fetch_timeout_ms) == (500, 1000)
    assert default.request_timeout_ms == 500
    config = BrokerNodeConfig.from_properties(
        {
            **PROPS,
            "quorum.partition.election.timeout.ms": "200",
            "quorum.partition.fetch.timeout.ms": "400",
            "quorum.partition.request.timeout.ms": "300",
        }
    )
    raft = config.partition_raft_config()
    assert (raft.election_timeout_ms, raft.fetch_timeout_ms, raft.request_timeout_ms) == (
        200,
        400,
        300,
    )
    assert config.raft.election_timeout_ms == RaftConfig().election_timeout_ms  # observer: apart
    assert BrokerNodeConfig.from_properties(config.to_properties()) == config


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("quorum.partition.election.timeout.ms", "0", "quorum.partition.election.timeout.ms"),
        ("quorum.partition.fetch.timeout.ms", "x", "not an integer"),
        ("quorum.partition.request.timeout.ms", "50", "must exceed the Raft long poll"),
    ],
)
def test_bad_quorum_partition_timeouts_are_refused(key: str, value: str, match: str) -> None:
    with pytest.raises(InvalidConfigError, match=match):
        BrokerNodeConfig.from_properties({**PROPS, key: value})
