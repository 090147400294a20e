"""``kraft bench produce --replication-mode quorum``: the quorum-replicated figure beside the ISR
one, measured in the same run on the same cluster (issue #12).

The ISR topic (``min.insync.replicas=2``) and a quorum topic (``replication.mode=quorum``: each
partition a Raft group of its 3 replicas) get the same workload, one after the other: the
throughput runs of `produce` (same acks, batch size, linger and window) and a one-at-a-time
acks=all run (send one record, wait for its acknowledgement, send the next: the latency of a
single write with nothing to batch behind). The report adds the quorum/ISR ratios.

A quorum replica fsyncs before it acknowledges (leader and followers); an ISR replica does not
fsync at all (``flush.messages``/``flush.ms`` off by default). So the one-at-a-time run is also
made on a third topic with ``quorum.write.caching=true`` (acknowledge on a majority's receipt,
before the fsync): the gap between the two quorum figures is the fsync's share.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from kraft.bench import BenchError
from kraft.bench.cpu import _cpu_figures, cpu_time, profiled
from kraft.bench.produce_consume import _figures, ensure_topic, produce

ISR_CONFIG = {"min.insync.replicas": "2"}
QUORUM_CONFIG = {"replication.mode": "quorum"}
WRITE_CACHING_CONFIG = {**QUORUM_CONFIG, "quorum.write.caching": "true"}
MODES = ("isr", "quorum")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--replication-mode",
        choices=MODES,
        default="isr",
        help="produce: isr (default), or quorum: an ISR topic and a quorum topic "
        "(replication.mode=quorum) in the same run, side by side",
    )
    parser.add_argument(
        "--one-at-a-time",
        type=int,
        default=300,
        metavar="N",
        help="produce --replication-mode quorum: N acks=all records sent one at a time per "
        "mode, for the latency of a lone write (0: skip)",
    )


def one_at_a_time(bootstrap: str, topic: str, records: int, size: int) -> dict[str, Any]:
    """acks=all (idempotent), one record in flight: each send waits for the previous ack."""
    from kraft import Producer

    value = b"x" * size
    latency_ms: list[float] = []
    clock = time.perf_counter
    with Producer(bootstrap, acks="all", linger_ms=0) as producer:
        producer.send(topic, value, partition=0).result(timeout=30)  # metadata, connections
        start = clock()
        for i in range(records):
            t0 = clock()
            producer.send(topic, value, partition=i % 6).result(timeout=30)
            latency_ms.append((clock() - t0) * 1000.0)
        seconds = clock() - start
    return {"acks": "all", "window": 1} | _figures(records, size, seconds, latency_ms)


def produce_runs(
    args: argparse.Namespace, bootstrap: str, cluster: Any, topic: str, say: Any
) -> tuple[dict[str, dict[str, Any]], dict[str, Any] | None]:
    """The produce runs of ``args`` (the ISR topic ``topic``, plus a quorum topic beside it
    with ``--replication-mode quorum``), and the quorum/ISR comparison (None for ISR alone)."""
    quorum = args.replication_mode == "quorum"
    topics = {"isr": topic}
    if quorum:
        topics["quorum"] = f"{topic}-quorum"
    ensure_topic(bootstrap, topic, say, config=ISR_CONFIG)
    if quorum:
        ensure_topic(bootstrap, topics["quorum"], say, config=QUORUM_CONFIG)
    runs: dict[str, dict[str, Any]] = {}
    acks_modes = ["all", "1"] if args.acks == "both" else [args.acks]
    for acks in acks_modes:
        for mode, name in topics.items():
            label = f"{mode} acks={acks}" if quorum else f"produce acks={acks}"
            say(f"producing {args.records} records with acks={acks} to {name} ({mode})")
            cpu: dict[str, Any] = {}
            with profiled(f"produce-{mode}-acks-{acks}", cluster), cpu_time(cpu, cluster):
                runs[label] = produce(
                    bootstrap,
                    name,
                    args.records,
                    args.record_size,
                    acks,
                    args.window,
                    args.linger_ms,
                    args.batch_size,
                    chunk=args.send_batch,
                )
            runs[label] |= {"replication_mode": mode} | _cpu_figures(cpu, args.records, runs[label])
    if not quorum:
        return runs, None
    if args.one_at_a_time > 0:
        topics["quorum-wc"] = f"{topic}-quorum-wc"
        ensure_topic(bootstrap, topics["quorum-wc"], say, config=WRITE_CACHING_CONFIG)
        for mode, name in topics.items():
            say(f"producing {args.one_at_a_time} records one at a time (acks=all) to {name}")
            runs[f"{mode} 1-at-a-time"] = one_at_a_time(
                bootstrap, name, args.one_at_a_time, args.record_size
            ) | {"replication_mode": mode}
    return runs, compare(runs, acks_modes)


def compare(runs: dict[str, dict[str, Any]], acks_modes: list[str]) -> dict[str, Any]:
    """quorum / ISR: throughput ratio per acks, and the one-at-a-time p50 ratio."""
    out: dict[str, Any] = {}
    for acks in acks_modes:
        isr, quorum = runs[f"isr acks={acks}"], runs[f"quorum acks={acks}"]
        if not isr["records_per_s"]:
            raise BenchError(f"the ISR acks={acks} run moved nothing")
        out[f"throughput_ratio_acks_{acks}"] = round(
            quorum["records_per_s"] / isr["records_per_s"], 3
        )
    single_isr, single_quorum = runs.get("isr 1-at-a-time"), runs.get("quorum 1-at-a-time")
    if single_isr and single_quorum and single_isr["p50_ms"]:
        out["one_at_a_time_p50_ms"] = {
            "isr": single_isr["p50_ms"],
            "quorum": single_quorum["p50_ms"],
        }
        out["one_at_a_time_p50_ratio"] = round(single_quorum["p50_ms"] / single_isr["p50_ms"], 3)
        cached = runs.get("quorum-wc 1-at-a-time")
        if cached:
            out["one_at_a_time_p50_ms"]["quorum_write_caching"] = cached["p50_ms"]
    return out


def render_lines(comparison: dict[str, Any]) -> list[str]:
    """The comparison's lines under the runs' table."""
    lines = ["", "quorum vs ISR, same cluster, same run:"]
    for key, value in comparison.items():
        if key.startswith("throughput_ratio_acks_"):
            acks = key.removeprefix("throughput_ratio_acks_")
            lines.append(f"  acks={acks} throughput: quorum = {value:.2f}x ISR")
    single = comparison.get("one_at_a_time_p50_ms")
    if single:
        lines.append(
            f"  one-at-a-time acks=all p50: ISR {single['isr']:.2f} ms, quorum "
            f"{single['quorum']:.2f} ms ({comparison['one_at_a_time_p50_ratio']:.2f}x)"
        )
        if "quorum_write_caching" in single:
            lines.append(
                f"  one-at-a-time acks=all p50, quorum.write.caching=true (no fsync before the "
                f"ack, as ISR): {single['quorum_write_caching']:.2f} ms"
            )
    return lines


__all__ = ["add_arguments", "compare", "one_at_a_time", "produce_runs", "render_lines"]
