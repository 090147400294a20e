"""Embedding kraft in a Python program: create a topic, produce, consume it back.

    python examples/produce_consume.py 127.0.0.1:9092,127.0.0.1:9093   # a running cluster
    KRAFT_BOOTSTRAP=127.0.0.1:9092 python examples/produce_consume.py   # the same
    python examples/produce_consume.py                                  # starts a LocalCluster

Produces 1,000 keyed records with ``acks=all`` and idempotence into a fresh topic, then reads
every partition from the beginning and checks each record came back once, at the partition
and offset its acknowledgement gave, with records of one key in one partition, in order.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import uuid
from collections.abc import Iterator

from kraft import AdminClient, Consumer, LocalCluster, Producer, TopicPartition

RECORDS = 1000
PARTITIONS = 3


@contextlib.contextmanager
def cluster_or(bootstrap: str | None) -> Iterator[str]:
    """``bootstrap`` if given, else a `LocalCluster` (3 controllers, 3 brokers) for the run."""
    if bootstrap:
        yield bootstrap
        return
    print("no bootstrap given: starting a local cluster (3 controllers, 3 brokers)")
    with LocalCluster(controllers=3, brokers=3) as cluster:
        cluster.wait_until_healthy(timeout=60)
        yield cluster.bootstrap


def run(bootstrap: str) -> int:
    topic = f"example-{uuid.uuid4().hex[:8]}"
    with AdminClient(bootstrap) as admin:
        brokers = len(admin.describe_cluster().brokers)
        replication_factor = min(3, brokers)
        admin.create_topic(
            topic,
            partitions=PARTITIONS,
            replication_factor=replication_factor,
            config={"min.insync.replicas": str(min(2, replication_factor))},
        )
        admin.wait_for_leaders(topic)
    print(f"created topic {topic}: {PARTITIONS} partitions, RF {replication_factor}")

    # Produce: send() returns a future at once; result() is the acknowledgement.
    with Producer(bootstrap, acks="all", enable_idempotence=True, linger_ms=5) as producer:
        futures = [
            (i, producer.send(topic, value=b"order-%04d" % i, key=b"customer-%d" % (i % 10)))
            for i in range(RECORDS)
        ]
        producer.flush()
        acknowledged = {i: future.result(timeout=30) for i, future in futures}
    print(f"produced {len(acknowledged)} records with acks=all")

    # Consume: assign every partition, start from the beginning, poll until all came back.
    seen: dict[int, tuple[int, int]] = {}
    keys: dict[bytes, set[int]] = {}
    deadline = time.monotonic() + 60
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(partitions)
        while len(seen) < RECORDS and time.monotonic() < deadline:
            for record in consumer.poll(timeout=1.0):
                assert record.value is not None and record.key is not None
                i = int(record.value.removeprefix(b"order-"))
                if i in seen:
                    print(f"FAILED: record {i} consumed twice")
                    return 1
                seen[i] = (record.partition, record.offset)
                keys.setdefault(record.key, set()).add(record.partition)
    misplaced = [i for i, md in acknowledged.items() if seen.get(i) != (md.partition, md.offset)]
    if len(seen) != RECORDS or misplaced:
        print(f"FAILED: consumed {len(seen)} of {RECORDS}; {len(misplaced)} not where acked")
        return 1
    if any(len(parts) != 1 for parts in keys.values()):
        print("FAILED: a key's records landed in more than one partition")
        return 1
    print(
        f"consumed {len(seen)} records: each exactly once, at its acknowledged partition and "
        f"offset; {len(keys)} keys, each in one partition"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "bootstrap",
        nargs="?",
        default=os.environ.get("KRAFT_BOOTSTRAP"),
        help="brokers host:port,... (default: $KRAFT_BOOTSTRAP, else start a LocalCluster)",
    )
    args = parser.parse_args()
    with cluster_or(args.bootstrap) as bootstrap:
        return run(bootstrap)


if __name__ == "__main__":
    sys.exit(main())
