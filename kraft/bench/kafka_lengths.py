"""What the Kafka listener's length check costs beside kio's decode of the same request.

Every request frame a Kafka listener reads is checked first (`check_lengths`: every array,
string and bytes length against the bytes left, see `replication.broker.kafka.entities`), then
decoded by kio's native reader. This times both, in this process, on the request shapes a
client sends most: a Produce v11 with one 16 KiB batch, a Fetch v18 of 1, 10 and 100
partitions, a Metadata v12. CPU time (``time.process_time``), the median of ``--rounds``::

    $ python -m kraft.bench.kafka_lengths --rounds 7
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from kio.index import load_request_schema

from replication.broker.kafka.entities import build, check_lengths, read_entity
from replication.nemesis.kafka_payloads import frame
from storage.records import build_batch


def _fetch(partitions: int) -> Mapping[str, Any]:
    return {
        "max_wait": 500,
        "min_bytes": 1,
        "max_bytes": 50 << 20,
        "isolation_level": 1,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic_id": uuid.uuid4(),
                "partitions": [
                    {
                        "partition": p,
                        "current_leader_epoch": 3,
                        "fetch_offset": 1000 + p,
                        "partition_max_bytes": 1 << 20,
                    }
                    for p in range(partitions)
                ],
            }
        ],
        "rack_id": "",
    }


def shapes() -> dict[str, tuple[int, int, Mapping[str, Any]]]:
    """name -> (API key, version, the request's fields)."""
    batch = build_batch([b"x" * 1000] * 16, timestamp_ms=0)
    produce = {
        "acks": -1,
        "timeout": 30_000,
        "topic_data": [{"name": "bench", "partition_data": [{"index": 0, "records": batch}]}],
    }
    metadata = {
        "topics": [{"name": "bench", "topic_id": uuid.UUID(int=0)}],
        "allow_auto_topic_creation": True,
    }
    return {
        "Produce v11, one 16 KiB batch": (0, 11, produce),
        "Fetch v18, 1 partition": (1, 18, _fetch(1)),
        "Fetch v18, 10 partitions": (1, 18, _fetch(10)),
        "Fetch v18, 100 partitions": (1, 18, _fetch(100)),
        "Metadata v12": (3, 12, metadata),
    }


def _cpu_us(step: Callable[[], object], times: int) -> float:
    started = time.process_time()
    for _ in range(times):
        step()
    return (time.process_time() - started) / times * 1e6


def measure(rounds: int, times: int) -> list[tuple[str, int, float, float]]:
    """Per shape: its name, its size in bytes, and the median µs of CPU of the check and of
    kio's decode (header and body each)."""
    out = []
    for name, (key, version, fields) in shapes().items():
        cls = load_request_schema(key, version)
        header = cls.__header_schema__
        data = frame(key, version, build(cls, fields), 1, "bench")[4:]

        def check(cls: Any = cls, header: Any = header, data: bytes = data) -> int:
            return check_lengths(cls, data, check_lengths(header, data, 0))

        def decode(cls: Any = cls, header: Any = header, data: bytes = data) -> object:
            return read_entity(cls, data, read_entity(header, data, 0)[1])

        assert check() == len(data)
        n = max(times // 10, 1) if "100" in name else times
        checks = [_cpu_us(check, n) for _ in range(rounds)]
        decodes = [_cpu_us(decode, n) for _ in range(rounds)]
        out.append((name, len(data), statistics.median(checks), statistics.median(decodes)))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kraft.bench.kafka_lengths", description=__doc__)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--times", type=int, default=20_000, help="calls per round (a tenth at 100)")
    args = p.parse_args(argv)
    print(f"{'request':<30} {'bytes':>7} {'check µs':>9} {'kio µs':>8}")
    for name, size, check_us, decode_us in measure(args.rounds, args.times):
        print(f"{name:<30} {size:>7} {check_us:>9.2f} {decode_us:>8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
