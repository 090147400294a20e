"""``kraft bench e2e --against kafka``: produce-to-consume latency on kraft and on Apache Kafka,
with the same client, in one run.

A kraft `LocalCluster` and an Apache Kafka `KafkaCluster` (3 controllers, 3 brokers each) get
the same topic (6 partitions, RF=3, ``min.insync.replicas=2``). librdkafka (confluent-kafka)
drives both, kraft through its brokers' Kafka listeners: a producer (acks=all, idempotent)
sends ``--rate`` records/s for ``--seconds`` while a consumer in the same process, assigned
every partition at its high watermark, reads them back (``fetch.wait.max.ms`` =
`FETCH_WAIT_MS` on both). Each value starts with its send time (``perf_counter_ns``); a
record's latency is when the consumer got it minus that. Before the clock starts, one record
goes through both ends (metadata, producer id, the consumer's first fetch).

Each ``--linger-ms`` value (5, Kafka's default, and 0 unless given) runs on both systems in
every round; the order of the systems flips each round. Kafka is first warmed up with
``--warmup-records`` untimed records (its JIT). Per run: p50/p99/p99.9 of produce -> consume
and of send -> acknowledgement, the CPU seconds per record of all nodes together (from /proc,
the JVMs included) and each node's resident memory. The summary gives medians per system and
linger, and kraft/Kafka as the median of the rounds' ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import struct
import sys
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

from kraft.bench import BenchError
from kraft.bench.against_kafka import report, rss_lines
from kraft.bench.cpu import kafka_pids, kraft_pids, nodes_cpu
from kraft.bench.e2e import check_read_back, wait_read_back
from kraft.bench.kafka_clients import MIN_INSYNC_REPLICAS, fill, kafka_topic
from kraft.bench.produce_consume import (
    PARTITIONS,
    REPLICATION_FACTOR,
    ensure_topic,
    percentiles,
)
from kraft.bench.table import Column, load_line, median, medians, table

if TYPE_CHECKING:
    from kraft.peer import KafkaCluster

SYSTEMS = ("kraft", "kafka")
CLIENT = "confluent-kafka (librdkafka)"
FETCH_WAIT_MS = 100
"""The consumer's ``fetch.wait.max.ms`` on both systems: a fetch answers as soon as a record
arrives (``fetch.min.bytes`` 1), so this bounds only an idle wait."""
DEFAULT_LINGERS = (5, 0)
_STAMP = struct.Struct(">q")
_WARM = -1
"""The stamp of the untimed first record."""


def librdkafka_e2e(
    bootstrap: str, topic: str, rate: int, seconds: float, size: int, linger_ms: int
) -> dict[str, Any]:
    """One run: ``rate`` records/s for ``seconds`` through librdkafka, read back by a consumer
    thread; every acknowledged record must be read, else `BenchError`."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    total = max(1, int(rate * seconds))
    clock = time.perf_counter_ns
    padding = b"x" * max(0, size - _STAMP.size)
    latencies_ns: list[int] = []
    consumed = [0]
    warm = threading.Event()
    stop = threading.Event()
    errors: list[BaseException] = []
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"e2e-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": FETCH_WAIT_MS,
        }
    )
    ends = []
    for p in range(PARTITIONS):
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        ends.append(TopicPartition(topic, p, high))
    consumer.assign(ends)

    def consume() -> None:
        unpack = _STAMP.unpack_from
        try:
            while not stop.is_set() and consumed[0] < total:
                for message in consumer.consume(num_messages=1000, timeout=0.1):
                    now = clock()
                    if message.error() is not None:
                        continue  # a partition's EOF and the like: not a record
                    stamp = unpack(message.value() or b"\0" * 8)[0]
                    if stamp == _WARM:
                        warm.set()
                        continue
                    latencies_ns.append(now - stamp)
                    consumed[0] += 1
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": linger_ms,
        }
    )
    acks_ms: list[float] = []
    failed: list[str] = []

    def on_delivery(error: Any, message: Any) -> None:
        if error is not None:
            failed.append(str(error))
        else:
            acks_ms.append((message.latency() or 0.0) * 1000.0)

    reader = threading.Thread(target=consume, name="e2e-consumer", daemon=True)
    reader.start()
    try:
        producer.produce(topic, _STAMP.pack(_WARM) + padding)
        if producer.flush(30) != 0 or not warm.wait(30):
            raise BenchError(f"the first record did not go through {bootstrap} within 30 s")
        interval_ns = 1_000_000_000 // rate
        produce, poll = producer.produce, producer.poll
        start = clock()
        i = 0
        while i < total:
            # NB: send what is due, then sleep (which lets the consumer thread run)
            due = min(total, (clock() - start) // interval_ns + 1)
            while i < due:
                while True:
                    try:
                        produce(topic, _STAMP.pack(clock()) + padding, on_delivery=on_delivery)
                        break
                    except BufferError:
                        poll(0.001)
                i += 1
            poll(0)
            time.sleep(0.0005)
        sent_seconds = (clock() - start) / 1e9
        producer.flush(60)
        wait_read_back(consumed, total, errors)
    finally:
        stop.set()
        reader.join(timeout=10)
        consumer.close()
    check_read_back(errors, failed, consumed[0], total)
    return {
        "client": CLIENT,
        "records": total,
        "rate_sent": round(total / sent_seconds, 1),
        "linger_ms": linger_ms,
        **percentiles([n / 1e6 for n in latencies_ns]),
        "ack": percentiles(acks_ms),  # send -> acknowledgement (acks=all: the ISR has it)
    }


def run_e2e_against(
    args: argparse.Namespace, kafka: KafkaCluster | None = None, kraft: Any = None
) -> dict[str, Any]:
    """Start both clusters (or use ``kafka`` and ``kraft``, running ones: the suite's) and run
    the rounds: every linger on both systems each round."""
    from kraft import LocalCluster
    from kraft.peer import KafkaCluster

    def say(msg: str) -> None:
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    lingers: list[int] = args.linger_ms or list(DEFAULT_LINGERS)
    result: dict[str, Any] = {
        "bench": "e2e --against kafka",
        "rate": args.rate,
        "seconds": args.seconds,
        "record_size": args.record_size,
        "rounds": args.rounds,
        "lingers_ms": lingers,
        "partitions": PARTITIONS,
        "replication_factor": REPLICATION_FACTOR,
        "min_insync_replicas": MIN_INSYNC_REPLICAS,
        "client": CLIENT,
        "fetch_wait_max_ms": FETCH_WAIT_MS,
        "warmup_records": args.warmup_records,
        "load_average": {"before": [round(x, 2) for x in os.getloadavg()]},
    }
    say("starting kraft (3 controllers, 3 brokers) and Apache Kafka (3 controllers, 3 brokers)")
    with contextlib.ExitStack() as stack:
        kraft_cluster = kraft or stack.enter_context(LocalCluster(3, 3))
        kafka_cluster = kafka or stack.enter_context(KafkaCluster(3, 3))
        kraft_cluster.wait_until_healthy(timeout=120)
        result["kafka_version"] = kafka_cluster.version
        bootstraps = {"kraft": kraft_cluster.kafka_bootstrap, "kafka": kafka_cluster.bootstrap}
        pids = {"kraft": kraft_pids(kraft_cluster), "kafka": kafka_pids(kafka_cluster)}
        topic = f"e2e-{uuid.uuid4().hex[:8]}"
        ensure_topic(kraft_cluster.bootstrap, topic, say)
        kafka_topic(bootstraps["kafka"], topic, say)
        for system in SYSTEMS:
            warmup = args.warmup_records.get(system, 0)
            if warmup:
                say(f"{system}: warm-up, {warmup:,} records (not counted)")
                fill(bootstraps[system], topic, warmup, args.record_size)
        runs: dict[str, dict[str, list[dict[str, Any]]]] = {
            str(linger): {s: [] for s in SYSTEMS} for linger in lingers
        }
        total = max(1, int(args.rate * args.seconds))
        for round_ in range(1, args.rounds + 1):
            order = SYSTEMS if round_ % 2 else tuple(reversed(SYSTEMS))
            for linger in lingers:
                for system in order:
                    figures: dict[str, Any] = {}
                    with nodes_cpu(figures, pids[system], total):
                        run = librdkafka_e2e(
                            bootstraps[system],
                            topic,
                            args.rate,
                            args.seconds,
                            args.record_size,
                            linger,
                        )
                    runs[str(linger)][system].append(run | figures)
                    say(
                        f"round {round_}/{args.rounds} linger.ms={linger} {system}: p50 "
                        f"{run['p50_ms']} ms, p99 {run['p99_ms']} ms, nodes "
                        f"{figures['servers_cpu_us_per_record']:.1f} µs/record"
                    )
    result["load_average"]["after"] = [round(x, 2) for x in os.getloadavg()]
    result["runs"] = runs
    result["summary"] = {linger: summarize(by_system) for linger, by_system in runs.items()}
    return result


LATENCIES = ("p50_ms", "p99_ms", "p999_ms")


def summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Medians per system over the rounds, and kraft/Kafka per latency percentile and CPU per
    record as the median of the rounds' ratios."""
    summary: dict[str, Any] = {}
    for system, rs in runs.items():
        acks = [r["ack"] for r in rs]
        summary[system] = {
            **medians(rs, (*LATENCIES, "servers_cpu_us_per_record")),
            "median_ack_p50_ms": median(a["p50_ms"] for a in acks),
            "median_ack_p99_ms": median(a["p99_ms"] for a in acks),
            "rss_mib_after_last_run": rs[-1]["rss_mib"],
        }
    ratios: dict[str, float | None] = {}
    for key in (*LATENCIES, "servers_cpu_us_per_record"):
        pairs = [
            a[key] / b[key]
            for a, b in zip(runs["kraft"], runs["kafka"], strict=True)
            if a[key] is not None and b[key]
        ]
        ratios[key] = round(statistics.median(pairs), 3) if pairs else None
    summary["ratio_kraft_to_kafka"] = ratios
    return summary


def render(result: dict[str, Any]) -> str:
    lines = [
        f"kraft bench {result['bench']} (Apache Kafka {result['kafka_version']}): "
        f"{result['rate']:,} records/s for {result['seconds']} s, {result['record_size']} B, "
        f"{PARTITIONS} partitions, RF={REPLICATION_FACTOR}, min.insync.replicas="
        f"{MIN_INSYNC_REPLICAS}, acks=all, {result['client']} on both, "
        f"{result['rounds']} alternated rounds",
        load_line(result),
        "",
    ]
    rows: list[list[Any]] = []
    for linger, s in result["summary"].items():
        for system in SYSTEMS:
            row = s[system]
            rows.append(
                [linger, system]
                + [row[f"median_{k}"] for k in (*LATENCIES, "ack_p50_ms", "ack_p99_ms")]
                + [row["median_servers_cpu_us_per_record"]]
            )
        r = s["ratio_kraft_to_kafka"]
        times = [None if r[k] is None else f"{r[k]:.2f}x" for k in LATENCIES]
        cpu = r["servers_cpu_us_per_record"]
        rows.append(["", "kraft/Kafka", *times, "", "", None if cpu is None else f"{cpu:.2f}x"])
    columns = [Column("linger.ms", 11), Column("system", 14, left=True)]
    columns += [Column(t, w, ".2f") for t, w in (("p50 ms", 9), ("p99 ms", 9), ("p99.9 ms", 10))]
    columns += [Column("ack p50", 9, ".2f"), Column("ack p99", 9, ".2f")]
    lines += table([*columns, Column("nodes µs/rec", 14, ".1f")], rows)
    lines += rss_lines(next(iter(result["summary"].values())), SYSTEMS)
    lines.append(
        "  (medians over the rounds; latency: consumer receipt minus send time; ack: send to"
        " acknowledgement; nodes µs/rec: CPU time per record of every controller and broker"
        " together, from /proc; kraft/Kafka: the median of the rounds' ratios)"
    )
    return "\n".join(lines)


def main_against(args: argparse.Namespace) -> int:
    from kraft.bench.plots import plot_e2e

    if args.bootstrap:
        print("kraft bench e2e --against kafka starts its own clusters", file=sys.stderr)
        return 2
    return report(args, "e2e", lambda: run_e2e_against(args), render, plot_e2e)


__all__ = ["librdkafka_e2e", "main_against", "render", "run_e2e_against", "summarize"]
