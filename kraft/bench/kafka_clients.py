"""The Kafka-protocol clients of ``kraft bench produce|consume --client``: librdkafka
(confluent-kafka) and kafka-python, driving the same workload as kraft's own client (acks=all,
idempotent, ``--linger-ms``, ``--batch-size``, at most about ``--window`` records
unacknowledged; or consuming every partition from the beginning) against any Kafka listener:
kraft's (`LocalCluster.kafka_bootstrap`) or Apache Kafka's (``--against kafka``).

Without ``--against``, `main_client` runs each client named by ``--client`` (a comma list, so
that the clients are measured in the same run, on the same cluster) against one kraft cluster,
in alternated rounds: records/s, p50/p99, and the CPU seconds per record of the client process
and of every controller and broker together (from /proc).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from kraft.bench import BenchError
from kraft.bench.produce_consume import (
    PARTITIONS,
    REPLICATION_FACTOR,
    _figures,
    consume,
    ensure_topic,
    poll_until,
    produce,
)
from kraft.bench.table import SUMMARY_COLUMNS, SUMMARY_KEYS, Column, load_line, medians, table

CLIENTS = ("kraft", "confluent-kafka", "kafka-python")
"""kraft: kraft's own client over gRPC; the others speak the Kafka protocol."""
MIN_INSYNC_REPLICAS = 2
WINDOW_CHECK = 256
"""kafka-python's produce: records between two looks at the unacknowledged count."""


def parse_clients(text: str) -> list[str]:
    """``--client``: one client or a comma list of them."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in CLIENTS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"--client: one or more of {', '.join(CLIENTS)}")
    return list(dict.fromkeys(names))


# -- librdkafka ----------------------------------------------------------------------------------


def kafka_topic(bootstrap: str, topic: str, say: Callable[[str], None]) -> None:
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(
        topic,
        num_partitions=PARTITIONS,
        replication_factor=REPLICATION_FACTOR,
        config={"min.insync.replicas": str(MIN_INSYNC_REPLICAS)},
    )
    admin.create_topics([new])[topic].result(timeout=60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        described = admin.list_topics(topic, timeout=10).topics[topic]
        if len(described.partitions) == PARTITIONS and all(
            p.leader >= 0 for p in described.partitions.values()
        ):
            say(f"kafka: created topic {topic}: {PARTITIONS} partitions, RF={REPLICATION_FACTOR}")
            return
        time.sleep(0.2)
    raise BenchError(f"no leader for every partition of {topic} on Kafka within 60 s")


def librdkafka_produce(
    bootstrap: str,
    topic: str,
    records: int,
    size: int,
    window: int,
    linger_ms: int,
    batch_size: int,
) -> dict[str, Any]:
    """acks=all, idempotent; latency per record = its delivery report's ``latency()``."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": linger_ms,
            "batch.size": batch_size,
            "queue.buffering.max.messages": window,
        }
    )
    value = b"x" * size
    latency_ms: list[float] = []
    errors: list[str] = []

    def on_delivery(error: Any, message: Any) -> None:
        if error is not None:
            errors.append(str(error))
        else:
            latency_ms.append((message.latency() or 0.0) * 1000.0)

    producer.produce(topic, value, on_delivery=on_delivery)  # metadata, producer id: untimed
    if producer.flush(30) != 0:
        raise BenchError("Kafka did not acknowledge the first record within 30 s")
    latency_ms.clear()
    produce_one = producer.produce
    clock = time.perf_counter
    start = clock()
    for _ in range(records):
        while True:
            try:
                produce_one(topic, value, on_delivery=on_delivery)
                break
            except BufferError:  # the window is full: serve delivery reports
                producer.poll(0.001)
    if producer.flush(120) != 0:
        raise BenchError(f"only {len(latency_ms)} of {records} records acknowledged by Kafka")
    seconds = clock() - start
    if errors:
        raise BenchError(f"{len(errors)} records failed on Kafka, first: {errors[0]}")
    return {"acks": "all", "client": "confluent-kafka (librdkafka)"} | _figures(
        records, size, seconds, latency_ms
    )


def librdkafka_consume(bootstrap: str, topic: str, records: int) -> dict[str, Any]:
    """Assign every partition from the beginning; ``consume`` until ``records`` came."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        out = poll_until(
            records,
            lambda: [m.value() for m in consumer.consume(5000, 1.0) if m.error() is None],
        )
    finally:
        consumer.close()
    return out | {"client": "confluent-kafka (librdkafka)"}


# -- kafka-python --------------------------------------------------------------------------------


def kafka_python_produce(
    bootstrap: str,
    topic: str,
    records: int,
    size: int,
    window: int,
    linger_ms: int,
    batch_size: int,
) -> dict[str, Any]:
    """acks=all, idempotent; latency per record: from ``send`` to its future's callback.
    kafka-python 3 has no ``buffer.memory``: the window is kept here, checked every
    `WINDOW_CHECK` records."""
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        linger_ms=linger_ms,
        batch_size=batch_size,
        max_block_ms=120_000,
    )
    value = b"x" * size
    latency_ms: list[float] = []
    errors: list[BaseException] = []
    clock = time.perf_counter
    try:
        producer.send(topic, value).get(timeout=30)  # metadata, producer id: untimed
        send = producer.send
        record_latency = latency_ms.append
        start = clock()
        for i in range(records):
            if not i % WINDOW_CHECK:
                deadline = time.monotonic() + 120
                while i - len(latency_ms) - len(errors) >= window:
                    if time.monotonic() > deadline:
                        raise BenchError(f"{window} records unacknowledged for 120 s")
                    time.sleep(0.0002)
            sent_at = clock()
            future = send(topic, value)
            future.add_callback(lambda _m, t=sent_at: record_latency((clock() - t) * 1000.0))
            future.add_errback(errors.append)
        producer.flush(timeout=120)
        seconds = clock() - start
    finally:
        producer.close(timeout=10)
    if errors:
        raise BenchError(f"{len(errors)} records failed, first: {errors[0]!r}")
    if len(latency_ms) != records:
        raise BenchError(f"only {len(latency_ms)} of {records} records acknowledged")
    return {"acks": "all", "client": "kafka-python"} | _figures(records, size, seconds, latency_ms)


def kafka_python_consume(
    bootstrap: str, topic: str, records: int, max_poll_records: int
) -> dict[str, Any]:
    """Assign every partition, seek to the beginning, ``poll`` until ``records`` came."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=max_poll_records,
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out = poll_until(
            records,
            lambda: [
                m.value for batch in consumer.poll(1000, max_poll_records).values() for m in batch
            ],
        )
    finally:
        consumer.close()
    return out | {"client": "kafka-python"}


# -- any client ----------------------------------------------------------------------------------


def run_client(args: argparse.Namespace, client: str, bootstrap: str, topic: str) -> dict[str, Any]:
    """One run of ``args.bench`` through ``client``; ``bootstrap``: a Kafka listener, or kraft's
    gRPC addresses for the kraft client."""
    if client == "kraft":
        if args.bench == "produce":
            run = produce(
                bootstrap,
                topic,
                args.records,
                args.record_size,
                "all",
                args.window,
                args.linger_ms,
                args.batch_size,
            )
        else:
            run = consume(bootstrap, topic, args.records, args.max_poll_records)
        run.pop("_threads_at_end", None)
        return run | {"client": "kraft"}
    if client == "confluent-kafka":
        if args.bench == "produce":
            return librdkafka_produce(
                bootstrap,
                topic,
                args.records,
                args.record_size,
                args.window,
                args.linger_ms,
                args.batch_size,
            )
        return librdkafka_consume(bootstrap, topic, args.records)
    if args.bench == "produce":
        return kafka_python_produce(
            bootstrap,
            topic,
            args.records,
            args.record_size,
            args.window,
            args.linger_ms,
            args.batch_size,
        )
    return kafka_python_consume(bootstrap, topic, args.records, args.max_poll_records)


def fill(bootstrap: str, topic: str, records: int, size: int) -> None:
    """Untimed: ``records`` records of ``size`` bytes into ``topic`` through librdkafka (its
    first, untimed record among them)."""
    librdkafka_produce(bootstrap, topic, max(records - 1, 1), size, 20_000, 5, 16384)


# -- kraft alone, several clients ----------------------------------------------------------------


def run_clients(args: argparse.Namespace, cluster: Any = None) -> dict[str, Any]:
    """Every client of ``args.client`` against one kraft cluster (``cluster``, or a
    `LocalCluster` started here), in alternated rounds."""
    from kraft import LocalCluster
    from kraft.bench.cpu import kraft_pids, nodes_cpu, profiled

    def say(msg: str) -> None:
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    clients: list[str] = args.client
    result: dict[str, Any] = {
        "bench": f"{args.bench} --client {','.join(clients)}",
        "records": args.records,
        "record_size": args.record_size,
        "rounds": args.rounds,
        "partitions": PARTITIONS,
        "replication_factor": REPLICATION_FACTOR,
        "load_average": {"before": [round(x, 2) for x in os.getloadavg()]},
    }
    with contextlib.ExitStack() as stack:
        if cluster is None:
            say("starting kraft: 3 controllers, 3 brokers")
            cluster = stack.enter_context(LocalCluster(3, 3))
            cluster.wait_until_healthy(timeout=120)
        pids = kraft_pids(cluster)
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        ensure_topic(cluster.bootstrap, topic, say)
        if args.bench == "consume":
            say(f"filling {topic} with {args.records} records (acks=all, not timed)")
            fill(cluster.kafka_bootstrap, topic, args.records, args.record_size)
        bootstraps = {
            c: cluster.bootstrap if c == "kraft" else cluster.kafka_bootstrap for c in CLIENTS
        }
        runs: dict[str, list[dict[str, Any]]] = {c: [] for c in clients}
        for round_ in range(1, args.rounds + 1):
            for client in clients if round_ % 2 else list(reversed(clients)):
                figures: dict[str, Any] = {}
                with (
                    profiled(f"{client}-{round_}", cluster),
                    nodes_cpu(figures, pids, args.records),
                ):
                    run = run_client(args, client, bootstraps[client], topic)
                runs[client].append(run | figures)
                say(
                    f"round {round_}/{args.rounds} {client}: {run['records_per_s']:,.0f} "
                    f"records/s, nodes {figures['servers_cpu_us_per_record']:.1f} µs/record, "
                    f"client {figures['client_cpu_us_per_record']:.1f} µs/record"
                )
    result["load_average"]["after"] = [round(x, 2) for x in os.getloadavg()]
    result["runs"] = runs
    result["summary"] = {c: medians(rs) for c, rs in runs.items()}
    return result


def render_clients(result: dict[str, Any]) -> str:
    lines = [
        f"kraft bench {result['bench']}: {result['records']} records of "
        f"{result['record_size']} B, {PARTITIONS} partitions, RF={REPLICATION_FACTOR}, "
        f"acks=all, {result['rounds']} alternated runs of each, one kraft cluster (3+3)",
        load_line(result),
        "",
        *table(
            [
                Column("client", 17),
                *SUMMARY_COLUMNS,
            ],
            [
                [client] + [row[f"median_{key}"] for key in SUMMARY_KEYS]
                for client, row in result["summary"].items()
            ],
        ),
    ]
    lines.append(
        "  (medians; nodes µs/rec: CPU time per record of every kraft controller and broker"
        " together, from /proc; client µs/rec: this process; kraft's client speaks gRPC, the"
        " others the Kafka protocol to the brokers' Kafka listeners)"
    )
    return "\n".join(lines)


def main_clients(args: argparse.Namespace) -> int:
    from storage.errors import KraftError

    if args.bootstrap:
        print(f"kraft bench {args.bench} --client starts its own cluster", file=sys.stderr)
        return 2
    try:
        result = run_clients(args)
    except (BenchError, KraftError, TimeoutError, RuntimeError) as e:
        print(f"kraft bench {args.bench} --client: {e}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2) if args.json else render_clients(result))
    return 0


__all__ = ["CLIENTS", "main_clients", "parse_clients", "run_client", "run_clients"]
