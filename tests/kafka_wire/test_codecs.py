"""Kafka's five codecs both ways through each real client (issue 25 item 5): kafka-python,
aiokafka and confluent-kafka (librdkafka) each produce with ``none``, ``gzip``, ``snappy``,
``lz4`` and ``zstd``, and kraft's own Consumer reads the records back; kraft's Producer writes
with the same codec, and the client reads those back. The batches on disk carry the codec in
their attributes, so a client that silently did not compress fails the test (the broker keeps
a batch as the producer wrote it: ``compression.type=producer``).

On the package's shared plaintext cluster (conftest.py); one topic per client and codec.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import aiokafka
import confluent_kafka
import kafka
import pytest

from kraft.cluster import LocalCluster
from kraft.types import TopicPartition
from replication.clients import AdminClient, Consumer, Producer
from storage.compression import CODEC_NAMES
from storage.records import iter_batches

pytestmark = [pytest.mark.process, pytest.mark.timeout(240)]

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
RECORDS = 20
READ_S = 30.0


def codec_topic(cluster: LocalCluster, client: str, codec: str) -> str:
    name = f"codec-{client}-{codec}"
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topic(name, partitions=1, replication_factor=3)
        admin.wait_for_leaders(name, timeout=30)
    return name


def payloads(prefix: str) -> list[bytes]:
    # Compressible values, so a codec has something to do.
    return [f"{prefix}-{i:03d}-".encode() + b"x" * 200 for i in range(RECORDS)]


def stored_codecs(cluster: LocalCluster, topic: str) -> list[str]:
    """The codec of every batch of partition 0 on its leader's disk, in log order."""
    leader = cluster.describe_topic(topic).partitions[0].leader
    directory = cluster.broker_data_dir(leader) / f"{topic}-0"
    names = {c: n for n, c in CODEC_NAMES.items()}
    return [
        names[header.compression]
        for segment in sorted(Path(directory).glob("*.log"))
        for _, header in iter_batches(segment.read_bytes())
    ]


def until(read: Callable[[], list[bytes]], want: list[bytes]) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + READ_S
    while time.monotonic() < deadline and sorted(got) != sorted(want):
        got.extend(read())
    return got


def kraft_read(cluster: LocalCluster, topic: str, want: list[bytes]) -> list[bytes]:
    with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        return until(lambda: [r.value or b"" for r in consumer.poll(timeout=1.0)], want)


def kraft_write(cluster: LocalCluster, topic: str, codec: str, values: list[bytes]) -> None:
    with Producer(cluster.bootstrap, acks="all", compression_type=codec, linger_ms=50) as p:
        for value in values:
            p.send(topic, value=value)
        p.flush(timeout=30)


def check_both_ways(
    cluster: LocalCluster,
    topic: str,
    codec: str,
    produce: Callable[[list[bytes]], None],
    consume: Callable[[list[bytes]], list[bytes]],
) -> None:
    from_client, from_kraft = payloads("client"), payloads("kraft")
    produce(from_client)
    written = stored_codecs(cluster, topic)
    assert written and set(written) == {codec}, f"the client wrote {written}"
    assert kraft_read(cluster, topic, from_client) == from_client
    kraft_write(cluster, topic, codec, from_kraft)
    assert set(stored_codecs(cluster, topic)[len(written) :]) == {codec}
    assert consume(from_client + from_kraft) == from_client + from_kraft


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_codecs_both_ways(cluster: LocalCluster, codec: str) -> None:
    topic = codec_topic(cluster, "kp", codec)

    def produce(values: list[bytes]) -> None:
        producer = kafka.KafkaProducer(
            bootstrap_servers=cluster.kafka_bootstrap,
            acks="all",
            compression_type=None if codec == "none" else codec,
            linger_ms=50,
        )
        try:
            for f in [producer.send(topic, v) for v in values]:
                f.get(timeout=30)
        finally:
            producer.close()

    def consume(want: list[bytes]) -> list[bytes]:
        consumer = kafka.KafkaConsumer(
            bootstrap_servers=cluster.kafka_bootstrap, auto_offset_reset="earliest"
        )
        try:
            consumer.assign([kafka.TopicPartition(topic, 0)])
            return until(lambda: [r.value for rs in consumer.poll(1000).values() for r in rs], want)
        finally:
            consumer.close()

    check_both_ways(cluster, topic, codec, produce, consume)


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_codecs_both_ways(cluster: LocalCluster, codec: str) -> None:
    topic = codec_topic(cluster, "ak", codec)

    async def produce_async(values: list[bytes]) -> None:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=cluster.kafka_bootstrap,
            acks="all",
            compression_type=None if codec == "none" else codec,
            linger_ms=50,
        )
        await producer.start()
        try:
            futures = [await producer.send(topic, v) for v in values]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()

    async def consume_async(want: list[bytes]) -> list[bytes]:
        consumer = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=cluster.kafka_bootstrap, auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            consumer.assign([aiokafka.TopicPartition(topic, 0)])
            got: list[bytes] = []
            deadline = time.monotonic() + READ_S
            while time.monotonic() < deadline and sorted(got) != sorted(want):
                batches = await consumer.getmany(timeout_ms=1000)
                got += [r.value for rs in batches.values() for r in rs if r.value is not None]
            return got
        finally:
            await consumer.stop()

    check_both_ways(
        cluster,
        topic,
        codec,
        lambda values: asyncio.run(produce_async(values)),
        lambda want: asyncio.run(consume_async(want)),
    )


@pytest.mark.parametrize("codec", CODECS)
def test_librdkafka_codecs_both_ways(cluster: LocalCluster, codec: str) -> None:
    topic = codec_topic(cluster, "ck", codec)

    def produce(values: list[bytes]) -> None:
        producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": cluster.kafka_bootstrap,
                "acks": "all",
                "compression.type": codec,
                "linger.ms": 50,
            }
        )
        errors: list[confluent_kafka.KafkaError] = []
        for value in values:
            producer.produce(
                topic, value=value, on_delivery=lambda e, _m: errors.append(e) if e else None
            )
        assert producer.flush(30) == 0 and errors == []

    def consume(want: list[bytes]) -> list[bytes]:
        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": cluster.kafka_bootstrap, "group.id": f"{topic}-reader"}
        )
        try:
            consumer.assign(
                [confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)]
            )

            def poll() -> list[bytes]:
                message = consumer.poll(1.0)
                if message is None or message.error() is not None:
                    return []
                return [message.value() or b""]

            return until(poll, want)
        finally:
            consumer.close()

    check_both_ways(cluster, topic, codec, produce, consume)
