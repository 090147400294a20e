"""`ThrottleBucket` and `throttled_rate`: the reassignment throttle's arithmetic (KIP-73 rates,
applied to adding replicas only, KIP-455)."""

from __future__ import annotations

from kraft.metadata import MetadataImage
from kraft.metadata.records import ConfigRecord, ConfigResourceType
from replication.broker.replicas.throttle import LEADER_RATE_KEY, ThrottleBucket, throttled_rate
from storage.config_registry import LONG_MAX


def test_an_unlimited_bucket_never_holds_anything_back() -> None:
    bucket = ThrottleBucket()
    assert not bucket.limited
    bucket.record(10**12, 0)
    assert bucket.available(0) == LONG_MAX and bucket.wait_ms(0) == 0


def test_a_bucket_allows_one_second_of_bytes_then_refills_at_the_rate() -> None:
    bucket = ThrottleBucket(1000, now_ms=0)
    assert bucket.available(0) == 1000, "one second of burst"
    bucket.record(1000, 0)
    assert bucket.available(0) == 0 and bucket.wait_ms(0) > 0
    assert bucket.available(500) == 500
    assert bucket.available(10_000) == 1000, "never more than one second saved"


def test_an_overdraft_is_paid_back_before_more_bytes_go() -> None:
    """A first batch comes whole even when larger than the allowance: the bucket goes
    negative, and the wait covers the debt, so the average rate holds."""
    bucket = ThrottleBucket(1000, now_ms=0)
    bucket.record(3000, 0)  # 2000 bytes of debt
    wait = bucket.wait_ms(0)
    assert 2000 < wait <= 2010
    assert bucket.available(wait - 5) <= 0
    assert bucket.available(wait) > 0


def test_the_average_rate_over_many_reads_stays_at_the_limit() -> None:
    bucket = ThrottleBucket(10_000, now_ms=0)
    sent, now = 0, 0
    while now < 10_000:
        allowance = bucket.available(now)
        if allowance > 0:
            size = 4096  # whole batches, whatever the allowance
            bucket.record(size, now)
            sent += size
        now += max(1, bucket.wait_ms(now))
    assert sent <= 10_000 * 11 + 4096, "at most the rate for 10 s plus the first second"


def test_a_dynamic_rate_of_the_broker_beats_the_cluster_default_and_the_properties() -> None:
    def config(resource: str, value: str) -> ConfigRecord:
        return ConfigRecord(
            resource_type=ConfigResourceType.BROKER,
            resource_name=resource,
            name=LEADER_RATE_KEY,
            value=value,
        )

    image = MetadataImage.empty()
    assert throttled_rate(image, 1, LEADER_RATE_KEY, 777) == 777
    image = image.apply(config("", "5000"), 0)
    assert throttled_rate(image, 1, LEADER_RATE_KEY, 777) == 5000
    image = image.apply(config("1", "100"), 1)
    assert throttled_rate(image, 1, LEADER_RATE_KEY, 777) == 100
    assert throttled_rate(image, 2, LEADER_RATE_KEY, 777) == 5000


def test_a_lowered_rate_applies_at_once() -> None:
    bucket = ThrottleBucket(LONG_MAX, now_ms=0)
    bucket.set_rate(100, 0)
    assert bucket.limited and bucket.available(0) == 100
