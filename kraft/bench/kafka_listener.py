"""The Kafka listener's own CPU per Produce request: no cluster, no replication.

    python -m kraft.bench.kafka_listener --requests 20000

A `KafkaListener` on 127.0.0.1 serves a stand-in broker API that acknowledges every partition
at once; a client thread sends Produce requests shaped as librdkafka sends them during
``kraft bench produce --client confluent-kafka`` (v10, acks=all, one topic, one 16 KiB batch
per request), up to 5 in flight (librdkafka's ``max.in.flight`` with idempotence), and reads
the answers. The figure is the event loop thread's CPU per request: the listener's socket
reads and writes, framing, decoding, the handler's conversions and the answer's encoding,
without the broker API behind it (``kraft bench produce`` measures the whole).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import struct
import threading
import time
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


async def _serve(frames: list[bytes], in_flight: int) -> tuple[float, float]:
    from replication.broker.kafka.listener import KafkaListener, KafkaListenerConfig

    listener = KafkaListener(
        KafkaListenerConfig(name="PLAINTEXT", host="127.0.0.1", port=0),
        AcknowledgingApi(),  # type: ignore[arg-type]
    )
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


def run(requests: int, version: int, partitions: int, batch_bytes: int, in_flight: int) -> float:
    """The event loop thread's CPU µs per request (after a warm-up of a tenth as many)."""
    asyncio.run(_serve(_requests(max(requests // 10, 1), version, partitions, batch_bytes), 5))
    frames = _requests(requests, version, partitions, batch_bytes)
    cpu, wall = asyncio.run(_serve(frames, in_flight))
    print(
        f"Kafka listener, Produce v{version}, {partitions} partition(s) x {batch_bytes} B, "
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
    args = p.parse_args(argv)
    run(args.requests, args.version, args.partitions, args.batch_bytes, args.in_flight)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
