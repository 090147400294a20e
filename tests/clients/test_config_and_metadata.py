"""Client configs (Kafka keys), the metadata cache, and decoding fetched records."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kraft.types import TopicPartition
from replication.clients.config import ConsumerConfig, ProducerConfig, parse_bootstrap_servers
from replication.clients.consumer import decode_partition_records
from replication.clients.metadata import MetadataCache
from replication.messages import (
    MetadataBroker,
    MetadataPartition,
    MetadataResponse,
    MetadataTopic,
)
from storage.errors import ErrorCode
from storage.records import SimpleRecord, build_batch


def test_producer_options_take_kafka_keys_or_snake_case() -> None:
    a = ProducerConfig.create({"linger.ms": "7", "batch.size": 100, "acks": "all"})
    b = ProducerConfig.create({"linger_ms": 7, "batch_size": 100, "acks": -1})
    assert a == b and a.acks == -1
    assert ProducerConfig.create({"enable.idempotence": "false", "acks": "1"}).acks == 1


@pytest.mark.parametrize(
    "options",
    [
        {"lingerms": 5},
        {"acks": "2"},
        {"acks": 1},  # idempotence (the default) needs acks=all
        {"max.in.flight.requests.per.connection": 6},
        {"compression.type": "brotli"},
    ],
)
def test_bad_producer_options_are_rejected(options: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        ProducerConfig.create(options)


def test_bootstrap_servers_are_split_and_trimmed() -> None:
    assert parse_bootstrap_servers(" h1:9092, 10.0.0.2:9093,,[::1]:9094 ") == [
        "h1:9092",
        "10.0.0.2:9093",
        "[::1]:9094",
    ]
    assert parse_bootstrap_servers(["h1:1", "h2:65535"]) == ["h1:1", "h2:65535"]


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("localhost", "no port"),
        (":99999", "no host"),
        ("host:0", "1 to 65535"),
        ("host:99999", "1 to 65535"),
        ("host:port", "1 to 65535"),
        ("http://127.0.0.1:9092", "without a scheme"),
        ("::1:9092", "brackets"),
        ("bad host:9092", "not a valid host"),
        ("h1:9092,localhost", "no port"),
        (" , ", "no address"),
    ],
)
def test_malformed_bootstrap_servers_are_refused_naming_the_address(
    value: str, problem: str
) -> None:
    """Kafka's ClientUtils.parseAndValidateAddresses: refuse before connecting."""
    with pytest.raises(ValueError) as e:
        parse_bootstrap_servers(value, "--bootstrap")
    assert str(e.value).startswith("--bootstrap: ") and problem in str(e.value)
    bad = value.split(",")[-1].strip()
    assert not bad or repr(bad) in str(e.value)


@pytest.mark.parametrize("address", ["localhost", "http://127.0.0.1:9092", "host:0"])
def test_every_client_refuses_a_malformed_bootstrap_when_it_is_built(address: str) -> None:
    """Not only the CLI: the library clients check their address list before connecting,
    so a typo fails in the constructor instead of after the connect deadline."""
    from kraft.controller.client import ControllerClient
    from replication.clients import AdminClient, Consumer, Producer

    builders = [
        lambda: Producer(address),
        lambda: Consumer(address),
        lambda: AdminClient(address),
        lambda: ControllerClient(address),
    ]
    for build in builders:
        with pytest.raises(ValueError, match="bad address"):
            build()


def test_consumer_options() -> None:
    config = ConsumerConfig.create({"auto.offset.reset": "earliest", "fetch.max.wait.ms": 50})
    assert (config.auto_offset_reset, config.fetch_max_wait_ms) == ("earliest", 50)
    with pytest.raises(ValueError):
        ConsumerConfig.create({"auto_offset_reset": "smallest"})


def metadata_response(leader: int = 1, epoch: int = 5) -> MetadataResponse:
    return MetadataResponse(
        brokers=(
            MetadataBroker(node_id=1, host="h1", port=1),
            MetadataBroker(node_id=2, host="h2", port=2),
        ),
        topics=(
            MetadataTopic(
                name="t",
                partitions=(
                    MetadataPartition(partition_index=1, leader_id=-1, leader_epoch=3),
                    MetadataPartition(partition_index=0, leader_id=leader, leader_epoch=epoch),
                ),
            ),
            MetadataTopic(name="missing", error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ),
    )


def test_metadata_cache_routes_by_leader_and_lists_available_partitions() -> None:
    cache = MetadataCache()
    snap = cache.update(metadata_response(), now_ms=0)
    assert snap.brokers == {1: "h1:1", 2: "h2:2"}
    assert snap.partition_count("t") == 2
    assert snap.leader_for(TopicPartition("t", 0)) == 1
    assert snap.leader_for(TopicPartition("t", 1)) is None
    assert snap.available_partitions("t") == [0]
    assert snap.topic_errors["missing"] is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_metadata_refresh_is_on_demand_and_rate_limited() -> None:
    cache = MetadataCache(refresh_backoff_ms=100, max_age_ms=10_000)
    assert cache.needs_update(0)
    cache.add_topics(["t"])
    cache.update(
        metadata_response().__class__(
            brokers=metadata_response().brokers, topics=metadata_response().topics[:1]
        ),
        now_ms=0,
    )
    assert cache.needs_update(100)  # partition 1 has no leader: keep asking
    full = MetadataResponse(
        brokers=metadata_response().brokers,
        topics=(
            MetadataTopic(
                name="t",
                partitions=(MetadataPartition(partition_index=0, leader_id=1, leader_epoch=1),),
            ),
        ),
    )
    cache.update(full, now_ms=200)
    assert not cache.needs_update(300)
    cache.request_update()
    assert not cache.needs_update(250)  # within the backoff
    assert cache.needs_update(300)
    cache.update(full, now_ms=300)
    assert cache.needs_update(10_300)  # metadata.max.age.ms


def test_a_newer_leader_hint_applies_at_once_and_an_older_one_is_ignored() -> None:
    """KIP-951: a NOT_LEADER_OR_FOLLOWER response names the new leader and its epoch."""
    cache = MetadataCache()
    cache.update(metadata_response(leader=1, epoch=5), now_ms=0)
    tp = TopicPartition("t", 0)
    assert not cache.update_leader(tp, 2, 5)
    assert cache.update_leader(tp, 2, 6)
    assert cache.snapshot.leader_for(tp) == 2
    assert not cache.update_leader(tp, 9, 7)  # unknown broker: refresh instead
    assert cache.needs_update(1_000)


def test_metadata_at_an_older_leader_epoch_keeps_the_cached_leader() -> None:
    """KIP-320 (Kafka's ``Metadata.updateLatestMetadata``): a broker whose image is behind
    (cut from the controllers, it still believes it leads at epoch 4) answers Metadata; its
    partition 0 at epoch 4 must not replace the cached leader at epoch 5, or the client
    fetches from the stale leader, which accepts epoch 4 and answers from its old log."""
    cache = MetadataCache()
    tp = TopicPartition("t", 0)
    cache.update(metadata_response(leader=1, epoch=5), now_ms=0)
    snap = cache.update(metadata_response(leader=2, epoch=4), now_ms=100)
    assert (snap.leader_for(tp), snap.partition(tp).leader_epoch) == (1, 5)  # type: ignore[union-attr]
    assert snap.partition(TopicPartition("t", 1)).leader_epoch == 3  # type: ignore[union-attr]
    cache.update(  # a broker that does not know the topic yet (still loading its image)
        MetadataResponse(
            topics=(MetadataTopic(name="t", error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),)
        ),
        now_ms=150,
    )
    snap = cache.update(metadata_response(leader=2, epoch=4), now_ms=160)
    assert (snap.leader_for(tp), snap.partition(tp).leader_epoch) == (1, 5)  # type: ignore[union-attr]
    snap = cache.update(metadata_response(leader=2, epoch=5), now_ms=200)  # the same epoch
    assert snap.leader_for(tp) == 2
    snap = cache.update(metadata_response(leader=1, epoch=6), now_ms=300)
    assert (snap.leader_for(tp), snap.partition(tp).leader_epoch) == (1, 6)  # type: ignore[union-attr]


def test_a_recreated_topic_starts_its_leader_epochs_afresh() -> None:
    """A topic deleted and created again has a new id and leader epochs from 0: Kafka resets
    the last seen epoch when the topic id changes."""

    def response(topic_id: str, leader: int, epoch: int) -> MetadataResponse:
        old = metadata_response(leader=leader, epoch=epoch)
        return replace(old, topics=(replace(old.topics[0], topic_id=topic_id),))

    cache = MetadataCache()
    tp = TopicPartition("t", 0)
    cache.update(response("id-1", leader=1, epoch=5), now_ms=0)
    assert cache.update(response("id-1", leader=2, epoch=0), now_ms=100).leader_for(tp) == 1
    snap = cache.update(response("id-2", leader=2, epoch=0), now_ms=200)
    assert (snap.leader_for(tp), snap.partition(tp).leader_epoch) == (2, 0)  # type: ignore[union-attr]


def test_fetched_records_below_the_position_and_control_batches_are_skipped() -> None:
    first = bytearray(build_batch([b"a", b"b", b"c"], timestamp_ms=1, base_offset=10))
    control = build_batch([b"\x00"], timestamp_ms=1, base_offset=13, is_control=True)
    last = build_batch(
        [SimpleRecord(value=b"d", key=b"k", headers=(("h", b"1"),))],
        timestamp_ms=2,
        base_offset=14,
    )
    data = bytes(first) + control + last + last[:20]  # a torn tail is ignored
    tp = TopicPartition("t", 0)
    records, next_offset, error = decode_partition_records(tp, data, position=11)
    assert error is None
    assert [(r.offset, r.value) for r in records] == [(11, b"b"), (12, b"c"), (14, b"d")]
    assert records[-1].key == b"k" and records[-1].headers == (("h", b"1"),)
    assert next_offset == 15
    only_control, after, _ = decode_partition_records(tp, control, position=13)
    assert not only_control and after == 14
