"""``kraft bench group``: consumer-group rebalance time and group consume throughput.

On a `LocalCluster` (1 controller, 3 brokers):

- **rebalance after a graceful leave**: two members consume a topic with a third; the third
  closes (a leave heartbeat); the time until the other two own every partition (their
  assignment applied in ``poll``, so they are consuming them again);
- **rebalance after a kill -9**: the same with the third member a separate process killed with
  SIGKILL, so only the session timeout (``group.consumer.session.timeout.ms``) notices;
- **throughput**: records/s of one consumer process draining the topic, against three
  consumer processes in one group draining it in the same run (the same worker code), from
  the moment the group is stable (the workers hold off until then) to the last record.

p50 and max over ``--runs`` runs; the session timeout and heartbeat interval are printed with
them, since the kill -9 figure is mostly the session timeout.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kraft.arguments import ArgumentParser, positive_int
from kraft.cluster import LocalCluster
from kraft.cluster.local import LOCAL_GROUP_HEARTBEAT_INTERVAL_MS
from kraft.types import TopicPartition
from replication.clients import AdminClient, Consumer, Producer
from storage.errors import GroupIdNotFoundError

TOPIC = "bench-group"
IDLE_S = 3.0
"""A throughput worker stops after this long without a record (excluded from its time); a
rebalance victim has no ``--go`` and consumes until killed."""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def worker(bootstrap: str, group: str, go: Path | None) -> int:
    """A group member: joins; once ``go`` exists (None: at once) consumes until idle, then
    prints one JSON line: its record count and first and last batch times. Until ``go``, what
    a poll returns is put back (a seek to its first offset), so the group's partitions are all
    still there when the measurement starts."""
    count, first, last = 0, 0.0, 0.0
    gated = go is not None
    with Consumer(bootstrap, group_id=group, auto_offset_reset="earliest") as consumer:
        consumer.subscribe([TOPIC])
        while True:
            if gated and go is not None and go.exists():
                gated = False
                for tp in consumer.assignment():  # drop what was prefetched while gated
                    consumer.seek(tp, consumer.position(tp, timeout=30))
            records = consumer.poll(0.5)
            now = time.monotonic()
            if gated:
                starts: dict[TopicPartition, int] = {}
                for r in records:
                    starts.setdefault(TopicPartition(r.topic, r.partition), r.offset)
                for tp, offset in starts.items():
                    consumer.seek(tp, offset)
                continue
            if records:
                first = first or now
                last = now
                count += len(records)
            elif go is not None and count and now - last > IDLE_S:
                break
    print(json.dumps({"count": count, "first": first, "last": last}), flush=True)
    return 0


def _spawn(bootstrap: str, group: str, go: Path | None = None) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "kraft.bench.group", "--worker", bootstrap, group]
    return subprocess.Popen(
        [*argv, *(["--go", str(go)] if go is not None else [])],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _throughput(cluster: LocalCluster, group: str, members: int, work: Path) -> float:
    """Records/s of ``members`` worker processes draining the topic together: from the moment
    every one of them owns its share (the go file) to the last record any of them polled."""
    go = work / f"go-{group}"
    procs = [_spawn(cluster.bootstrap, group, go) for _ in range(members)]
    with AdminClient(cluster.bootstrap) as admin:
        deadline = time.monotonic() + 120
        while not _settled(admin, group, members):
            if time.monotonic() > deadline:
                raise TimeoutError(f"group {group} never settled with {members} members")
            time.sleep(0.2)
    started = time.monotonic()  # NB: CLOCK_MONOTONIC is one clock for every process here
    go.touch()
    reports = []
    for p in procs:
        out, _ = p.communicate(timeout=600)
        reports.append(json.loads(out.strip().splitlines()[-1]))
    total = sum(int(r["count"]) for r in reports)
    ended = max(float(r["last"]) for r in reports)
    return total / max(ended - started, 1e-6)


def _settled(admin: AdminClient, group: str, members: int) -> bool:
    try:
        d = admin.describe_group(group)
    except GroupIdNotFoundError:
        return False
    return (
        d.state == "Stable" and len(d.members) == members and all(m.assignment for m in d.members)
    )


def _owns_all(members: list[Consumer], partitions: int, timeout: float) -> float:
    """Poll ``members`` until together they own every partition; the seconds it took."""
    started = time.monotonic()
    wanted = {TopicPartition(TOPIC, p) for p in range(partitions)}
    while True:
        owned: set[TopicPartition] = set()
        for m in members:
            m.poll(0.02)
            owned |= m.assignment()
        if owned == wanted:
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"the members own {len(owned)} of {partitions} partitions")


def _rebalances(
    cluster: LocalCluster, args: argparse.Namespace, say: Any
) -> tuple[list[float], list[float]]:
    graceful: list[float] = []
    killed: list[float] = []
    stayers = [
        Consumer(cluster.bootstrap, group_id="rebalance", auto_offset_reset="latest")
        for _ in range(2)
    ]
    try:
        for c in stayers:
            c.subscribe([TOPIC])
        _owns_all(stayers, args.partitions, 60)
        for run in range(args.runs):
            leaver = Consumer(cluster.bootstrap, group_id="rebalance")
            leaver.subscribe([TOPIC])
            _wait_shared([*stayers, leaver], args.partitions)
            started = time.monotonic()
            leaver.close()
            _owns_all(stayers, args.partitions, 60)
            graceful.append(time.monotonic() - started)
            say(f"graceful leave {run + 1}: {graceful[-1]:.2f} s")
        for run in range(args.runs):
            victim = _spawn(cluster.bootstrap, "rebalance")
            _wait_shared(stayers, args.partitions, others=True)
            started = time.monotonic()
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            _owns_all(stayers, args.partitions, 120)
            killed.append(time.monotonic() - started)
            say(f"kill -9 {run + 1}: {killed[-1]:.2f} s")
    finally:
        for c in stayers:
            c.close()
    return graceful, killed


def _wait_shared(members: list[Consumer], partitions: int, *, others: bool = False) -> None:
    """Poll until every member owns a share (``others``: the polled members own some, not
    all: a third member outside this process holds the rest)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for m in members:
            m.poll(0.02)
        owned = [m.assignment() for m in members]
        total = sum(len(o) for o in owned)
        if others and 0 < total < partitions and all(owned):
            return
        if not others and total == partitions and all(owned):
            return
    raise TimeoutError("the group never settled")


def run(args: argparse.Namespace, say: Any) -> dict[str, Any]:
    session_ms = args.session_timeout_ms
    with LocalCluster(
        controllers=1,
        brokers=3,
        data_dir=args.dir,
        controller_config={"broker.session.timeout.ms": "2000"},
        broker_config={
            "broker.heartbeat.interval.ms": "250",
            "group.consumer.session.timeout.ms": str(session_ms),
        },
    ) as cluster:
        cluster.wait_until_healthy(timeout=60)
        cluster.create_topic(TOPIC, partitions=args.partitions, replication_factor=2)
        say(f"producing {args.records} records of 100 bytes")
        with Producer(cluster.bootstrap, linger_ms=20) as producer:
            value = b"x" * 100
            for i in range(args.records):
                producer.send(TOPIC, key=b"%d" % i, value=value)
            producer.flush()
        say("throughput: one consumer, then a group of three")
        work = Path(cluster.data_dir)
        single = _throughput(cluster, "one", 1, work)
        group = _throughput(cluster, "three", 3, work)
        graceful, killed = _rebalances(cluster, args, say)
    return {
        "runs": args.runs,
        "partitions": args.partitions,
        "session_timeout_ms": session_ms,
        "heartbeat_interval_ms": LOCAL_GROUP_HEARTBEAT_INTERVAL_MS,
        "rebalance_graceful_s": {"p50": percentile(graceful, 0.5), "max": max(graceful)},
        "rebalance_kill9_s": {"p50": percentile(killed, 0.5), "max": max(killed)},
        "throughput_records_per_s": {"one_consumer": single, "group_of_three": group},
    }


def render(r: dict[str, Any]) -> str:
    g, k, t = r["rebalance_graceful_s"], r["rebalance_kill9_s"], r["throughput_records_per_s"]
    ratio = t["group_of_three"] / t["one_consumer"]
    return "\n".join(
        [
            f"kraft bench group: {r['runs']} runs, {r['partitions']} partitions, session timeout "
            f"{r['session_timeout_ms']} ms, heartbeat interval {r['heartbeat_interval_ms']} ms",
            f"  rebalance after a graceful leave: p50 {g['p50']:.2f} s, max {g['max']:.2f} s",
            f"  rebalance after a kill -9:        p50 {k['p50']:.2f} s, max {k['max']:.2f} s",
            f"  consume: one consumer {t['one_consumer']:,.0f} records/s; a group of three "
            f"{t['group_of_three']:,.0f} records/s ({ratio:.2f}x)",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(
        prog="kraft bench group",
        description="Consumer-group rebalance time (graceful leave, kill -9) and the consume "
        "throughput of a group of three against one consumer.",
        epilog="example: kraft bench group --runs 10 --json",
    )
    parser.add_argument("--runs", type=positive_int, default=10, help="runs of each (default 10)")
    parser.add_argument("--partitions", type=positive_int, default=12)
    parser.add_argument("--records", type=positive_int, default=200_000)
    parser.add_argument(
        "--session-timeout-ms",
        type=positive_int,
        default=6000,
        help="group.consumer.session.timeout.ms (default 6000; Kafka's is 45000)",
    )
    parser.add_argument("--dir", type=Path, default=None, help="keep the cluster here")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--worker", nargs=2, metavar=("BOOTSTRAP", "GROUP"), help=argparse.SUPPRESS)
    parser.add_argument("--go", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker[0], args.worker[1], args.go)

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    result = run(args, say)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
