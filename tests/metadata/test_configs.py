"""Config definitions: Kafka's keys, defaults and validation."""

from __future__ import annotations

import pytest

from kraft.metadata import TOPIC_CONFIGS, ConfigResourceType, validate_config
from storage.config import LogConfig


def test_topic_defaults_are_kafkas() -> None:
    defaults = {name: d.default for name, d in TOPIC_CONFIGS.items()}
    assert defaults["min.insync.replicas"] == "1"
    assert defaults["unclean.leader.election.enable"] == "false"
    assert defaults["retention.ms"] == "604800000"
    assert defaults["replication.mode"] == "isr"


def test_log_setting_defaults_are_the_logs_own() -> None:
    """One source of truth: the controller's table takes the log settings' defaults from
    `LogConfig` (kraft's 64 MiB segments, not Kafka's 1 GiB: storage/config.py says why)."""
    log_defaults = LogConfig().to_properties()
    for name, definition in TOPIC_CONFIGS.items():
        if name in log_defaults:
            assert definition.default == log_defaults[name], name
    assert TOPIC_CONFIGS["segment.bytes"].default == str(64 * 1024 * 1024)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("min.insync.replicas", "2"),
        ("unclean.leader.election.enable", "TRUE"),
        ("retention.ms", "-1"),
        ("cleanup.policy", "delete"),
        ("replication.mode", "isr"),
        ("compression.type", "producer"),
        ("message.timestamp.type", "CreateTime"),
        ("segment.index.bytes", "1048576"),
        ("index.interval.bytes", "8192"),
    ],
)
def test_valid_topic_configs_pass(key: str, value: str) -> None:
    assert validate_config(ConfigResourceType.TOPIC, key, value) is None


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("min.insync.replicas", "0"),
        ("min.insync.replicas", "two"),
        ("unclean.leader.election.enable", "yes"),
        ("retention.ms", "-2"),
        ("segment.bytes", str(2**31)),
        ("cleanup.policy", "shred"),
        ("replication.mode", "raft"),
        ("no.such.key", "1"),
    ],
)
def test_invalid_topic_configs_are_explained(key: str, value: str) -> None:
    assert validate_config(ConfigResourceType.TOPIC, key, value)


def test_broker_configs_use_the_broker_synonyms() -> None:
    assert validate_config(ConfigResourceType.BROKER, "log.retention.ms", "1000") is None
    assert validate_config(ConfigResourceType.BROKER, "retention.ms", "1000") is not None


@pytest.mark.parametrize(
    ("key", "value", "accepted"),
    [
        ("message.timestamp.type", "LogAppendTime", "CreateTime"),
    ],
)
def test_a_value_kraft_does_not_implement_yet_is_refused_naming_the_key(
    key: str, value: str, accepted: str
) -> None:
    """Accepted-and-ignored is worse than refused: the user would believe the topic compacts,
    stamps append times, recompresses or replicates by quorum."""
    problem = validate_config(ConfigResourceType.TOPIC, key, value)
    assert problem is not None
    assert key in problem and "not supported yet" in problem
    assert f"accepted: {accepted}" in problem


def test_replication_mode_quorum_is_a_valid_topic_config() -> None:
    assert validate_config(ConfigResourceType.TOPIC, "replication.mode", "quorum") is None


def test_the_broker_synonym_of_an_unsupported_value_is_refused_too() -> None:
    problem = validate_config(
        ConfigResourceType.BROKER, "log.message.timestamp.type", "LogAppendTime"
    )
    assert problem is not None and "not supported yet" in problem
    assert (
        validate_config(ConfigResourceType.BROKER, "log.message.timestamp.type", "CreateTime")
        is None
    )
