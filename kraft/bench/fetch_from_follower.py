"""``kraft bench fetch-from-follower``: what fetch from the closest replica (KIP-392) takes off
a partition leader.

It starts a cluster of 3 controllers and 3 brokers in racks ``rack-a``, ``rack-b`` and
``rack-c`` with ``replica.selector.class`` set to Kafka's ``RackAwareReplicaSelector``,
creates one topic of one partition on all three (RF 3) and writes ``--records`` records of
``--record-size`` bytes to it (acks=all, not timed). Then, twice over the same records, one
consumer per rack reads the whole partition from its beginning, one after the other:

- ``leader``: the consumers send no ``client.rack``: the leader serves all three;
- ``closest``: each sends its rack: the leader serves the consumer in its own rack and names
  the follower in theirs to the two others (``preferred_read_replica``).

It runs each ``--rounds`` times, alternated, and reads every broker's CPU time (user + system,
``/proc/PID/stat``) around each run: the medians as measured (raw), and less what the broker
burns idle over the run's length (net: its rate over ``--idle-seconds`` of nothing after the
runs; heartbeats, the followers' long polls), in CPU seconds and µs per record consumed, for
the leader and the two followers, and the leader's ratio closest/leader. CPU, not records/s:
it depends less on what else the machine runs. ``--client librdkafka`` consumes with
confluent-kafka on the Kafka listeners instead of kraft's consumer (gRPC).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from kraft.bench.cpu import process_cpu_s

RACKS = ("rack-a", "rack-b", "rack-c")
TOPIC = "fetch-from-follower"


def _consume_kraft(cluster: Any, records: int, rack: str) -> int:
    from kraft.types import TopicPartition
    from replication.clients import Consumer

    tp = TopicPartition(TOPIC, 0)
    got = 0
    with Consumer(cluster.bootstrap, client_rack=rack) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.monotonic() + 300
        while got < records and time.monotonic() < deadline:
            got += len(consumer.poll(1.0))
    return got


def _consume_librdkafka(cluster: Any, records: int, rack: str) -> int:
    import confluent_kafka

    config = {
        "bootstrap.servers": cluster.kafka_bootstrap,
        "group.id": f"bench-ffr-{rack or 'none'}-{time.monotonic_ns()}",
        "enable.auto.commit": False,
    }
    if rack:
        config["client.rack"] = rack
    consumer = confluent_kafka.Consumer(config)
    got = 0
    try:
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + 300
        while got < records and time.monotonic() < deadline:
            got += sum(1 for m in consumer.consume(10_000, timeout=1.0) if m.error() is None)
    finally:
        consumer.close()
    return got


def _cpu(pids: dict[int, int]) -> dict[int, float]:
    return {b: process_cpu_s(pid) or 0.0 for b, pid in pids.items()}


def _idle_rates(pids: dict[int, int], seconds: float) -> dict[int, float]:
    """CPU seconds per second each broker burns with no client."""
    before, started = _cpu(pids), time.monotonic()
    time.sleep(seconds)
    after, elapsed = _cpu(pids), time.monotonic() - started
    return {b: (after[b] - before[b]) / elapsed for b in pids}


def _run(
    cluster: Any,
    pids: dict[int, int],
    consume: Callable[[Any, int, str], int],
    records: int,
    with_rack: bool,
) -> tuple[dict[int, float], float]:
    """CPU seconds per broker, and the seconds it took, while one consumer per rack reads
    every record."""
    before, started = _cpu(pids), time.monotonic()
    for rack in RACKS:
        got = consume(cluster, records, rack if with_rack else "")
        if got < records:
            raise RuntimeError(f"a consumer read {got} of {records} records")
    after, elapsed = _cpu(pids), time.monotonic() - started
    return {b: after[b] - before[b] for b in pids}, elapsed


def _figures(
    rounds: list[tuple[dict[int, float], float]], idle: dict[int, float], leader: int, consumed: int
) -> dict[str, Any]:
    """Medians over the rounds of one run: the leader's and the followers' CPU seconds, as
    measured (raw) and less their idle use over the round (net), and µs per record."""
    raw = {b: statistics.median(r[0][b] for r in rounds) for b in idle}
    net = {b: statistics.median(r[0][b] - idle[b] * r[1] for r in rounds) for b in idle}
    out: dict[str, Any] = {"seconds": round(statistics.median(r[1] for r in rounds), 2)}
    for kind, spent in (("raw", raw), ("net", net)):
        followers = sum(v for b, v in spent.items() if b != leader)
        out[kind] = {
            "leader_cpu_s": round(spent[leader], 3),
            "followers_cpu_s": round(followers, 3),
            "leader_cpu_us_per_record": round(spent[leader] / consumed * 1e6, 2),
            "followers_cpu_us_per_record": round(followers / consumed * 1e6, 2),
        }
    return out


def measure(
    *, records: int, record_size: int, client: str, idle_s: float, rounds: int
) -> dict[str, Any]:
    from kraft.cluster import LocalCluster
    from replication.clients import Producer
    from replication.core.replica_selector import RACK_AWARE_SELECTOR

    consume = _consume_kraft if client == "kraft" else _consume_librdkafka
    with (
        tempfile.TemporaryDirectory(prefix="kraft-ffr-") as data_dir,
        LocalCluster(
            controllers=3,
            brokers=3,
            data_dir=data_dir,
            broker_racks=RACKS,
            broker_config={"replica.selector.class": RACK_AWARE_SELECTOR},
        ) as cluster,
    ):
        cluster.wait_until_healthy(timeout=120)
        cluster.create_topic(TOPIC, 1, 3, config={"min.insync.replicas": "2"}, timeout=60)
        value = b"v" * record_size
        with Producer(cluster.bootstrap, acks="all", linger_ms=5) as producer:
            futures = [producer.send(TOPIC, value, partition=0) for _ in range(records)]
            for future in futures:
                future.result(timeout=120)
        deadline = time.monotonic() + 60
        while len(cluster.describe_topic(TOPIC).partitions[0].isr) < 3:
            if time.monotonic() > deadline:
                raise RuntimeError("the followers did not join the ISR")
            time.sleep(0.1)
        leader = cluster.describe_topic(TOPIC).partitions[0].leader
        pids = {b: pid for b in cluster.broker_ids if (pid := cluster.broker(b).pid) is not None}
        _run(cluster, pids, consume, records, True)  # warm up: caches, connections
        runs: dict[str, list[tuple[dict[int, float], float]]] = {"leader": [], "closest": []}
        for _ in range(rounds):  # alternated, so a change in the machine's load hits both
            runs["leader"].append(_run(cluster, pids, consume, records, False))
            runs["closest"].append(_run(cluster, pids, consume, records, True))
        idle = _idle_rates(pids, idle_s)  # after the runs: start-up work is over
    consumed = records * len(RACKS)
    out: dict[str, Any] = {
        "client": client,
        "records": records,
        "record_size": record_size,
        "consumers": len(RACKS),
        "rounds": rounds,
        "leader_rack": RACKS[list(cluster.broker_ids).index(leader)],
        "idle_cpu_s_per_s": {str(b): round(v, 4) for b, v in idle.items()},
        "leader_cpu_s_each_round": {
            name: [round(r[0][leader], 3) for r in spent] for name, spent in runs.items()
        },
    }
    for name, spent in runs.items():
        out[name] = _figures(spent, idle, leader, consumed)
    for kind in ("raw", "net"):
        ratio = out["closest"][kind]["leader_cpu_s"] / max(
            out["leader"][kind]["leader_cpu_s"], 1e-9
        )
        out[f"leader_ratio_closest_to_leader_{kind}"] = round(ratio, 3)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="kraft bench fetch-from-follower",
        description="The leader's CPU with and without fetch from the closest replica "
        "(KIP-392) on a 3-rack cluster.",
        epilog="example: kraft bench fetch-from-follower --records 200000 --json",
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--client", choices=("kraft", "librdkafka"), default="kraft")
    parser.add_argument("--idle-seconds", type=float, default=5.0, help="the idle baseline")
    parser.add_argument("--rounds", type=int, default=3, help="of each run (medians shown)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if min(args.records, args.rounds, args.idle_seconds) <= 0 or args.record_size < 0:
        parser.error("--records, --rounds, --idle-seconds must be positive, --record-size >= 0")
    result = measure(
        records=args.records,
        record_size=args.record_size,
        client=args.client,
        idle_s=args.idle_seconds,
        rounds=args.rounds,
    )
    if args.json:
        print(json.dumps(result))
        return 0
    for name in ("leader", "closest"):
        r, n = result[name]["raw"], result[name]["net"]
        print(
            f"{name:8s} leader {r['leader_cpu_s']:.2f} CPU-s ({n['leader_cpu_s']:.2f} net, "
            f"{n['leader_cpu_us_per_record']:.2f} µs/record), followers "
            f"{r['followers_cpu_s']:.2f} CPU-s ({n['followers_cpu_s']:.2f} net), "
            f"{result[name]['seconds']:.1f} s"
        )
    print(
        f"leader CPU closest/leader: {result['leader_ratio_closest_to_leader_raw']:.3f} raw, "
        f"{result['leader_ratio_closest_to_leader_net']:.3f} net"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
