"""``kraft bench e2e``: produce-to-consume latency at a fixed rate, like Kafka's
``EndToEndLatency`` tool (issue 15, item 5).

A producer sends ``--rate`` records/s (default 10,000; ``acks=all``, idempotent) of
``--record-size`` bytes into a fresh topic (6 partitions, RF=3, ``min.insync.replicas=2``)
for ``--seconds``, while a consumer in the same process, assigned every partition from the
end, polls them. Each value starts with its send time (``perf_counter_ns``, one clock for both
sides); a record's latency is the time its consumer saw it minus that. The figures count only
if every acknowledged record is read back (the bench checks the count).

Baseline, same run: the round trip of a one-message gRPC call to a server in another
process over 127.0.0.1 (p50/p99), the floor under any produce-then-fetch path here.

Without ``--bootstrap`` the command starts its own `LocalCluster` (3 controllers, 3 brokers).
``--against kafka`` runs the same through librdkafka on kraft and on Apache Kafka, in
alternated rounds (`kraft.bench.e2e_against`).

    kraft bench e2e [--rate 10000] [--seconds 10] [--json] [--trace DIR]
    kraft bench e2e --against kafka [--linger-ms 5,0] [--rounds 3] [--plot FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import threading
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

from kraft.arguments import ArgumentParser, non_negative_int, positive_int
from kraft.bench import BenchError, e2e_trace
from kraft.bench.grpc_ceiling import CEILING_SERVER
from kraft.bench.produce_consume import (
    PARTITIONS,
    cluster_bootstrap,
    ensure_topic,
    percentiles,
)

_STAMP = struct.Struct(">q")


def grpc_round_trip_ms(calls: int = 2000) -> dict[str, float | None]:
    """p50/p99/p99.9 of a one-message client-streaming call to a server in another process."""
    import grpc

    server = subprocess.Popen(
        [sys.executable, "-c", CEILING_SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        push = channel.stream_unary("/bench.Ceiling/Push")
        grpc.channel_ready_future(channel).result(timeout=10)
        payload = b"x" * 100
        times = []
        for i in range(calls + 100):
            start = time.perf_counter()
            push(iter([payload]))
            if i >= 100:  # warmed up
                times.append((time.perf_counter() - start) * 1000)
        channel.close()
    finally:
        assert server.stdin is not None
        server.stdin.close()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return percentiles(times)


def measure(
    bootstrap: str,
    topic: str,
    rate: int,
    seconds: float,
    size: int,
    linger_ms: int,
    trace: Path | None = None,
) -> dict[str, Any]:
    """``trace``: the directory the brokers trace into (`kraft.bench.e2e_trace`): the result
    then has the ``steps`` of a record's way."""
    from kraft import Consumer, Producer, TopicPartition

    total = max(1, int(rate * seconds))
    latencies_ns: list[int] = []
    consumed = [0]
    stop = threading.Event()
    errors: list[BaseException] = []
    clock = time.perf_counter_ns
    padding = b"x" * max(0, size - _STAMP.size)

    consumer = Consumer(bootstrap, auto_offset_reset="latest", fetch_max_wait_ms=100)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    consumer.seek_to_end(tps)
    for tp in tps:  # resolve the end offsets before the first record is sent
        consumer.position(tp)
    traced: list[tuple[int, int, int, int]] = []  # partition, offset, sent, polled
    arrived = {} if trace is None else e2e_trace.watch_consumer(consumer)

    def consume() -> None:
        unpack = _STAMP.unpack_from
        try:
            while not stop.is_set() and consumed[0] < total:
                for record in consumer.poll(timeout=0.1):
                    now = clock()
                    sent = unpack(record.value or b"\0" * 8)[0]
                    latencies_ns.append(now - sent)
                    consumed[0] += 1
                    if trace is not None:
                        traced.append((record.partition, record.offset, sent, now))
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    reader = threading.Thread(target=consume, name="e2e-consumer", daemon=True)
    reader.start()
    producer = Producer(bootstrap, acks="all", linger_ms=linger_ms)
    acked = [0]
    failed: list[BaseException] = []

    acks_ns: list[int] = []

    def on_done(sent_ns: int, future: Any) -> None:
        acks_ns.append(clock() - sent_ns)
        error = future.exception(0)
        if error is not None:
            failed.append(error)
        acked[0] += 1  # NB: callbacks run on one thread at a time per batch; the count is a figure

    try:
        producer.partitions_for(topic)
        interval_ns = 1_000_000_000 // rate
        start = clock()
        send = producer.send
        i = 0
        while i < total:
            # NB: send what is due, then sleep (which releases the GIL); spinning until the
            # next send time would starve the consumer and gRPC threads of the GIL
            due = min(total, (clock() - start) // interval_ns + 1)
            while i < due:
                now = clock()
                send(topic, _STAMP.pack(now) + padding).add_done_callback(partial(on_done, now))
                i += 1
            time.sleep(0.0005)
        sent_seconds = (clock() - start) / 1e9
        producer.flush(timeout=60)
        wait_read_back(consumed, total, errors)
    finally:
        stop.set()
        reader.join(timeout=10)
        producer.close(timeout=10)
        consumer.close()
    check_read_back(errors, failed, consumed[0], total)
    steps = {} if trace is None else {"steps": e2e_trace.breakdown(trace, traced, arrived)}
    return steps | {
        "records": total,
        "rate_target": rate,
        "rate_sent": round(total / sent_seconds, 1),
        "record_size": size,
        "linger_ms": linger_ms,
        **percentiles([n / 1e6 for n in latencies_ns]),
        # the producer's part: send to acknowledgement (acks=all: replicated to the ISR)
        "ack": percentiles([n / 1e6 for n in acks_ns]),
    }


def wait_read_back(consumed: list[int], total: int, errors: list[BaseException]) -> None:
    """Until the consumer thread has read ``total`` records (``consumed[0]``), failed, or
    60 s passed (`check_read_back` then says which)."""
    deadline = time.monotonic() + 60
    while consumed[0] < total and time.monotonic() < deadline and not errors:
        time.sleep(0.01)


def check_read_back(
    consumer_errors: list[BaseException], failed: list[Any], consumed: int, total: int
) -> None:
    """The figures of an e2e run count only if the consumer did not fail, no record failed,
    and every acknowledged record was read back.

    Raises:
        BenchError: one of them did not hold.
    """
    if consumer_errors:
        raise BenchError(f"the consumer failed: {consumer_errors[0]!r}")
    if failed:
        raise BenchError(f"{len(failed)} records failed, first: {failed[0]!r}")
    if consumed != total:
        raise BenchError(f"consumed {consumed} of {total} acknowledged records within 60 s")


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="kraft bench e2e",
        description="Produce-to-consume latency at a fixed rate (acks=all, RF=3), beside a raw "
        "gRPC round trip measured in the same run.",
    )
    parser.add_argument("--bootstrap", default=None, help="brokers (default: a local cluster)")
    parser.add_argument("--rate", type=positive_int, default=10_000, help="records/s to send")
    parser.add_argument("--seconds", type=positive_int, default=10, help="how long to send")
    parser.add_argument("--record-size", type=positive_int, default=100, help="value bytes")
    parser.add_argument(
        "--linger-ms",
        type=_lingers,
        default=None,
        help="linger.ms (default 5); with --against, a comma list run in every round (default 5,0)",
    )
    parser.add_argument(
        "--against",
        choices=["kafka"],
        help="the same load through librdkafka on kraft and on Apache Kafka (kraft peer kafka),"
        " in alternated rounds (kraft.bench.e2e_against)",
    )
    from kraft.bench.against_kafka import WARMUP_RECORDS, parse_warmup_records

    parser.add_argument(
        "--warmup-records",
        type=parse_warmup_records,
        default=dict(WARMUP_RECORDS),
        help="--against: untimed records per system before the rounds: N or SYSTEM=N,... "
        f"(default {WARMUP_RECORDS})",
    )
    parser.add_argument(
        "--rounds", type=positive_int, default=3, help="--against: rounds, systems alternated"
    )
    parser.add_argument(
        "--plot", type=Path, default=None, metavar="FILE", help="--against: write a PNG figure"
    )
    parser.add_argument(
        "--trace",
        type=Path,
        default=None,
        metavar="DIR",
        help="trace the local cluster's brokers into DIR and report where a record's time goes,"
        " step by step (kraft.bench.e2e_trace)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return parser


def _lingers(text: str) -> list[int]:
    """``--linger-ms``: one value or a comma list."""
    try:
        values = [non_negative_int(part) for part in text.split(",") if part.strip()]
    except (ValueError, argparse.ArgumentTypeError):
        values = []
    if not values:
        raise argparse.ArgumentTypeError("--linger-ms: N or N,N,... (milliseconds, >= 0)")
    return list(dict.fromkeys(values))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.against:
        from kraft.bench.e2e_against import main_against

        return main_against(args)
    if args.linger_ms is not None and len(args.linger_ms) > 1:
        print("kraft bench e2e: several --linger-ms values go with --against", file=sys.stderr)
        return 2
    linger_ms = args.linger_ms[0] if args.linger_ms else 5
    from storage.errors import KraftError

    def say(msg: str) -> None:
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    if args.trace is not None:
        if args.bootstrap:
            print(
                "kraft bench e2e: --trace traces the local cluster: no --bootstrap", file=sys.stderr
            )
            return 2
        e2e_trace.prepare(args.trace)
    topic = f"e2e-{uuid.uuid4().hex[:8]}"
    result: dict[str, Any] = {"load_average_before": [round(x, 2) for x in os.getloadavg()]}
    try:
        with cluster_bootstrap(args.bootstrap, say) as (bootstrap, _cluster):
            ensure_topic(bootstrap, topic, say)
            say(f"sending {args.rate} records/s for {args.seconds} s while consuming")
            result["e2e"] = measure(
                bootstrap, topic, args.rate, args.seconds, args.record_size, linger_ms, args.trace
            )
    except (BenchError, KraftError, TimeoutError) as e:
        print(f"kraft bench e2e: {e}", file=sys.stderr)
        return 1
    say("raw gRPC round trip")
    result["grpc_round_trip"] = grpc_round_trip_ms()
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    e2e, rt = result["e2e"], result["grpc_round_trip"]
    print(
        f"kraft bench e2e: {e2e['records']} records at {e2e['rate_sent']:,.0f}/s "
        f"(target {e2e['rate_target']:,}/s), acks=all, RF=3, {PARTITIONS} partitions, "
        f"linger.ms={e2e['linger_ms']}; load average {result['load_average_before']} -> "
        f"{result['load_average_after']}"
    )
    print(f"{'':<26}{'p50 ms':>10}{'p99 ms':>10}{'p99.9 ms':>10}")
    rows = (("produce -> consume", e2e), ("  of which send -> ack", e2e["ack"]))
    for name, f in (*rows, ("raw gRPC round trip", rt)):
        print(f"{name:<26}{f['p50_ms']:>10}{f['p99_ms']:>10}{f['p999_ms']:>10}")
    if "steps" in e2e:
        print(e2e_trace.render(e2e["steps"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
