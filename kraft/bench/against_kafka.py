"""``kraft bench produce|consume --against kafka``: kraft beside Apache Kafka, in one run.

A kraft `LocalCluster` and an Apache Kafka `KafkaCluster` (`kraft.peer`; 3 controllers and 3
brokers each, Kafka's settings taken from kraft's) run side by side. Each gets the same topic
(6 partitions, RF=3, ``min.insync.replicas=2``) and the same workload, in alternated runs
(kraft, Kafka, Kafka, kraft, ...: the order flips every round, so neither always runs on a
machine warmed or loaded by the other), after untimed warm-up runs on each until the nodes'
CPU per record settles (`warm_up`: a fresh JVM runs its first records interpreted, and
compiles them on the same cores): produce
``--records`` records of ``--record-size`` bytes with acks=all (idempotent), ``--linger-ms``,
``--batch-size`` and at most ``--window`` unacknowledged; or consume them back from the
beginning (filled untimed first).

The clients: ``--client confluent-kafka`` or ``kafka-python`` drives both systems, kraft
through its brokers' Kafka listeners (`kraft.bench.kafka_clients`); with ``--client kraft``
(the default) kraft's own client drives kraft, and librdkafka Kafka. Kafka is driven again by
its own ``kafka-producer-perf-test`` / ``kafka-consumer-perf-test`` (its Java client; the
``kafka-java`` row). Warm-up: at least ``--warmup-records`` per system (2,000,000 for Kafka by
default, for its JIT), then until the CPU per record settles (`warm_up`).
Per run: records/s, p50/p99 latency (produce: send to acknowledgement; consume: each poll
that returned records), the CPU seconds per record of every controller and broker process
together (from /proc: the JVMs' included) and of the client process, and each node's resident
memory after the run. The summary gives medians, and kraft/Kafka as the median of the rounds'
ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kraft.bench import BenchError
from kraft.bench.cpu import kafka_pids, kraft_pids, nodes_cpu
from kraft.bench.kafka_clients import (
    MIN_INSYNC_REPLICAS,
    fill,
    kafka_topic,
    run_client,
)
from kraft.bench.produce_consume import (
    PARTITIONS,
    REPLICATION_FACTOR,
    ensure_topic,
    produce,
)
from kraft.bench.table import SUMMARY_COLUMNS, SUMMARY_KEYS, Column, load_line, medians, table

if TYPE_CHECKING:
    from kraft.peer import KafkaCluster

SYSTEMS = ("kraft", "kafka")
JAVA = "kafka-java"
"""Kafka again, driven by Kafka's own perf tests (its Java client): a row of its own."""
TOOL_TIMEOUT_S = 300.0


# -- Kafka's own perf tests ---------------------------------------------------------------------


def perf_test(args: argparse.Namespace, bootstrap: str, topic: str) -> dict[str, Any]:
    """Kafka's ``kafka-producer-perf-test`` (acks=all, idempotent, the same linger, batch size
    and a ``buffer.memory`` of about ``--window`` records) or ``kafka-consumer-perf-test``."""
    from kraft.peer.tools import parse_consumer_perf_test, parse_producer_perf_test, tool_command

    if args.bench == "produce":
        buffer_memory = args.window * (args.record_size + 70)  # + a record's overhead in a batch
        command = tool_command(
            "kafka-producer-perf-test",
            "--topic",
            topic,
            "--num-records",
            str(args.records),
            "--record-size",
            str(args.record_size),
            "--throughput",
            "-1",
            "--producer-props",
            f"bootstrap.servers={bootstrap}",
            "acks=all",
            "enable.idempotence=true",
            f"linger.ms={args.linger_ms}",
            f"batch.size={args.batch_size}",
            f"buffer.memory={buffer_memory}",
        )
    else:
        command = tool_command(
            "kafka-consumer-perf-test",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--num-records",
            str(args.records),
            "--timeout",
            "120000",
            "--group",
            f"bench-{uuid.uuid4().hex[:8]}",
        )
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=False
    )
    if done.returncode != 0:
        raise BenchError(f"{command[-1]}: exit {done.returncode}: {done.stderr[-300:]}")
    try:
        parsed = (
            parse_producer_perf_test(done.stdout)
            if args.bench == "produce"
            else parse_consumer_perf_test(done.stdout)
        )
    except ValueError as e:
        raise BenchError(str(e)) from None
    tool = "kafka-producer-perf-test" if args.bench == "produce" else "kafka-consumer-perf-test"
    return {"client": f"{tool} (Java)", "p50_ms": None, "p99_ms": None} | parsed


# -- the run -------------------------------------------------------------------------------------

WARMUP_SETTLED = 0.15
"""Past its minimum, warm-up ends when two runs in a row cost the nodes within 15% of each
other per record."""
WARMUP_RECORDS = {"kraft": 0, "kafka": 2_000_000}
"""The default minimum of warm-up records per system (``--warmup-records SYSTEM=N``)."""


def warm_up(
    args: argparse.Namespace,
    system: str,
    bootstrap: str,
    topic: str,
    pids: dict[str, int],
    say: Callable[[str], None],
) -> list[dict[str, float]]:
    """Untimed runs: at least ``warmup_records[system]`` records, then on until the nodes'
    CPU per record settles, or ``--warmup-s`` has passed since the start.

    A fresh JVM runs Kafka's code interpreted at first, and compiles it on the same cores:
    measured here, a Kafka 3+3's CPU per produced record fell from 62 to 10 µs over its first
    2.1 M records (seven runs of 300,000), and its records/s rose 9x; two runs in a row could
    agree within 15% long before that, so the settle rule alone stopped too early. Hence the
    minimum, which no deadline cuts short: without it, the comparison would measure the
    JIT."""
    minimum = args.warmup_records.get(system, 0)
    history: list[dict[str, float]] = []
    warmed = 0
    deadline = time.monotonic() + args.warmup_s
    while True:
        if warmed >= minimum:
            if len(history) >= 2:
                a, b = (h["servers_cpu_us_per_record"] for h in history[-2:])
                if abs(a - b) <= WARMUP_SETTLED * max(a, b):
                    return history
            if time.monotonic() > deadline or args.warmup_s <= 0:
                return history
        figures: dict[str, Any] = {}
        with nodes_cpu(figures, pids, args.records):
            run = _one(args, system, bootstrap, topic)
        warmed += args.records
        history.append(
            {
                "records": warmed,
                "records_per_s": run["records_per_s"],
                "servers_cpu_us_per_record": figures["servers_cpu_us_per_record"],
            }
        )
        say(
            f"{system}: warm-up run {len(history)} ({warmed:,} records): "
            f"{run['records_per_s']:,.0f} records/s, servers "
            f"{figures['servers_cpu_us_per_record']:.1f} µs/record (not counted)"
        )


def parse_warmup_records(text: str) -> dict[str, int]:
    """``--warmup-records``: ``N`` (every system) or ``SYSTEM=N,...`` over the defaults."""
    out = dict(WARMUP_RECORDS)
    try:
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, _, count = part.rpartition("=")
            if name and name not in SYSTEMS:
                raise ValueError(name)
            for system in [name] if name else SYSTEMS:
                out[system] = int(count.replace("_", ""))
                if out[system] < 0:
                    raise ValueError(count)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--warmup-records: N or SYSTEM=N,... (systems: {', '.join(SYSTEMS)})"
        ) from None
    return out


def _one(args: argparse.Namespace, system: str, bootstrap: str, topic: str) -> dict[str, Any]:
    if system == JAVA:
        return perf_test(args, bootstrap, topic)
    return run_client(args, client_of(args, system), bootstrap, topic)


def client_of(args: argparse.Namespace, system: str) -> str:
    """The client that drives ``system``: ``--client`` on both when it speaks Kafka's
    protocol; with kraft's own client (gRPC only), librdkafka drives Kafka."""
    client: str = args.client[0]
    if client == "kraft" and system != "kraft":
        return "confluent-kafka"
    return client


def run_against(
    args: argparse.Namespace, kafka: KafkaCluster | None = None, kraft: Any = None
) -> dict[str, Any]:
    """Start both clusters (or use ``kafka`` and ``kraft``, running ones: the suite's) and run
    the rounds."""
    from kraft import LocalCluster
    from kraft.peer import KafkaCluster

    def say(msg: str) -> None:
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    result: dict[str, Any] = {
        "bench": f"{args.bench} --against kafka",
        "records": args.records,
        "record_size": args.record_size,
        "rounds": args.rounds,
        "partitions": PARTITIONS,
        "replication_factor": REPLICATION_FACTOR,
        "min_insync_replicas": MIN_INSYNC_REPLICAS,
        "warmup_records": args.warmup_records,
        "load_average": {"before": [round(x, 2) for x in os.getloadavg()]},
    }
    say("starting kraft (3 controllers, 3 brokers) and Apache Kafka (3 controllers, 3 brokers)")
    began = time.monotonic()
    with contextlib.ExitStack() as stack:
        kraft_cluster = kraft or stack.enter_context(LocalCluster(3, 3))
        kafka_cluster = kafka or stack.enter_context(KafkaCluster(3, 3))
        kraft_cluster.wait_until_healthy(timeout=120)
        result["kafka_version"] = kafka_cluster.version
        result["startup_s"] = {
            "kafka": kafka_cluster.startup_s,
            "both": round(time.monotonic() - began, 1),
        }
        kafka_clients = client_of(args, "kraft") != "kraft"
        bootstraps = {
            "kraft": kraft_cluster.kafka_bootstrap if kafka_clients else kraft_cluster.bootstrap,
            "kafka": kafka_cluster.bootstrap,
        }
        result["clients"] = {s: client_of(args, s) for s in SYSTEMS}
        pids = {"kraft": kraft_pids(kraft_cluster), "kafka": kafka_pids(kafka_cluster)}
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        ensure_topic(kraft_cluster.bootstrap, topic, say)
        kafka_topic(bootstraps["kafka"], topic, say)
        if args.bench == "consume":
            say(f"filling {topic} on both with {args.records} records (acks=all, not timed)")
            if kafka_clients:
                fill(kraft_cluster.kafka_bootstrap, topic, args.records, args.record_size)
            else:
                produce(
                    kraft_cluster.bootstrap, topic, args.records, args.record_size, "all", 20_000, 5
                )
            fill(bootstraps["kafka"], topic, args.records, args.record_size)
        bootstraps[JAVA], pids[JAVA] = bootstraps["kafka"], pids["kafka"]
        systems = (*SYSTEMS, JAVA)
        result["warmup"] = {
            system: warm_up(args, system, bootstraps[system], topic, pids[system], say)
            for system in SYSTEMS
        }
        runs: dict[str, list[dict[str, Any]]] = {s: [] for s in systems}
        for round_ in range(1, args.rounds + 1):
            order = systems if round_ % 2 else tuple(reversed(systems))
            for system in order:
                figures: dict[str, Any] = {}
                with nodes_cpu(figures, pids[system], args.records):
                    run = _one(args, system, bootstraps[system], topic)
                runs[system].append(run | figures)
                say(
                    f"round {round_}/{args.rounds} {system}: {run['records_per_s']:,.0f} "
                    f"records/s, servers {figures['servers_cpu_us_per_record']:.1f} µs/record"
                )
    result["load_average"]["after"] = [round(x, 2) for x in os.getloadavg()]
    result["runs"] = runs
    result["summary"] = summarize(runs)
    return result


def summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    summary: dict[str, Any] = {
        system: {
            "client": rs[0]["client"],
            **medians(rs),
            "rss_mib_after_last_run": rs[-1]["rss_mib"],
        }
        for system, rs in runs.items()
    }
    ratios = [
        a["records_per_s"] / b["records_per_s"]
        for a, b in zip(runs["kraft"], runs["kafka"], strict=True)
    ]
    summary["round_ratios_kraft_to_kafka"] = [round(r, 3) for r in ratios]
    summary["ratio_kraft_to_kafka"] = round(statistics.median(ratios), 3)
    if JAVA in runs:
        java = [
            a["records_per_s"] / b["records_per_s"]
            for a, b in zip(runs["kraft"], runs[JAVA], strict=True)
        ]
        summary["ratio_kraft_to_kafka_java"] = round(statistics.median(java), 3)
    summary["cpu_ratio_kraft_to_kafka"] = round(
        summary["kraft"]["median_servers_cpu_us_per_record"]
        / summary["kafka"]["median_servers_cpu_us_per_record"],
        2,
    )
    return summary


def render(result: dict[str, Any]) -> str:
    s = result["summary"]
    lines = [
        f"kraft bench {result['bench']} (Apache Kafka {result['kafka_version']}): "
        f"{result['records']} records of {result['record_size']} B, {PARTITIONS} partitions, "
        f"RF={REPLICATION_FACTOR}, min.insync.replicas={MIN_INSYNC_REPLICAS}, acks=all, "
        f"{result['rounds']} alternated runs of each",
        load_line(result),
        "",
        *table(
            [
                Column("system", 11),
                Column("client", 36, left=True),
                *SUMMARY_COLUMNS,
            ],
            [
                [system, s[system]["client"]] + [s[system][f"median_{key}"] for key in SUMMARY_KEYS]
                for system in (*SYSTEMS, JAVA)
                if system in s
            ],
        ),
    ]
    lines.append(
        f"kraft / Kafka: {s['ratio_kraft_to_kafka']:.3f}x records/s (median of the rounds' "
        f"ratios {s['round_ratios_kraft_to_kafka']}); nodes' CPU per record "
        f"{s['cpu_ratio_kraft_to_kafka']:.2f}x Kafka's"
        + (
            f"; kraft / Kafka with its Java perf test: {s['ratio_kraft_to_kafka_java']:.3f}x"
            if "ratio_kraft_to_kafka_java" in s
            else ""
        )
    )
    lines += rss_lines(s, SYSTEMS)
    lines.append(
        "  (medians; nodes µs/rec: CPU time per record of every controller and broker process"
        " together, from /proc; client µs/rec: this process and its children, the perf"
        " tests' JVMs)"
    )
    return "\n".join(lines)


def main_against(args: argparse.Namespace) -> int:
    if args.against != "kafka" or args.bench not in ("produce", "consume"):
        print("kraft bench: --against kafka is for produce and consume", file=sys.stderr)
        return 2
    if args.bootstrap:
        print(f"kraft bench {args.bench} --against kafka starts its own clusters", file=sys.stderr)
        return 2
    if len(args.client) != 1:
        print("kraft bench: --against kafka takes one --client", file=sys.stderr)
        return 2
    from kraft.bench.plots import plot_against

    return report(args, args.bench, lambda: run_against(args), render, plot_against)


def rss_lines(summary: dict[str, Any], systems: Sequence[str]) -> list[str]:
    """``resident MiB, <system>: <node> <MiB>, ...`` after each system's last run."""
    return [
        f"resident MiB, {system}: "
        + ", ".join(f"{n} {v}" for n, v in summary[system]["rss_mib_after_last_run"].items())
        for system in systems
    ]


def report(
    args: argparse.Namespace,
    bench: str,
    run: Callable[[], dict[str, Any]],
    render: Callable[[dict[str, Any]], str],
    plot: Callable[[dict[str, Any], Path], None],
) -> int:
    """Run a side-by-side bench, draw ``--plot``, print its report (or ``--json``); a failure
    in one line on stderr, exit 1."""
    from kraft.peer import PeerToolError
    from storage.errors import KraftError

    try:
        result = run()
    except (BenchError, KraftError, TimeoutError, PeerToolError, RuntimeError) as e:
        print(f"kraft bench {bench} --against kafka: {e}", file=sys.stderr)
        return 1
    if args.plot:
        plot(result, args.plot)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


__all__ = ["main_against", "run_against"]
