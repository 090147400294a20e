"""Replication throttles for reassignment traffic (KIP-73 quotas, applied as KIP-455 needs).

``leader.replication.throttled.rate`` bounds the bytes per second a leader broker sends in
answer to the fetches of *adding* replicas (those a reassignment in progress adds, from the
partition's registration), all partitions together; ``follower.replication.throttled.rate``
bounds the bytes per second a broker fetches for its own adding replicas. Replicas already in
the assignment (the ISR's followers, and catching-up followers that are not being added) are
never throttled, so a reassignment cannot slow down ``acks=all`` produces. Kafka throttles the
replicas listed in ``leader/follower.replication.throttled.replicas``, which
``kafka-reassign-partitions --throttle`` sets to the moving ones; kraft derives them.

Each rate is read from the metadata image first (a dynamic broker config: this broker's, then
the cluster default ``""``), then from the broker's properties; the default is unlimited.

`ThrottleBucket` is a token bucket and pure: time comes in as ``now_ms``. It holds at most one
second of tokens, and a read may overdraw it (a first batch is returned whole, as in Kafka), so
the rate holds on average over a second or two, as Kafka's quota windows do.
"""

from __future__ import annotations

from typing import final

from kraft.metadata.image import MetadataImage
from kraft.metadata.records import ConfigResourceType
from storage.config_registry import LONG_MAX

LEADER_RATE_KEY = "leader.replication.throttled.rate"
FOLLOWER_RATE_KEY = "follower.replication.throttled.rate"


@final
class ThrottleBucket:
    """``rate_bytes_per_s`` (`LONG_MAX`: unlimited) as a token bucket of one second."""

    def __init__(self, rate_bytes_per_s: int = LONG_MAX, now_ms: int = 0) -> None:
        self._rate = rate_bytes_per_s
        self._tokens = float(min(rate_bytes_per_s, LONG_MAX))
        self._at_ms = now_ms

    @property
    def rate_bytes_per_s(self) -> int:
        return self._rate

    @property
    def limited(self) -> bool:
        return self._rate < LONG_MAX

    def set_rate(self, rate_bytes_per_s: int, now_ms: int) -> None:
        """A changed rate applies from now (the tokens saved so far are kept, capped)."""
        if rate_bytes_per_s == self._rate:
            return
        self._refill(now_ms)
        self._rate = rate_bytes_per_s
        self._tokens = min(self._tokens, float(rate_bytes_per_s))

    def available(self, now_ms: int) -> int:
        """Bytes that may go now (<= 0: none until `wait_ms`); `LONG_MAX` when unlimited."""
        if not self.limited:
            return LONG_MAX
        self._refill(now_ms)
        return int(self._tokens)

    def record(self, size_bytes: int, now_ms: int) -> None:
        """``size_bytes`` went (may overdraw the bucket)."""
        if self.limited and size_bytes > 0:
            self._refill(now_ms)
            self._tokens -= size_bytes

    def wait_ms(self, now_ms: int) -> int:
        """Milliseconds until some bytes may go (0: now)."""
        tokens = self.available(now_ms)
        if tokens > 0:
            return 0
        return int((1 - tokens) * 1000 / self._rate) + 1

    def _refill(self, now_ms: int) -> None:
        elapsed = now_ms - self._at_ms
        if elapsed > 0:
            self._tokens = min(float(self._rate), self._tokens + elapsed * self._rate / 1000)
            self._at_ms = now_ms


def throttled_rate(image: MetadataImage, broker_id: int, key: str, static: int) -> int:
    """The effective ``key`` of ``broker_id``: its dynamic config, else the cluster default,
    else ``static`` (its properties). A malformed stored value falls back too (the controller
    validates values, so none is expected)."""
    for resource in (str(broker_id), ""):
        value = image.dynamic_configs(ConfigResourceType.BROKER, resource).get(key)
        if value is not None:
            try:
                rate = int(value.strip())
            except ValueError:
                continue
            if rate > 0:
                return rate
    return static


__all__ = [
    "FOLLOWER_RATE_KEY",
    "LEADER_RATE_KEY",
    "ThrottleBucket",
    "throttled_rate",
]
