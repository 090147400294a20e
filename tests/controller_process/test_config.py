"""`kraft.controller.node_config` and `kraft.properties`: Kafka-style properties and flags ->
`ControllerNodeConfig`."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraft.cli import build_parser
from kraft.cli.controller import properties_from_args
from kraft.controller.node_config import DEFAULT_SNAPSHOT_INTERVAL_BYTES, ControllerNodeConfig
from kraft.properties import load_properties, parse_voters, write_properties
from storage.errors import InvalidConfigError

VOTERS = "1@127.0.0.1:9091,2@127.0.0.1:9092,3@127.0.0.1:9093"


def test_properties_file_with_comments_colons_and_continuations(tmp_path: Path) -> None:
    path = tmp_path / "c.properties"
    path.write_text(
        "# a comment\n! another\nnode.id = 2\nlisteners: CONTROLLER://0.0.0.0:9999\n"
        "controller.quorum.voters=1@h:1,\\\n  2@h:2\n\n"
    )
    assert load_properties(path) == {
        "node.id": "2",
        "listeners": "CONTROLLER://0.0.0.0:9999",
        "controller.quorum.voters": "1@h:1,2@h:2",
    }


def test_config_reads_kafka_keys() -> None:
    config = ControllerNodeConfig.from_properties(
        {
            "node.id": "2",
            "controller.quorum.voters": VOTERS,
            "log.dirs": "/data/a,/data/b",
            "broker.session.timeout.ms": "9000",
            "metadata.log.max.record.bytes.between.snapshots": "4096",
            "controller.quorum.election.timeout.ms": "300",
        }
    )
    assert config.node_id == 2
    assert config.voters == {1: "127.0.0.1:9091", 2: "127.0.0.1:9092", 3: "127.0.0.1:9093"}
    assert config.listen == "127.0.0.1:9092"  # no listeners: our voter address
    assert config.data_dir == Path("/data/a")
    assert config.controller.broker_session_timeout_ms == 9000
    assert config.snapshot_interval_bytes == 4096
    assert config.raft.election_timeout_ms == 300


def test_config_round_trips_through_properties() -> None:
    config = ControllerNodeConfig.from_properties(
        {"node.id": "1", "controller.quorum.voters": VOTERS, "log.dirs": "/d"}
    )
    assert config.snapshot_interval_bytes == DEFAULT_SNAPSHOT_INTERVAL_BYTES
    assert ControllerNodeConfig.from_properties(config.to_properties()) == config


@pytest.mark.parametrize(
    "props",
    [
        {"controller.quorum.voters": VOTERS, "log.dirs": "/d"},
        {"node.id": "1", "log.dirs": "/d"},
        {"node.id": "1", "controller.quorum.voters": VOTERS},
        {"node.id": "x", "controller.quorum.voters": VOTERS, "log.dirs": "/d"},
        {"node.id": "9", "controller.quorum.voters": VOTERS, "log.dirs": "/d"},
    ],
)
def test_bad_config_is_an_invalid_config_error(props: dict[str, str]) -> None:
    with pytest.raises(InvalidConfigError):
        ControllerNodeConfig.from_properties(props)


@pytest.mark.parametrize("spec", ["", "1@h", "x@h:1", "1@h:1,1@h:2", "h:1"])
def test_malformed_voters_are_rejected(spec: str) -> None:
    with pytest.raises(InvalidConfigError):
        parse_voters(spec)


def test_flags_override_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.properties"
    write_properties(path, {"node.id": "1", "controller.quorum.voters": VOTERS, "log.dirs": "/d"})
    args = build_parser().parse_args(
        [
            "controller",
            "--config",
            str(path),
            "--node-id",
            "3",
            "--data-dir",
            "/e",
            "--override",
            "broker.session.timeout.ms=7000",
        ]
    )
    config = ControllerNodeConfig.from_properties(properties_from_args(args))
    assert (config.node_id, config.data_dir, config.listen) == (3, Path("/e"), "127.0.0.1:9093")
    assert config.controller.broker_session_timeout_ms == 7000


def test_bootstrap_servers_make_the_voter_set_dynamic_and_round_trip() -> None:
    props = {
        "node.id": "4",
        "controller.quorum.bootstrap.servers": "1@127.0.0.1:9091",
        "listeners": "CONTROLLER://127.0.0.1:9094",
        "log.dirs": "/tmp/c4",
    }
    config = ControllerNodeConfig.from_properties(props)
    assert config.dynamic_voters and dict(config.voters) == {1: "127.0.0.1:9091"}
    again = ControllerNodeConfig.from_properties(config.to_properties())
    assert again.dynamic_voters and again.voters == config.voters
    static = ControllerNodeConfig.from_properties(
        {**props, "node.id": "1", "listeners": ""}
        | {"controller.quorum.voters": VOTERS, "controller.quorum.bootstrap.servers": ""}
    )
    assert not static.dynamic_voters


def test_static_voters_and_bootstrap_servers_together_are_refused() -> None:
    with pytest.raises(InvalidConfigError, match="not both"):
        ControllerNodeConfig.from_properties(
            {
                "node.id": "1",
                "controller.quorum.voters": VOTERS,
                "controller.quorum.bootstrap.servers": VOTERS,
                "log.dirs": "/tmp/c1",
            }
        )
