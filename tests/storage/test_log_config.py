"""`LogConfig`: Kafka's dotted keys, defaults and validation."""

from __future__ import annotations

import pytest

from storage.config import LONG_MAX, LogConfig
from storage.errors import InvalidConfigError


def test_defaults_follow_kafka_except_segment_bytes() -> None:
    config = LogConfig()
    assert config.segment_bytes == 64 * 1024 * 1024
    assert config.segment_ms == config.retention_ms == 7 * 24 * 3600 * 1000
    assert config.retention_bytes == -1
    assert config.index_interval_bytes == 4096
    assert config.flush_messages == config.flush_ms == LONG_MAX
    assert config.max_message_bytes == 1048588
    assert config.sync_every_append is False


def test_from_properties_reads_kafka_keys() -> None:
    config = LogConfig.from_properties({"segment.bytes": "1048576", "retention.ms": "-1"})
    assert config.segment_bytes == 1048576
    assert config.retention_ms == -1
    assert LogConfig.from_properties(config.to_properties()) == config


def test_sync_every_append_is_set_in_code_not_by_a_config_key() -> None:
    """Only the Raft store syncs every append; no topic or broker key may turn it on."""
    assert LogConfig(sync_every_append=True).sync_every_append is True
    with pytest.raises(InvalidConfigError):
        LogConfig.from_properties({"sync.every.append": "true"})


@pytest.mark.parametrize(
    "props",
    [
        {"segment.bytes": "ten"},
        {"segment.bytes": "10"},
        {"retention.ms": "-2"},
        {"flush.messages": "0"},
        {"no.such.key": "1"},
        {"segment.bytes": str(2**31)},
    ],
)
def test_invalid_values_raise_invalid_config(props: dict[str, str]) -> None:
    with pytest.raises(InvalidConfigError):
        LogConfig.from_properties(props)
