"""A local cluster from a script, with failures injected: leadership moves, nothing is lost.

    python examples/local_cluster_failover.py [--data-dir DIR]

Starts 3 controllers and 3 brokers (real processes on 127.0.0.1), creates a topic with
replication factor 3 and ``min.insync.replicas=2``, then:

1. produces 500 records to partition 0 with ``acks=all``;
2. SIGKILLs that partition's leader broker and produces 500 more: the producer retries until
   the controller has fenced the dead broker and elected a new leader from the ISR;
3. SIGKILLs the active controller: the quorum elects another and the cluster stays healthy;
4. restarts both, waits for the broker to rejoin the ISR, and reads partition 0 back: all
   1,000 acknowledged records, each once, at its acknowledged offset.
"""

from __future__ import annotations

import argparse
import sys
import time

from kraft import Consumer, LocalCluster, Producer, TopicPartition

TOPIC = "orders"
BATCH = 500


def produce(producer: Producer, start: int) -> dict[int, int]:
    """``BATCH`` records to partition 0; value number -> acknowledged offset."""
    futures = [
        (i, producer.send(TOPIC, value=b"order-%04d" % i, partition=0))
        for i in range(start, start + BATCH)
    ]
    return {i: future.result(timeout=60).offset for i, future in futures}


def wait_until(condition: object, timeout: float, what: str) -> None:
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=None, help="keep data and logs here")
    args = parser.parse_args()

    with LocalCluster(controllers=3, brokers=3, data_dir=args.data_dir) as cluster:
        cluster.wait_until_healthy(timeout=60)
        print(f"cluster up: brokers {cluster.bootstrap}")
        cluster.create_topic(TOPIC, 3, 3, config={"min.insync.replicas": "2"})
        leader = cluster.describe_topic(TOPIC).partitions[0].leader
        print(f"topic {TOPIC}: partition 0 led by broker {leader}")

        with Producer(cluster.bootstrap, acks="all", enable_idempotence=True) as producer:
            acknowledged = produce(producer, 0)
            print(f"produced {len(acknowledged)} records")

            print(f"killing broker {leader} (SIGKILL), the leader of partition 0")
            killed_at = time.monotonic()
            cluster.kill_broker(leader)
            acknowledged |= produce(producer, BATCH)  # retried until a new leader takes them
            partition = cluster.describe_topic(TOPIC).partitions[0]
            print(
                f"produced {BATCH} more in {time.monotonic() - killed_at:.1f}s: partition 0 "
                f"moved to broker {partition.leader} (leader epoch {partition.leader_epoch}), "
                f"ISR {list(partition.isr)}"
            )

        active = cluster.active_controller_id()
        print(f"killing the active controller {active} (SIGKILL)")
        cluster.kill_controller(active)
        cluster.wait_until_healthy(timeout=60)
        print(f"controller {cluster.active_controller_id()} is active now")

        cluster.start_controller(active)
        cluster.start_broker(leader)
        wait_until(
            lambda: leader in cluster.describe_topic(TOPIC).partitions[0].isr,
            60,
            f"broker {leader} back in the ISR",
        )
        print(f"restarted both; broker {leader} is back in the ISR of partition 0")

        offsets: dict[int, int] = {}
        duplicates = 0
        with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
            tp = TopicPartition(TOPIC, 0)
            consumer.assign([tp])
            consumer.seek_to_beginning([tp])
            deadline = time.monotonic() + 60
            while len(offsets) < len(acknowledged) and time.monotonic() < deadline:
                for record in consumer.poll(timeout=1.0):
                    assert record.value is not None
                    i = int(record.value.removeprefix(b"order-"))
                    duplicates += i in offsets
                    offsets[i] = record.offset
    lost = [i for i, offset in acknowledged.items() if offsets.get(i) != offset]
    print(
        f"read back {len(offsets)} of {len(acknowledged)} acknowledged records: "
        f"lost or moved {len(lost)}, duplicates {duplicates}"
    )
    return 0 if not lost and not duplicates else 1


if __name__ == "__main__":
    sys.exit(main())
