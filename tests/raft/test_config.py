"""`RaftConfig`: Kafka's keys, loopback defaults, validation."""

from __future__ import annotations

import pytest

from kraft.raft import RaftConfig
from storage.errors import InvalidConfigError


def test_defaults_outlast_three_retransmissions_and_crashes_do_not_wait_for_them() -> None:
    """Issue 29: the fetch timeout must outlast a packet lost three times (TCP's 200 ms
    minimum retransmission timeout, then 400 and 800 ms), or loss elects leaders all the time;
    a crashed leader is found from its closed connection instead, and its followers take
    turns one ``election_backoff_max_ms`` apart (well under a second for three voters)."""
    c = RaftConfig()
    assert c.fetch_timeout_ms >= 200 + 400 + 800
    assert 2 * c.election_backoff_max_ms + c.election_timeout_ms < 1000
    assert c.election_timeout_ms <= c.fetch_timeout_ms // 2
    assert c.fetch_max_wait_ms < c.request_timeout_ms


def test_from_properties_reads_kafka_keys_and_ignores_others() -> None:
    c = RaftConfig.from_properties(
        {
            "controller.quorum.election.timeout.ms": "500",
            "controller.quorum.fetch.timeout.ms": "900",
            "controller.quorum.append.linger.ms": "0",
            "controller.quorum.voters": "1@localhost:9093",
            "log.dirs": "/tmp",
        }
    )
    assert (c.election_timeout_ms, c.fetch_timeout_ms, c.append_linger_ms) == (500, 900, 0)
    assert RaftConfig.from_properties(c.to_properties()) == c


@pytest.mark.parametrize(
    "props",
    [
        {"controller.quorum.election.timeout.ms": "abc"},
        {"controller.quorum.election.timeout.ms": "0"},
        {"controller.quorum.fetch.timeout.ms": "-5"},
        {"controller.quorum.fetch.max.wait.ms": "5000"},
    ],
)
def test_bad_values_raise_invalid_config(props: dict[str, str]) -> None:
    with pytest.raises(InvalidConfigError):
        RaftConfig.from_properties(props)
