"""Config definitions: Kafka's keys, defaults and validation."""

from __future__ import annotations

import pytest

from kraft.metadata import TOPIC_CONFIGS, ConfigResourceType, validate_config


def test_topic_defaults_are_kafkas() -> None:
    defaults = {name: d.default for name, d in TOPIC_CONFIGS.items()}
    assert defaults["min.insync.replicas"] == "1"
    assert defaults["unclean.leader.election.enable"] == "false"
    assert defaults["retention.ms"] == "604800000"
    assert defaults["segment.bytes"] == "1073741824"
    assert defaults["replication.mode"] == "isr"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("min.insync.replicas", "2"),
        ("unclean.leader.election.enable", "TRUE"),
        ("retention.ms", "-1"),
        ("cleanup.policy", "compact,delete"),
        ("replication.mode", "quorum"),
        ("compression.type", "zstd"),
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
