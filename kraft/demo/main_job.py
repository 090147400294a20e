"""The main job (``make demo``): a replicated log losing a broker under load and losing nothing.

On the defaults, with nothing to configure:

1. start a `LocalCluster` of 3 controllers and 3 brokers (real processes on 127.0.0.1);
2. create topic ``demo`` (6 partitions, replication factor 3, ``min.insync.replicas=2``);
3. produce 1,000,000 records with ``acks=all`` and idempotence, each value carrying its
   sequence number, with a progress line; halfway, SIGKILL the broker that leads the most
   partitions, and narrate the failover as the controller decides it (fencing, new leaders,
   ISR shrink) and the producer lives it (retries);
4. restart the killed broker and show it catch up and rejoin every ISR;
5. consume the topic back and check every acknowledged record is there exactly once, at the
   partition and offset its acknowledgement gave;
6. read the topic in a consumer group of 3 consumer processes, kill -9 one of them right after
   it processed a batch, print the rebalance and its duration and the lag draining to 0, and
   check that the group processed every acknowledged record at least once
   (`kraft.demo.group_step`);
7. read the topic with the Spark data source (``spark``) and show records per partition and
   min/max offsets (skipped, with a message, when the data source is not importable);
8. print a summary; exit 1 if a record was lost or duplicated (or, in the group, never
   processed), or a step failed.

With ``--tls`` (``make demo TLS=1``) the cluster is mTLS on every port (`LocalCluster(tls=True)`:
a CA and a certificate per node and client under the data directory), and the clients connect
with the ``client`` certificate; the Spark step is skipped (the data source takes TLS options,
docs/spark.md, but the demo does not pass them yet). With ``--tls --authorizer`` (``make demo
AUTHORIZER=1``) every node authorizes every call as well (`LocalCluster(authorizer=True)`): the
``client`` certificate is no super user, so right after creating the topic the ``admin``
certificate grants it exactly the ACLs the demo's clients need, and prints them
(`kraft.demo.acl_step`).

Every process it starts is stopped at the end, on an error and on Ctrl-C or SIGTERM.

    python -m kraft.demo [--records N] [--no-spark] [--tls [--authorizer]] [--data-dir DIR]
                         [--summary-json PATH]
    python -m kraft.demo --storage     # the storage demo: a torn log survives recovery
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from kraft.demo import acl_step, group_step
from kraft.demo.acks import AckTracker, value_of
from kraft.demo.console import Console
from kraft.demo.report import DemoError, Summary, render_summary
from kraft.demo.verify import consume_and_verify
from kraft.demo.watch import ClientEvents, ClusterWatcher
from kraft.gc_tuning import tune_gc

if TYPE_CHECKING:
    from kraft.cluster import LocalCluster


TOPIC = "demo"
PARTITIONS = 6
REPLICATION_FACTOR = 3
MIN_INSYNC_REPLICAS = 2

PRODUCER_OPTIONS: dict[str, Any] = {
    "acks": "all",
    "enable_idempotence": True,
    "linger_ms": 20,
    "batch_size": 128 * 1024,
    "max_in_flight_requests_per_connection": 5,
}
"""Measured on 2 cores (see docs): bigger batches than Kafka's 16 KiB default matter most."""

WINDOW = 50_000
"""Records sent but not yet acknowledged, at most (Kafka bounds this with buffer.memory)."""

FAILOVER_TIMEOUT_S = 60.0
REJOIN_TIMEOUT_S = 90.0


# -- the steps ------------------------------------------------------------------------------------


def start_cluster(cluster: LocalCluster, console: Console) -> None:
    console.say(
        f"1. starting 3 controllers and 3 brokers on 127.0.0.1 (their logs: "
        f"{cluster.data_dir / 'logs'})"
    )
    cluster.start()
    cluster.wait_until_healthy(timeout=90)
    active = cluster.active_controller_id()
    controllers = ", ".join(
        f"{i}@{a}" + (" (active)" if i == active else "")
        for i, a in cluster.controller_addresses.items()
    )
    console.say(f"   controllers (Raft quorum): {controllers}")
    brokers = ", ".join(f"{i}@{a}" for i, a in cluster.broker_addresses.items())
    console.say(f"   brokers: {brokers}")


def create_topic(cluster: LocalCluster, watcher: ClusterWatcher, console: Console) -> None:
    console.say(
        f"\n2. creating topic {TOPIC!r}: {PARTITIONS} partitions, replication factor "
        f"{REPLICATION_FACTOR}, min.insync.replicas={MIN_INSYNC_REPLICAS}"
    )
    cluster.create_topic(
        TOPIC,
        PARTITIONS,
        REPLICATION_FACTOR,
        {"min.insync.replicas": str(MIN_INSYNC_REPLICAS)},
        timeout=60,
    )
    watcher.refresh()
    for index, p in sorted(watcher.partitions.items()):
        console.say(
            f"   partition {index}: leader {p.leader}, replicas {list(p.replicas)}, "
            f"ISR {list(p.isr)}"
        )


def produce(
    cluster: LocalCluster,
    watcher: ClusterWatcher,
    tracker: AckTracker,
    client_events: ClientEvents,
    summary: Summary,
    console: Console,
) -> None:
    from kraft import Producer

    total = summary.records
    console.say(
        f"\n3. producing {total:,} records (acks=all, idempotent, linger.ms="
        f"{PRODUCER_OPTIONS['linger_ms']}, batch.size={PRODUCER_OPTIONS['batch_size']}); "
        f"halfway, kill -9 the broker leading the most partitions"
    )
    kill_at = total // 2
    restart_after = kill_at + max(1, total // 5)
    state = {"killed": False, "restarted": False}

    def act() -> None:
        """Between sends: kill at the midpoint, restart once the failover is done."""
        if not state["killed"] and len(tracker.futures) >= kill_at:
            state["killed"] = True
            kill_leader(cluster, watcher, summary, console)
        elif (
            state["killed"]
            and not state["restarted"]
            and watcher.leaders_moved_at is not None
            and watcher.isr_shrunk_at is not None
            and tracker.cursor >= min(total, restart_after)
        ):
            state["restarted"] = True
            restart_victim(cluster, watcher, console)

    producer = Producer(cluster.bootstrap, **PRODUCER_OPTIONS, **cluster.client_security)
    try:
        producer.partitions_for(TOPIC)
        tracker.started = time.monotonic()
        tracker.start()
        futures = tracker.futures
        send = producer.send
        for seq in range(total):
            if seq % 1024 == 0:
                act()
                if seq >= WINDOW:
                    tracker.wait_for(seq - WINDOW, act)
            futures.append(send(TOPIC, value_of(seq)))
        act()
        tracker.wait_all(act)
        seconds = time.monotonic() - tracker.started
        if not state["restarted"]:
            # A small run can finish before the failover does: finish the story anyway.
            if watcher.wait_until("leaders_moved_at", FAILOVER_TIMEOUT_S) is None:
                raise DemoError("the partitions of the killed broker got no new leader")
            watcher.wait_until("isr_shrunk_at", FAILOVER_TIMEOUT_S)
            restart_victim(cluster, watcher, console)
    finally:
        # Everything is acknowledged by now, unless we are here on an error or Ctrl-C: then
        # do not wait for the queued records.
        producer.close(timeout=1)
    tracker.resolve()
    retries, _ = client_events.snapshot()
    summary.acknowledged = total - tracker.failed
    summary.failed = tracker.failed
    summary.produce_s = round(seconds, 3)
    summary.produce_records_per_s = round(total / seconds, 1)
    summary.producer_retries = sum(retries.values())
    console.end_progress(
        f"   produced {total:,} records in {seconds:.1f}s ({total / seconds:,.0f} records/s): "
        f"{summary.acknowledged:,} acknowledged, {tracker.failed} failed"
        + (f" {tracker.failures}" if tracker.failures else "")
        + f"; {summary.producer_retries} batch retries; longest pause in acknowledgements "
        f"{tracker.stalled_s:.1f}s"
    )


def kill_leader(
    cluster: LocalCluster, watcher: ClusterWatcher, summary: Summary, console: Console
) -> None:
    watcher.refresh()
    counts = watcher.leader_counts() or {cluster.broker_ids[0]: 0}
    victim, led = max(sorted(counts.items()), key=lambda item: item[1])  # ties: lowest id
    pid = cluster.broker(victim).pid
    summary.killed_broker, summary.killed_leader_of = victim, led
    summary.pids = sorted({*summary.pids, *cluster.pids()})
    console.event(
        f"kill -9 broker {victim} (pid {pid}), leader of {led} of {PARTITIONS} partitions"
    )
    watcher.mark_killed(victim)
    cluster.kill_broker(victim)


def restart_victim(cluster: LocalCluster, watcher: ClusterWatcher, console: Console) -> None:
    victim = watcher.victim
    assert victim is not None
    console.event(f"restarting broker {victim}: it recovers its log, then catches up")
    watcher.mark_restarted()
    cluster.start_broker(victim)


def await_rejoin(watcher: ClusterWatcher, summary: Summary, console: Console) -> None:
    console.say("\n4. waiting for the restarted broker to rejoin every ISR")
    assert watcher.restarted_at is not None and watcher.killed_at is not None
    rejoined = watcher.wait_until("rejoined_at", REJOIN_TIMEOUT_S)
    killed = watcher.killed_at

    def since_kill(at: float | None) -> float | None:
        return None if at is None else round(at - killed, 3)

    summary.fenced_after_s = since_kill(watcher.fenced_at)
    summary.failover_s = since_kill(watcher.leaders_moved_at)
    summary.isr_shrunk_after_s = since_kill(watcher.isr_shrunk_at)
    if rejoined is None:
        raise DemoError(
            f"broker {watcher.victim} did not rejoin every ISR within {REJOIN_TIMEOUT_S:.0f}s"
        )
    summary.rejoined_after_restart_s = round(rejoined - watcher.restarted_at, 3)
    console.say(
        f"   broker {watcher.victim} is back in the ISR of every partition, "
        f"{summary.rejoined_after_restart_s:.1f}s after its restart"
    )
    for index, p in sorted(watcher.partitions.items()):
        console.say(f"   partition {index}: leader {p.leader}, ISR {list(p.isr)}")


def spark_aggregate(bootstrap: str, summary: Summary, console: Console, log_dir: Path) -> None:
    """Read the topic with the ``kraft`` Spark data source; records per partition, offsets."""
    from kraft.demo import spark_step

    console.say("\n7. reading the topic with Spark (format 'kraft') into a DataFrame")
    started = time.monotonic()
    try:
        rows = spark_step.aggregate_by_partition(bootstrap, TOPIC, log_dir / "spark.log")
    except spark_step.SparkUnavailable as e:
        summary.spark = f"skipped: the kraft Spark data source is not importable ({e})"
        console.say(f"   {summary.spark}")
        return
    except Exception as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        summary.spark = f"FAILED: {first}"
        summary.errors.append(f"spark: {first}")
        console.say(f"   {summary.spark} (Spark's log: {log_dir / 'spark.log'})")
        return
    console.say(
        f"   df.groupBy('partition').agg(count, min(offset), max(offset)), "
        f"in {time.monotonic() - started:.1f}s with Spark local[2]:"
    )
    console.say(f"   {'partition':>9} {'records':>10} {'min offset':>11} {'max offset':>11}")
    for partition, records, low, high in rows:
        console.say(f"   {partition:>9} {records:>10,} {low:>11,} {high:>11,}")
    summary.spark_rows = sum(records for _, records, _, _ in rows)
    console.say(f"   {'total':>9} {summary.spark_rows:>10,}")
    if summary.spark_rows != summary.consumed:
        summary.spark = f"MISMATCH: {summary.spark_rows:,} rows, {summary.consumed:,} consumed"
        summary.errors.append(f"spark: {summary.spark}")
    else:
        summary.spark = f"{summary.spark_rows:,} rows in {len(rows)} partitions, as consumed"


# -- main ----------------------------------------------------------------------------------------


def run(args: argparse.Namespace, console: Console, data_dir: Path) -> Summary:
    from kraft.cluster import LocalCluster
    from kraft.security.acls import format_acl

    summary = Summary(records=args.records, load_average=[round(x, 2) for x in os.getloadavg()])
    client_events = ClientEvents()
    client_events.install()
    phase_started = time.monotonic()

    def phase(name: str) -> None:
        nonlocal phase_started
        now = time.monotonic()
        summary.phases_s[name] = round(now - phase_started, 3)
        phase_started = now

    console.say(
        f"kraft demo: {args.records:,} records through a 3-controller, 3-broker cluster"
        f"{' (mTLS on every port)' if args.tls else ''}"
        f"{' (and ACLs: the authorizer on every node)' if args.authorizer else ''}, one broker "
        f"killed halfway; data and "
        f"logs in {data_dir}"
    )
    cluster = LocalCluster(
        controllers=3,
        brokers=3,
        data_dir=data_dir,
        broker_config={"group.consumer.session.timeout.ms": str(group_step.SESSION_TIMEOUT_MS)},
        tls=args.tls,
        authorizer=args.authorizer,
    )
    watcher: ClusterWatcher | None = None
    tracker = AckTracker(args.records, console)
    try:
        start_cluster(cluster, console)
        phase("cluster")
        watcher = ClusterWatcher(
            cluster.controller_bootstrap, TOPIC, console, client_events, tls=cluster.tls
        )
        create_topic(cluster, watcher, console)
        if args.authorizer:
            granted = acl_step.grant(cluster, TOPIC, group_step.GROUP, console)
            summary.acls_granted = [format_acl(b) for b in granted]
        watcher.start()
        phase("topic")
        produce(cluster, watcher, tracker, client_events, summary, console)
        phase("produce")
        await_rejoin(watcher, summary, console)
        phase("rejoin")
        summary.pids = sorted({*summary.pids, *cluster.pids()})
        watcher.close()
        consume_and_verify(cluster, TOPIC, PARTITIONS, tracker, summary, console)
        phase("consume")
        group_step.run_group(
            cluster, TOPIC, PARTITIONS, tracker, summary, console, data_dir / "logs"
        )
        phase("group")
        if args.no_spark:
            summary.spark = "skipped (--no-spark)"
        elif args.tls:
            summary.spark = (
                "skipped (--tls: the demo does not run Spark over TLS yet; the data source "
                "takes kafka.security.protocol and kafka.ssl.* options, docs/spark.md)"
            )
            console.say(f"\n7. Spark: {summary.spark}")
        else:
            spark_aggregate(cluster.bootstrap, summary, console, data_dir / "logs")
            phase("spark")
    except DemoError as e:
        summary.errors.append(str(e))
    except Exception as e:  # a bug or a broken cluster: say it, keep the logs, stop it all
        traceback.print_exc()
        summary.errors.append(f"{type(e).__name__}: {e}")
    finally:
        tracker.close()
        if watcher is not None:
            watcher.close()
        summary.pids = sorted({*summary.pids, *cluster.pids()})
        cluster.close()
    return summary


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # the same clean-up as Ctrl-C


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kraft.demo",
        description="kraft's main job: 3 controllers, 3 brokers, 1,000,000 records with "
        "acks=all, a leader killed halfway, zero loss, Spark.",
        epilog="example: python -m kraft.demo --records 100000 --no-spark --tls --authorizer",
    )
    parser.add_argument("--records", type=int, default=1_000_000, help="default 1,000,000")
    parser.add_argument("--no-spark", action="store_true", help="skip the Spark step")
    parser.add_argument(
        "--tls",
        action="store_true",
        help="mTLS on every port: certificates made in the data dir, clients use them",
    )
    parser.add_argument(
        "--authorizer",
        action="store_true",
        help="with --tls: ACLs on every node; the demo's clients get exactly the ACLs they need",
    )
    parser.add_argument(
        "--data-dir", default=None, help="keep data and logs here (default: a temporary dir)"
    )
    parser.add_argument("--summary-json", default=None, help="also write the summary as JSON")
    parser.add_argument(
        "--storage",
        action="store_true",
        help="run the storage demo instead (python -m kraft.demo --storage --help)",
    )
    arguments = list(sys.argv[1:] if argv is None else argv)
    if "--storage" in arguments:
        from kraft.demo import storage_crash

        arguments.remove("--storage")
        return storage_crash.main(arguments)
    args = parser.parse_args(arguments)
    if args.records < 2:
        parser.error("--records must be at least 2")
    if args.authorizer and not args.tls:
        parser.error(
            "--authorizer needs --tls: without client certificates every caller is "
            "User:ANONYMOUS, so no principal could be granted anything"
        )
    signal.signal(signal.SIGTERM, _on_sigterm)
    tune_gc()  # the demo's clients run in this process, as the CLI's do
    console = Console()
    own_dir = args.data_dir is None
    data_dir = Path(args.data_dir or tempfile.mkdtemp(prefix="kraft-demo-"))
    started = time.monotonic()
    try:
        summary = run(args, console, data_dir)
    except KeyboardInterrupt:
        console.end_progress("\ninterrupted: every process the demo started is stopped")
        if own_dir:
            shutil.rmtree(data_dir, ignore_errors=True)
        return 130
    summary.total_s = round(time.monotonic() - started, 3)
    console.say(render_summary(summary))
    if args.summary_json:
        Path(args.summary_json).write_text(json.dumps(asdict(summary), indent=2) + "\n")
    if own_dir:
        if summary.ok:
            shutil.rmtree(data_dir, ignore_errors=True)
        else:
            console.say(f"  data and logs kept in {data_dir}")
    return 0 if summary.ok else 1


if __name__ == "__main__":
    sys.exit(main())
