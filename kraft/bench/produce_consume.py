"""``kraft bench produce`` / ``kraft bench consume``: client throughput and latency on a real
cluster, beside the raw gRPC streaming ceiling of this machine measured in the same run.

- produce: N records of ``--record-size`` bytes (100 by default), no key (sticky
  partitioner), into a topic of 6 partitions, RF=3, ``min.insync.replicas=2``; at most
  ``--window`` records unacknowledged (a bounded buffer, as Kafka's ``buffer.memory``).
  records/s and MB/s from the first ``send`` to the last acknowledgement; latency per record
  = its acknowledgement (``add_done_callback``) minus its ``send``. ``--acks both`` (the
  default) runs acks=all (idempotent) then acks=1 (idempotence off, as Kafka requires).
  ``--replication-mode quorum`` runs the same on a quorum topic beside the ISR one
  (`kraft.bench.replication_modes`).
- consume: assign every partition, seek to the beginning, ``poll`` until N records came;
  records/s and MB/s from the first poll to the Nth record; latency = the duration of each
  ``poll()`` call that returned records. Without ``--bootstrap`` it first produces the N
  records itself (acks=all, not timed).
  ``--batch`` then reads the same records with ``Consumer.poll_batch`` (Arrow), in the same
  run (`kraft.bench.consume_batch`).
- ceiling: a subprocess gRPC server on 127.0.0.1 and one client-streaming call pushing the
  same bytes (at least 32 MiB) in ``--ceiling-message-kib`` messages (16 KiB: a batch); the
  median of 3 such calls.

Without ``--bootstrap`` the command starts its own `LocalCluster` (3 controllers, 3 brokers).

    python -m kraft.bench.produce_consume produce --records 200000 --json
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from kraft.arguments import ArgumentParser, non_negative_int, positive_int
from kraft.bench import BenchError
from kraft.bench.cpu import _cpu_figures, _thread_cpu_s, cpu_time, profiled
from kraft.bench.grpc_ceiling import grpc_ceiling
from kraft.bench.table import Column, cell, load_line, table

PARTITIONS = 6
_WINDOW_CHECK = 64
REPLICATION_FACTOR = 3


def percentiles(values_ms: list[float]) -> dict[str, float | None]:
    if not values_ms:
        return {"p50_ms": None, "p99_ms": None, "p999_ms": None}
    s = sorted(values_ms)

    def at(q: float) -> float:
        return round(s[min(len(s) - 1, int(q * len(s)))], 3)

    return {"p50_ms": at(0.50), "p99_ms": at(0.99), "p999_ms": at(0.999)}


def _figures(records: int, size: int, seconds: float, lat_ms: list[float]) -> dict[str, Any]:
    seconds = max(seconds, 1e-9)
    return {
        "records": records,
        "seconds": round(seconds, 3),
        "records_per_s": round(records / seconds, 1),
        "mb_per_s": round(records * size / seconds / 1e6, 3),
        **percentiles(lat_ms),
    }


# -- the cluster ---------------------------------------------------------------------------------


@contextlib.contextmanager
def cluster_bootstrap(bootstrap: str | None, say: Any) -> Iterator[tuple[str, Any]]:
    """The bootstrap servers, and the `LocalCluster` started when none were given."""
    if bootstrap:
        yield bootstrap, None
        return
    from kraft import LocalCluster

    say("starting a local cluster: 3 controllers, 3 brokers")
    with LocalCluster(controllers=3, brokers=3) as cluster:
        cluster.wait_until_healthy(timeout=60)
        yield cluster.bootstrap, cluster


def ensure_topic(
    bootstrap: str,
    topic: str,
    say: Any,
    *,
    config: dict[str, str] | None = None,
    security: dict[str, str] | None = None,
) -> None:
    from kraft import AdminClient
    from storage.errors import TopicAlreadyExistsError

    admin = AdminClient(bootstrap, **(security or {}))
    try:
        try:
            admin.create_topic(
                topic,
                partitions=PARTITIONS,
                replication_factor=REPLICATION_FACTOR,
                config={"min.insync.replicas": "2"} if config is None else config,
            )
            say(f"created topic {topic}: {PARTITIONS} partitions, RF={REPLICATION_FACTOR}")
        except TopicAlreadyExistsError:
            say(f"topic {topic} exists")
        admin.wait_for_leaders(topic, timeout=30)
    finally:
        admin.close()


# -- produce / consume ---------------------------------------------------------------------------


def _below(progress: list[int], floor: int) -> bool:
    return progress[0] > floor


def produce(
    bootstrap: str,
    topic: str,
    records: int,
    size: int,
    acks: str,
    window: int,
    linger_ms: int,
    batch_size: int = 16384,
    network: Any = None,
    chunk: int = 0,
    security: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``chunk`` > 0: `Producer.send_batch` of ``chunk`` records at a time (one future and
    callback per call; each record's latency is its call's), else ``send`` per record.
    ``security``: the client's TLS settings (kafka-python's names)."""
    from kraft import Producer

    options: dict[str, Any] = {"acks": acks, "linger_ms": linger_ms, "batch_size": batch_size}
    options |= security or {}
    if network is not None:
        options["network"] = network
    if acks != "all":
        options["enable_idempotence"] = False
    value = b"x" * size
    sent_at = [0.0] * records
    latency_ms = [0.0] * records
    done = threading.Event()
    # NB: the harness must cost far less per record than the producer (the budget at 250k
    # records/s is 4 µs): no lock or semaphore per record. `next()` on a count is atomic
    # under the GIL; the window is checked every _WINDOW_CHECK records. A full window blocks
    # (as Kafka's tool blocks in send() on a full buffer.memory) until the callback of the
    # record it waits for sets `resume`: polling it cost the sending thread a sleep and a
    # GIL hand-off every 0.2 ms while the window was full (0.3-0.4 µs per record at 30 ms
    # acknowledgements, most of it in the window).
    acked = itertools.count(1)
    progress = [0]  # records acknowledged (approximately: a racing callback may lag it)
    resume = threading.Event()
    wake_at = [records]  # the callback that acknowledges this many sets `resume` (and resets it)
    errors: list[BaseException] = []
    clock = time.perf_counter

    producer = Producer(bootstrap, **options)
    try:
        producer.partitions_for(topic)  # learn the metadata before the clock starts
        warm = producer.send(topic, value)  # and the producer id, connections
        warm.result(timeout=30)
        requests_before = getattr(producer, "produce_requests_sent", 0)
        batches_before = getattr(producer, "produce_batches_sent", 0)

        def on_done(i: int, future: Any) -> None:
            latency_ms[i] = (clock() - sent_at[i]) * 1000.0
            error = future.exception(0)
            if error is not None:
                errors.append(error)
            n = next(acked)
            progress[0] = n
            if n >= wake_at[0]:  # NB: one compare per record, as `n == records` was
                wake_at[0] = records
                resume.set()
                if n == records:
                    done.set()

        window_open = threading.Condition()  # send_batch mode: an acknowledgement came

        def on_chunk_done(i: int, n: int, future: Any) -> None:
            now = clock()
            for j in range(i, i + n):
                latency_ms[j] = (now - sent_at[j]) * 1000.0
            error = future.exception(0)
            if error is not None:
                errors.append(error)
            for _ in range(n):
                last = next(acked)
            progress[0] = last
            with window_open:  # per call, not per record: a condition costs nothing here
                window_open.notify()
            if last == records:
                done.set()

        send = producer.send
        start = clock()
        if chunk:
            values = [value] * chunk
            for i in range(0, records, chunk):
                if i - progress[0] >= window:  # NB: waits without polling (its CPU counted)
                    with window_open:
                        window_open.wait_for(partial(_below, progress, i - window), timeout=60)
                n = min(chunk, records - i)
                sent_at[i : i + n] = [clock()] * n
                future = producer.send_batch(topic, values if n == chunk else values[:n])
                future.add_done_callback(partial(on_chunk_done, i, n))
        else:
            for i in range(records):
                if not i % _WINDOW_CHECK:
                    while i - progress[0] >= window:  # NB: waits without polling
                        resume.clear()
                        wake_at[0] = i - window + 1
                        if i - progress[0] >= window:  # not acknowledged meanwhile
                            resume.wait(1.0)
                        wake_at[0] = records
                sent_at[i] = clock()  # then send(record, callback), as Kafka's tool does
                send(topic, value, callback=partial(on_done, i))
        producer.flush()
        if not done.wait(60):
            raise BenchError(f"only {progress[0]} of {records} records acknowledged")
        seconds = clock() - start
        requests = getattr(producer, "produce_requests_sent", 0) - requests_before
        batches = getattr(producer, "produce_batches_sent", 0) - batches_before
        threads = _thread_cpu_s()  # before close: the sender and gRPC threads end with it
    finally:
        producer.close(timeout=10)
    state = {"errors": len(errors), "first_error": repr(errors[0]) if errors else ""}
    if state["errors"]:
        raise BenchError(f"{state['errors']} records failed, first: {state['first_error']}")
    return {
        "acks": acks,
        "api": f"send_batch({chunk})" if chunk else "send",
        "window": window,
        "linger_ms": linger_ms,
        "batch_size": batch_size,
        "produce_requests": requests,
        "_threads_at_end": threads,
        "batches_per_request": round(batches / requests, 2) if requests else None,
    } | _figures(records, size, seconds, latency_ms)


def poll_until(records: int, poll: Callable[[], list[bytes | None]]) -> dict[str, Any]:
    """Call ``poll`` (one poll of a consumer: the values it returned) until ``records`` came:
    records/s and MB/s from the first poll to the last record, and the duration of each poll
    that returned records (p50/p99/p99.9 ms); `BenchError` if 120 s pass without them."""
    got = payload = 0
    polls_ms: list[float] = []
    clock = time.perf_counter
    start = clock()
    deadline = time.monotonic() + 120
    while got < records:
        t0 = clock()
        values = poll()
        if values:
            polls_ms.append((clock() - t0) * 1000.0)
            got += len(values)
            payload += sum(len(v or b"") for v in values)
        elif time.monotonic() > deadline:
            raise BenchError(f"consumed {got} of {records} records within 120 s")
    seconds = clock() - start
    out = _figures(got, 1, seconds, polls_ms)
    out["mb_per_s"] = round(payload / max(seconds, 1e-9) / 1e6, 3)
    size = round(payload / got, 1) if got else 0.0
    return out | {"polls": len(polls_ms), "value_bytes": payload, "record_size": size}


def consume(
    bootstrap: str,
    topic: str,
    records: int,
    max_poll_records: int,
    security: dict[str, str] | None = None,
    *,
    fetch_max_wait_ms: int = 500,
) -> dict[str, Any]:
    from kraft import Consumer, TopicPartition

    consumer = Consumer(
        bootstrap,
        auto_offset_reset="earliest",
        max_poll_records=max_poll_records,
        fetch_max_wait_ms=fetch_max_wait_ms,
        **(security or {}),
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(tps)
        out = poll_until(records, lambda: [r.value for r in consumer.poll(timeout=1.0)])
        threads = _thread_cpu_s()  # before close: its threads end with it
    finally:
        consumer.close()
    out["_threads_at_end"] = threads
    return out


# -- report --------------------------------------------------------------------------------------


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 4) if a is not None and b else None


def render(result: dict[str, Any]) -> str:
    ceiling = result["grpc_ceiling"]
    lines = [
        f"kraft bench {result['bench']}: {result['records']} records of {result['record_size']} B,"
        f" topic {result['topic']} ({PARTITIONS} partitions, RF={REPLICATION_FACTOR}),"
        f" cluster: {result['cluster']}",
        load_line(result),
        "",
        *table(
            [
                Column("run", 22),
                Column("records/s", 12, ",.0f"),
                Column("MB/s", 10, ".2f"),
                Column("p50 ms", 10, ".2f"),
                Column("p99 ms", 10, ".2f"),
                Column("p99.9 ms", 10, ".2f"),
                Column("vs ceiling", 12, ".1%"),
                Column("client µs/rec", 15, ".1f"),
                Column("brokers µs/rec", 16, ".1f"),
            ],
            [
                [name]
                + [run[key] for key in ("records_per_s", "mb_per_s", "p50_ms", "p99_ms", "p999_ms")]
                + [_ratio(run["mb_per_s"], ceiling["mb_per_s"])]
                + [run.get("client_cpu_us_per_record"), run.get("brokers_cpu_us_per_record")]
                for name, run in result["runs"].items()
            ],
        ),
    ]
    lines.append(
        f"{'raw gRPC stream':<22}"
        f"{cell(ceiling['mb_per_s'] * 1e6 / result['record_size'], ',.0f'):>12}"
        f"{cell(ceiling['mb_per_s'], '.2f'):>10}{'':>30}{'100.0%':>12}"
    )
    lines.append(
        f"  (ceiling: one client-streaming call, {ceiling['message_bytes'] // 1024} KiB messages,"
        f" {ceiling['messages_per_s']:,.0f} msgs/s, server in another process; its records/s ="
        f" MB/s / record size)"
    )
    lines.append(
        "  (µs/rec: CPU time per record during the run, of the client process (all threads) and"
        " of the three brokers together; steadier than records/s on a shared machine)"
    )
    for name, run in result["runs"].items():
        threads = run.get("client_threads_cpu_us_per_record")
        if threads:
            split = ", ".join(f"{k} {v}" for k, v in threads.items())
            lines.append(f"  ({name}: client µs/rec by thread: {split})")
    for name, run in result["runs"].items():
        if run.get("produce_requests"):
            lines.append(
                f"  ({name}: {run['produce_requests']:,} Produce requests,"
                f" {run['batches_per_request']} batches per request)"
            )
    if result["bench"] == "consume":
        lines.append(
            "  (consume latency: the duration of each poll() / poll_batch() call that returned"
            " records)"
        )
    else:
        lines.append(
            "  (produce latency: per record, acknowledgement callback minus send; it includes"
            f" the wait behind up to --window={result['window']} unacknowledged records)"
        )
    if result.get("comparison"):
        from kraft.bench.replication_modes import render_lines

        lines.extend(render_lines(result["comparison"]))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> dict[str, Any]:
    def say(msg: str) -> None:
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    topic = args.topic or f"bench-{uuid.uuid4().hex[:8]}"
    result: dict[str, Any] = {
        "bench": args.bench,
        "topic": topic,
        "records": args.records,
        "record_size": args.record_size,
        "window": args.window,
        "partitions": PARTITIONS,
        "replication_factor": REPLICATION_FACTOR,
        "replication_mode": getattr(args, "replication_mode", "isr"),
        "cluster": args.bootstrap or "local: 3 controllers, 3 brokers",
        "load_average": {"before": [round(x, 2) for x in os.getloadavg()]},
    }
    runs: dict[str, dict[str, Any]] = {}
    with cluster_bootstrap(args.bootstrap, say) as (bootstrap, cluster):
        if args.bench == "produce":
            from kraft.bench.replication_modes import produce_runs

            produced, result["comparison"] = produce_runs(args, bootstrap, cluster, topic, say)
            runs |= produced
        else:
            if args.bootstrap is None:
                ensure_topic(bootstrap, topic, say)
                say(f"filling {topic} with {args.records} records (acks=all, not timed)")
                produce(bootstrap, topic, args.records, args.record_size, "all", 20_000, 5)
            say(f"consuming {args.records} records")
            cpu: dict[str, Any] = {}
            with profiled("consume", cluster), cpu_time(cpu, cluster):
                runs["consume"] = consume(
                    bootstrap,
                    topic,
                    args.records,
                    args.max_poll_records,
                    fetch_max_wait_ms=args.fetch_max_wait_ms,
                )
            runs["consume"] |= _cpu_figures(cpu, args.records, runs["consume"])
            if args.batch:  # poll_batch over the same records, in the same run
                from kraft.bench.consume_batch import consume_arrow, import_arrow

                import_arrow()  # NB: ~1 s of imports, not a cost per record: before the timing
                say(f"consuming {args.records} records with poll_batch")
                cpu = {}
                with profiled("consume-batch", cluster), cpu_time(cpu, cluster):
                    arrow = consume_arrow(
                        bootstrap,
                        topic,
                        args.records,
                        args.max_poll_records,
                        fetch_max_wait_ms=args.fetch_max_wait_ms,
                    )
                runs["consume poll_batch"] = arrow | _cpu_figures(cpu, args.records, arrow)
            result["record_size"] = runs["consume"]["record_size"] or args.record_size
    say(f"raw gRPC ceiling: {args.ceiling_message_kib} KiB messages")
    ceiling = grpc_ceiling(args.records * args.record_size, args.ceiling_message_kib * 1024)
    result["load_average"]["after"] = [round(x, 2) for x in os.getloadavg()]
    result["grpc_ceiling"] = ceiling
    for r in runs.values():
        r["ratio_to_ceiling"] = _ratio(r["mb_per_s"], ceiling["mb_per_s"])
    result["runs"] = runs
    first = next(iter(runs.values()))  # the headline figures: acks=all, or the consume run
    for key in ("records_per_s", "mb_per_s", "p50_ms", "p99_ms", "p999_ms"):
        result[key] = first[key]
    result["ceiling_mb_per_s"] = ceiling["mb_per_s"]
    result["ratio_to_ceiling"] = first["ratio_to_ceiling"]
    return result


def build_parser(bench: str | None = None) -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="kraft bench produce" if bench is None else f"kraft bench {bench}",
        description="Producer or consumer throughput and latency (6 partitions, RF=3), "
        "beside the raw gRPC streaming ceiling measured in the same run.",
    )
    if bench is None:
        # send: the producer alone against a stub network (no cluster, no gRPC): CPU per record
        parser.add_argument("bench", choices=["produce", "consume", "send"])
    parser.add_argument(
        "--bootstrap", default=None, help="brokers host:port,... (default: start a local cluster)"
    )
    parser.add_argument("--topic", default=None, help="topic (default: a fresh bench-* topic)")
    parser.add_argument("--records", type=positive_int, default=200_000, help="records to move")
    parser.add_argument(
        "--record-size", type=positive_int, default=100, help="value bytes per record"
    )
    parser.add_argument(
        "--acks",
        choices=["all", "1", "both"],
        default="both",
        help="produce: acks=all, acks=1, or both runs (default)",
    )
    parser.add_argument(
        "--window",
        type=positive_int,
        default=20_000,
        help="produce: records unacknowledged at most",
    )
    parser.add_argument("--linger-ms", type=non_negative_int, default=5, help="produce: linger.ms")
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=16384,
        help="produce: batch.size (Kafka's default)",
    )
    parser.add_argument(
        "--send-batch",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="produce: Producer.send_batch of N records per call instead of send() per record",
    )
    parser.add_argument(
        "--max-poll-records", type=positive_int, default=5000, help="consume: max.poll.records"
    )
    parser.add_argument(
        "--batch",
        action="store_true",
        help="consume: also read the same records with Consumer.poll_batch (Arrow)",
    )
    parser.add_argument(
        "--fetch-max-wait-ms",
        type=positive_int,
        default=500,
        help="consume: fetch.max.wait.ms (a long one shows a Fetch that waits out its long poll)",
    )
    parser.add_argument(
        "--ceiling-message-kib", type=positive_int, default=16, help="gRPC ceiling message size"
    )
    from kraft.bench.replication_modes import add_arguments

    add_arguments(parser)
    parser.add_argument(
        "--tls",
        action="store_true",
        help="mTLS against plaintext in the same run: two local clusters, runs alternated "
        "(kraft.bench.tls_overhead)",
    )
    parser.add_argument(
        "--metrics",
        action="store_true",
        help="produce: Prometheus endpoints on against off in the same run, scraped every "
        "--scrape-interval s (kraft.bench.metrics_overhead)",
    )
    parser.add_argument(
        "--scrape-interval", type=float, default=1.0, help="--metrics: seconds between scrapes"
    )
    parser.add_argument(
        "--against",
        choices=["kafka"],
        help="the same load on Apache Kafka (kraft peer kafka) in the same run, runs "
        "alternated (kraft.bench.against_kafka)",
    )
    from kraft.bench.against_kafka import WARMUP_RECORDS, parse_warmup_records
    from kraft.bench.kafka_clients import parse_clients

    parser.add_argument(
        "--client",
        type=parse_clients,
        default=["kraft"],
        help="kraft (gRPC), confluent-kafka or kafka-python (Kafka listener), or a comma list "
        "(kraft.bench.kafka_clients); with --against kafka one, driving both systems",
    )
    parser.add_argument(
        "--warmup-records",
        type=parse_warmup_records,
        default=dict(WARMUP_RECORDS),
        help="--against: untimed records at least per system before the timed runs: N or "
        f"SYSTEM=N,... (default {WARMUP_RECORDS})",
    )
    parser.add_argument(
        "--warmup-s",
        type=float,
        default=120.0,
        help="--against: past --warmup-records, untimed runs until the nodes' CPU per record "
        "settles, for at most this long from the start",
    )
    parser.add_argument(
        "--rounds",
        type=positive_int,
        default=3,
        help="--tls, --metrics, --against: runs of each, alternated",
    )
    parser.add_argument(
        "--plot", type=Path, default=None, metavar="FILE", help="--against: write a PNG figure"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return parser


def main(argv: list[str] | None = None, bench: str | None = None) -> int:
    args = build_parser(bench).parse_args(argv)
    if bench is not None:
        args.bench = bench
    if args.metrics:
        from kraft.bench.metrics_overhead import main_metrics

        return main_metrics(args)
    if args.tls:
        from kraft.bench.tls_overhead import main_tls

        return main_tls(args)
    if args.against:
        from kraft.bench.against_kafka import main_against

        return main_against(args)
    if args.client != ["kraft"] and args.bench != "send":
        from kraft.bench.kafka_clients import main_clients

        return main_clients(args)
    if args.bench == "consume" and args.bootstrap and not args.topic:
        print("kraft bench consume: --bootstrap needs --topic (with N records)", file=sys.stderr)
        return 2
    from storage.errors import KraftError

    if args.bench == "send":
        modes = ["all", "1"] if args.acks == "both" else [args.acks]
        from kraft.bench.send_micro import send_micro

        runs = {
            f"send acks={acks}": send_micro(
                args.records,
                args.record_size,
                acks,
                args.window,
                args.linger_ms,
                args.batch_size,
                args.send_batch,
            )
            for acks in modes
        }
        if args.json:
            print(json.dumps(runs, indent=2))
        for name, r in runs.items():
            if not args.json:
                print(
                    f"{name}: {r['records_per_s']:,.0f} records/s, calling thread"
                    f" {r['calling_thread_cpu_us_per_record']} µs/record, process"
                    f" {r['client_cpu_us_per_record']} µs/record,"
                    f" {r['batches_per_request']} batches per Produce (stub network)"
                )
        return 0
    try:
        result = run(args)
    except (BenchError, KraftError, TimeoutError) as e:
        print(f"kraft bench {args.bench}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


def main_produce(argv: list[str] | None = None) -> int:
    return main(argv, "produce")


def main_consume(argv: list[str] | None = None) -> int:
    return main(argv, "consume")


if __name__ == "__main__":
    sys.exit(main())
