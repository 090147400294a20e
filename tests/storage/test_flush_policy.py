"""`storage.flush_policy.FlushPolicy`: Kafka's ``flush.messages`` / ``flush.ms`` counters."""

from __future__ import annotations

from storage.config import LogConfig
from storage.flush_policy import FlushPolicy


def test_flush_is_due_once_flush_messages_records_are_unflushed() -> None:
    policy = FlushPolicy(LogConfig(flush_messages=5), now_ms=0)
    assert not policy.on_appended(3, now_ms=1)
    assert policy.on_appended(2, now_ms=2)
    policy.flushed(now_ms=2)
    assert policy.unflushed_messages == 0
    assert not policy.on_appended(4, now_ms=3)


def test_flush_is_due_once_flush_ms_passed_since_the_last_flush() -> None:
    policy = FlushPolicy(LogConfig(flush_ms=100), now_ms=1_000)
    assert not policy.is_due(1_099)
    assert not policy.on_appended(1, now_ms=1_099)
    assert policy.is_due(1_100)
    assert policy.on_appended(1, now_ms=1_100)
    policy.flushed(now_ms=1_150)
    assert policy.last_flush_ms == 1_150 and not policy.is_due(1_249)


def test_a_changed_config_governs_the_next_decision() -> None:
    policy = FlushPolicy(LogConfig(), now_ms=0)  # Kafka's defaults: never
    assert not policy.on_appended(1_000_000, now_ms=10**9)
    policy.update_config(LogConfig(flush_messages=1))
    assert policy.on_appended(1, now_ms=10**9)
