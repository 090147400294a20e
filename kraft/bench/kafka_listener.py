"""The Kafka listener's own CPU per Produce (or Fetch) request: no cluster, no replication.

    python -m kraft.bench.kafka_listener --requests 20000
    python -m kraft.bench.kafka_listener --fetch --partitions 6 --batch-bytes 262144

A `KafkaListener` on 127.0.0.1 serves a stand-in broker API that acknowledges every partition
at once; a client thread sends Produce requests shaped as librdkafka sends them during
``kraft bench produce --client confluent-kafka`` (v10, acks=all, one topic, one 16 KiB batch
per request), up to 5 in flight (librdkafka's ``max.in.flight`` with idempotence), and reads
the answers. The figure is the event loop thread's CPU per request: the listener's socket
reads and writes, framing, decoding, the handler's conversions and the answer's encoding,
without the broker API behind it (``kraft bench produce`` measures the whole).

With ``--fetch`` the requests are Fetch v12 requests of ``--partitions`` partitions, and the
stand-in answers each partition with ``--batch-bytes`` of records (the same bytes every time,
as a segment read would hand them over): the figure is then the cost of writing responses of
that size, copies included.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

FRAME_SIZE = struct.Struct(">i")


class AcknowledgingApi:
    """A stand-in broker API for the Kafka listener: answers every partition of a Produce at
    once with ``code`` (NONE: acknowledged, at offsets counting up), knows the topic ids of
    ``topics`` (id -> name)."""

    def __init__(self, code: int = 0, topics: dict[str, str] | None = None) -> None:
        self.code = code
        self.topics = topics or {}
        self.next_offset = 0

    def topic_name(self, topic_id: str) -> str | None:
        return self.topics.get(topic_id)

    async def produce(self, request: Any, ctx: Any) -> Any:
        from replication.messages import (
            ProducePartitionResponse,
            ProduceResponse,
            ProduceTopicResponse,
        )
        from storage.errors import ErrorCode

        code = ErrorCode(self.code)
        self.next_offset += 1
        offset = self.next_offset if code == ErrorCode.NONE else -1
        return ProduceResponse(
            responses=tuple(
                ProduceTopicResponse(
                    name=t.name,
                    partition_responses=tuple(
                        ProducePartitionResponse(
                            index=p.index, error_code=code, base_offset=offset, log_start_offset=0
                        )
                        for p in t.partition_data
                    ),
                )
                for t in request.topic_data
            )
        )


class RecordsApi:
    """A stand-in broker API for the Kafka listener's Fetch: each partition asked for answers
    with ``records(topic, partition)`` (any bytes: the listener does not look into them)."""

    def __init__(self, records: Callable[[str, int], bytes]) -> None:
        import random

        from replication.core.fetch_session import FetchSessionCache

        self.records = records
        self.fetch_sessions = FetchSessionCache(10, random.Random(1))

    async def fetch(self, request: Any, ctx: Any) -> Any:
        from replication.messages import (
            BrokerFetchResponse,
            FetchPartitionData,
            FetchTopicResponse,
        )

        return BrokerFetchResponse(
            responses=tuple(
                FetchTopicResponse(
                    topic=t.topic,
                    partitions=tuple(
                        FetchPartitionData(
                            partition_index=p.partition,
                            high_watermark=1,
                            last_stable_offset=1,
                            log_start_offset=0,
                            records=self.records(t.topic, p.partition),
                        )
                        for p in t.partitions
                    ),
                )
                for t in request.topics
            )
        )


FETCH_VERSION = 12


def _fetch_requests(count: int, partitions: int) -> list[bytes]:
    from kio.index import load_request_schema

    from replication.broker.kafka.entities import build
    from replication.nemesis.kafka_payloads import frame

    cls = load_request_schema(1, FETCH_VERSION)
    body = build(
        cls,
        {
            "replica_id": -1,
            "max_wait": 0,
            "min_bytes": 1,
            "max_bytes": 1 << 30,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": "bench",
                    "partitions": [
                        {"partition": i, "fetch_offset": 0, "partition_max_bytes": 1 << 30}
                        for i in range(partitions)
                    ],
                }
            ],
        },
    )
    return [frame(1, FETCH_VERSION, body, n, "bench") for n in range(count)]


def _requests(count: int, version: int, partitions: int, batch_bytes: int) -> list[bytes]:
    from kio.index import load_request_schema

    from replication.broker.kafka.entities import build
    from replication.nemesis.kafka_payloads import frame

    cls = load_request_schema(0, version)
    body = build(
        cls,
        {
            "acks": -1,
            "timeout": 30_000,
            "topic_data": [
                {
                    "name": "bench",
                    "partition_data": [
                        {"index": i, "records": bytes(batch_bytes)} for i in range(partitions)
                    ],
                }
            ],
        },
    )
    return [frame(0, version, body, n, "bench") for n in range(count)]


def _client(port: int, frames: list[bytes], in_flight: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        reader = sock.makefile("rb")
        sent = answered = 0
        while answered < len(frames):
            while sent < len(frames) and sent - answered < in_flight:
                sock.sendall(frames[sent])
                sent += 1
            (size,) = FRAME_SIZE.unpack(reader.read(4))
            (correlation_id,) = FRAME_SIZE.unpack(reader.read(size)[:4])
            if correlation_id != answered:
                raise RuntimeError(f"answer {correlation_id} came as number {answered}")
            answered += 1


async def _serve(frames: list[bytes], in_flight: int, api: Any) -> tuple[float, float]:
    from replication.broker.kafka.listener import KafkaListener, KafkaListenerConfig

    listener = KafkaListener(KafkaListenerConfig(name="PLAINTEXT", host="127.0.0.1", port=0), api)
    await listener.start()
    assert listener.bound_port is not None
    try:
        cpu, wall = time.thread_time(), time.perf_counter()
        client = threading.Thread(target=_client, args=(listener.bound_port, frames, in_flight))
        client.start()
        while client.is_alive():
            await asyncio.sleep(0.005)
        return time.thread_time() - cpu, time.perf_counter() - wall
    finally:
        await listener.stop()


def run(
    requests: int,
    version: int,
    partitions: int,
    batch_bytes: int,
    in_flight: int,
    fetch: bool = False,
) -> float:
    """The event loop thread's CPU µs per request (after a warm-up of a tenth as many)."""
    warmup = max(requests // 10, 1)
    api: Any
    if fetch:
        records = bytes(batch_bytes)
        api = RecordsApi(lambda _topic, _partition: records)
        asyncio.run(_serve(_fetch_requests(warmup, partitions), 5, api))
        frames = _fetch_requests(requests, partitions)
        what = f"Fetch v{FETCH_VERSION}"
    else:
        api = AcknowledgingApi()
        asyncio.run(_serve(_requests(warmup, version, partitions, batch_bytes), 5, api))
        frames = _requests(requests, version, partitions, batch_bytes)
        what = f"Produce v{version}"
    cpu, wall = asyncio.run(_serve(frames, in_flight, api))
    print(
        f"Kafka listener, {what}, {partitions} partition(s) x {batch_bytes} B, "
        f"{in_flight} in flight: {requests} requests in {wall:.2f} s, "
        f"{cpu / requests * 1e6:.1f} µs of the event loop's CPU per request"
    )
    return cpu / requests * 1e6


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kraft.bench.kafka_listener", description=__doc__)
    p.add_argument("--requests", type=int, default=20_000)
    p.add_argument("--version", type=int, default=10, help="Produce version (3-13)")
    p.add_argument("--partitions", type=int, default=1, help="partitions per request")
    p.add_argument("--batch-bytes", type=int, default=16_384)
    p.add_argument("--in-flight", type=int, default=5)
    p.add_argument(
        "--fetch",
        action="store_true",
        help="Fetch requests answered with --batch-bytes of records per partition",
    )
    args = p.parse_args(argv)
    run(args.requests, args.version, args.partitions, args.batch_bytes, args.in_flight, args.fetch)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
