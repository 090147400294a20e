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
6. read the topic with the Spark data source (``spark``) and show records per partition and
   min/max offsets (skipped, with a message, when the data source is not importable);
7. print a summary; exit 1 if a record was lost or duplicated, or a step failed.

With ``--tls`` (``make demo TLS=1``) the cluster is mTLS on every port (`LocalCluster(tls=True)`:
a CA and a certificate per node and client under the data directory), and the clients connect
with the ``client`` certificate; the Spark step is skipped (the data source has no TLS options
yet).

Every process it starts is stopped at the end, on an error and on Ctrl-C or SIGTERM.

    python -m kraft.demo [--records N] [--no-spark] [--tls] [--data-dir DIR] [--summary-json PATH]
    python -m kraft.demo --storage     # the storage demo: a torn log survives recovery
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from array import array
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol

from kraft.demo.console import Console, bar
from kraft.demo.watch import ClientEvents, ClusterWatcher

if TYPE_CHECKING:
    from kraft.cluster import LocalCluster


class RecordFuture(Protocol):
    """What the demo uses of `replication.clients.RecordFuture` (kraft does not import the
    clients' modules: they sit above it; the `kraft` facade names them lazily)."""

    def done(self) -> bool: ...
    def result(self, timeout: float | None = None) -> Any: ...
    def exception(self, timeout: float | None = None) -> BaseException | None: ...


TOPIC = "demo"
PARTITIONS = 6
REPLICATION_FACTOR = 3
MIN_INSYNC_REPLICAS = 2
VALUE_PREFIX = b"kraft-demo "
"""Each value is ``kraft-demo <sequence number, 10 digits>``: 21 bytes, unique."""

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

ACK_TIMEOUT_S = 120.0
"""A record not acknowledged this long after it became the oldest pending one fails the demo."""

FAILOVER_TIMEOUT_S = 60.0
REJOIN_TIMEOUT_S = 90.0
CONSUME_STALL_S = 60.0


class DemoError(Exception):
    """A step did not complete (the message says which and where the logs are)."""


def value_of(seq: int) -> bytes:
    return VALUE_PREFIX + b"%010d" % seq


def seq_of(value: bytes | None) -> int:
    """The sequence number in a demo value; -1 for anything else."""
    if value is None or not value.startswith(VALUE_PREFIX):
        return -1
    try:
        return int(value[len(VALUE_PREFIX) :])
    except ValueError:
        return -1


@dataclass
class Summary:
    """What the demo measured; printed at the end and written by ``--summary-json``."""

    records: int
    acknowledged: int = 0
    failed: int = 0
    consumed: int = 0
    lost: int = 0
    duplicates: int = 0
    misplaced: int = 0
    unacknowledged_present: int = 0
    foreign: int = 0
    produce_s: float = 0.0
    produce_records_per_s: float = 0.0
    consume_s: float = 0.0
    consume_records_per_s: float = 0.0
    killed_broker: int | None = None
    killed_leader_of: int = 0
    fenced_after_s: float | None = None
    failover_s: float | None = None
    isr_shrunk_after_s: float | None = None
    producer_retries: int = 0
    rejoined_after_restart_s: float | None = None
    spark: str = "not run"
    spark_rows: int | None = None
    phases_s: dict[str, float] = field(default_factory=dict)
    total_s: float = 0.0
    load_average: list[float] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            not self.errors
            and self.lost == 0
            and self.duplicates == 0
            and self.misplaced == 0
            and self.failed == 0
        )


class AckTracker(threading.Thread):
    """Follows the futures of sent records in send order as they complete (the progress line
    and the longest pause in acknowledgements); `resolve` then reads the partition and offset
    each acknowledgement gave, or its error.

    NB: while producing, only ``done()`` is called (cheap): resolving a future costs about as
    much as sending its record, and this process's GIL is the producer's bottleneck.
    """

    def __init__(self, total: int, console: Console) -> None:
        super().__init__(name="kraft-demo-acks", daemon=True)
        self.total = total
        self.futures: list[RecordFuture] = []
        self.cursor = 0
        """Every record before this index is done (acknowledged or failed)."""
        self.partition_of = bytearray(b"\xff") * total
        """Per sequence number: the acknowledged partition, 255 if not acknowledged."""
        self.offset_of = array("q", [-1]) * total
        self.failures: dict[str, int] = {}
        self.failed = 0
        self.started = time.monotonic()
        self.stalled_s = 0.0
        """The longest time no acknowledgement arrived (the producer's view of the failover)."""
        self._console = console
        self._stopping = threading.Event()
        self._last_line = -1
        self._samples: deque[tuple[float, int]] = deque()

    def run(self) -> None:
        last_progress = time.monotonic()
        while not self._stopping.is_set():
            before = self.cursor
            futures, cursor = self.futures, self.cursor
            end = len(futures)
            while cursor < end and futures[cursor].done():
                cursor += 1
            self.cursor = cursor
            now = time.monotonic()
            if cursor != before or cursor == self.total:
                self.stalled_s = max(self.stalled_s, now - last_progress)
                last_progress = now
            self._show(now)
            if cursor == self.total:
                return
            self._stopping.wait(0.05)

    def resolve(self) -> None:
        """Read every (done) future's partition and offset, or its error; free the futures."""
        from storage.errors import KraftError

        partition_of, offset_of = self.partition_of, self.offset_of
        for seq, future in enumerate(self.futures):
            try:
                md = future.result(0)
            except KraftError as e:
                self.failed += 1
                name = type(e).__name__
                self.failures[name] = self.failures.get(name, 0) + 1
            else:
                partition_of[seq] = md.partition
                offset_of[seq] = md.offset
        self.futures = []

    def _show(self, now: float) -> None:
        done, total = self.cursor, self.total
        samples = self._samples
        samples.append((now, done))
        while len(samples) > 2 and now - samples[1][0] >= 1.0:
            samples.popleft()  # keep about one second
        then, done_then = samples[0]
        rate = (done - done_then) / (now - then) if now > then else 0.0
        text = (
            f"  produce {bar(done, total)} {100 * done // max(total, 1):3d}%  "
            f"{done:>{len(f'{total:,}')},}/{total:,} acknowledged  {rate:>9,.0f} records/s now"
        )
        tenth = 10 * done // max(total, 1)
        line = tenth != self._last_line
        self._last_line = tenth
        self._console.progress(text, line=line)

    def wait_for(self, index: int, act: Callable[[], None]) -> None:
        """Block until record ``index`` is acknowledged (or failed), calling ``act`` meanwhile.

        Raises:
            DemoError: it took longer than ``ACK_TIMEOUT_S``.
        """
        deadline = time.monotonic() + ACK_TIMEOUT_S
        while True:
            future = self.futures[index]
            if future.done():
                return
            act()
            _wait_done(future, 0.05)
            if time.monotonic() > deadline:
                raise DemoError(f"record {index} not acknowledged within {ACK_TIMEOUT_S:.0f}s")

    def wait_all(self, act: Callable[[], None]) -> None:
        """Block until every record is resolved (the thread then ends), calling ``act``."""
        deadline = time.monotonic() + ACK_TIMEOUT_S
        while self.is_alive():
            act()
            self.join(timeout=0.05)
            if time.monotonic() > deadline:
                raise DemoError(
                    f"{self.total - self.cursor} records not acknowledged within "
                    f"{ACK_TIMEOUT_S:.0f}s"
                )

    def close(self) -> None:
        self._stopping.set()
        if self.is_alive():
            self.join(timeout=5)


def _wait_done(future: RecordFuture, timeout: float) -> None:
    with contextlib.suppress(TimeoutError):
        future.exception(timeout)


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


def consume_and_verify(
    cluster: LocalCluster, tracker: AckTracker, summary: Summary, console: Console
) -> None:
    from kraft import Consumer, TopicPartition

    total = summary.records
    console.say(f"\n5. consuming {TOPIC!r} from the beginning and checking every record")
    seen = bytearray(total)
    partition_of, offset_of = tracker.partition_of, tracker.offset_of
    consumed = foreign = misplaced = duplicates = 0
    with Consumer(
        cluster.bootstrap,
        auto_offset_reset="earliest",
        max_poll_records=20_000,
        **cluster.client_security,
    ) as consumer:
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_end(tps)
        ends = {tp: consumer.position(tp, timeout=60) for tp in tps}
        consumer.seek_to_beginning(tps)
        end_total = sum(ends.values())
        started = last = time.monotonic()
        remaining = set(tps)
        while remaining:
            records = consumer.poll(timeout=1.0)
            now = time.monotonic()
            if records:
                last = now
            elif now - last > CONSUME_STALL_S:
                raise DemoError(f"no record consumed for {CONSUME_STALL_S:.0f}s")
            for r in records:
                consumed += 1
                seq = seq_of(r.value)
                if not 0 <= seq < total:
                    foreign += 1
                    continue
                if seen[seq]:
                    duplicates += 1
                else:
                    seen[seq] = 1
                    if partition_of[seq] != 255 and (
                        partition_of[seq] != r.partition or offset_of[seq] != r.offset
                    ):
                        misplaced += 1
            for tp in list(remaining):
                if consumer.position(tp) >= ends[tp]:
                    remaining.discard(tp)
            console.progress(
                f"  consume {bar(consumed, end_total)} {consumed:,}/{end_total:,} records"
            )
        seconds = time.monotonic() - started
    acked = [i for i in range(total) if partition_of[i] != 255]
    lost = sum(1 for i in acked if not seen[i])
    summary.consumed = consumed
    summary.lost = lost
    summary.duplicates = duplicates
    summary.misplaced = misplaced
    summary.foreign = foreign
    summary.unacknowledged_present = sum(
        1 for i in range(total) if partition_of[i] == 255 and seen[i]
    )
    summary.consume_s = round(seconds, 3)
    summary.consume_records_per_s = round(consumed / max(seconds, 1e-9), 1)
    console.end_progress(
        f"   consumed {consumed:,} records in {seconds:.1f}s "
        f"({summary.consume_records_per_s:,.0f} records/s), up to the high watermarks "
        f"{[ends[tp] for tp in tps]}"
    )
    console.say(
        f"   acknowledged records: {len(acked):,}; found exactly once at their acknowledged "
        f"partition and offset: {len(acked) - lost - misplaced:,}; lost: {lost}; "
        f"duplicates: {duplicates}; misplaced: {misplaced}"
    )


def spark_aggregate(bootstrap: str, summary: Summary, console: Console, log_dir: Path) -> None:
    """Read the topic with the ``kraft`` Spark data source; records per partition, offsets."""
    from kraft.demo import spark_step

    console.say("\n6. reading the topic with Spark (format 'kraft') into a DataFrame")
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


# -- the report ----------------------------------------------------------------------------------


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


def render_summary(summary: Summary) -> str:
    phases = ", ".join(f"{name} {seconds:.1f}s" for name, seconds in summary.phases_s.items())
    load = ", ".join(f"{x:.2f}" for x in summary.load_average)
    lines = [
        "",
        "summary",
        f"  records            {summary.records:,} produced with acks=all and idempotence; "
        f"{summary.acknowledged:,} acknowledged, {summary.failed} failed",
        f"  produce            {summary.produce_records_per_s:,.0f} records/s "
        f"({summary.produce_s:.1f}s, failover included)",
        f"  consume            {summary.consume_records_per_s:,.0f} records/s "
        f"({summary.consumed:,} records in {summary.consume_s:.1f}s)",
        f"  failover           broker {summary.killed_broker} (leader of "
        f"{summary.killed_leader_of} partitions) killed; fenced after "
        f"{_s(summary.fenced_after_s)}, new leaders after {_s(summary.failover_s)}, "
        f"out of every ISR after {_s(summary.isr_shrunk_after_s)}; "
        f"{summary.producer_retries} producer batch retries",
        f"  recovery           back in every ISR {_s(summary.rejoined_after_restart_s)} "
        f"after its restart",
        f"  spark              {summary.spark}",
        f"  lost = {summary.lost}",
        f"  duplicates = {summary.duplicates}",
        f"  misplaced = {summary.misplaced}",
        f"  time               {summary.total_s:.1f}s in all: {phases}",
        f"  load average       {load} (before the demo)",
    ]
    if summary.errors:
        lines += [f"  FAILED: {error}" for error in summary.errors]
    else:
        lines.append(
            "  OK: every acknowledged record was read back exactly once"
            if summary.ok
            else "  FAILED: see above"
        )
    return "\n".join(lines)


# -- main ----------------------------------------------------------------------------------------


def run(args: argparse.Namespace, console: Console, data_dir: Path) -> Summary:
    from kraft.cluster import LocalCluster

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
        f"{' (mTLS on every port)' if args.tls else ''}, one broker killed halfway; data and "
        f"logs in {data_dir}"
    )
    cluster = LocalCluster(controllers=3, brokers=3, data_dir=data_dir, tls=args.tls)
    watcher: ClusterWatcher | None = None
    tracker = AckTracker(args.records, console)
    try:
        start_cluster(cluster, console)
        phase("cluster")
        watcher = ClusterWatcher(
            cluster.controller_bootstrap, TOPIC, console, client_events, tls=cluster.tls
        )
        create_topic(cluster, watcher, console)
        watcher.start()
        phase("topic")
        produce(cluster, watcher, tracker, client_events, summary, console)
        phase("produce")
        await_rejoin(watcher, summary, console)
        phase("rejoin")
        summary.pids = sorted({*summary.pids, *cluster.pids()})
        watcher.close()
        consume_and_verify(cluster, tracker, summary, console)
        phase("consume")
        if args.no_spark:
            summary.spark = "skipped (--no-spark)"
        elif args.tls:
            summary.spark = "skipped (--tls: the Spark data source has no TLS options yet)"
            console.say(f"\n6. Spark: {summary.spark}")
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
        epilog="example: python -m kraft.demo --records 100000 --no-spark --tls",
    )
    parser.add_argument("--records", type=int, default=1_000_000, help="default 1,000,000")
    parser.add_argument("--no-spark", action="store_true", help="skip the Spark step")
    parser.add_argument(
        "--tls",
        action="store_true",
        help="mTLS on every port: certificates made in the data dir, clients use them",
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
    signal.signal(signal.SIGTERM, _on_sigterm)
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
