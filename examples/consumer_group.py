"""A consumer group of 3 processes shares a topic, survives a kill -9 of one of them and of the
group coordinator's broker, and processes every record at least once.

    python examples/consumer_group.py [--data-dir DIR] [--records N]

Starts a local cluster (1 controller, 3 brokers), creates ``orders`` with 12 partitions, then:

1. a producer thread writes records for the whole run;
2. three worker processes (this file with ``--worker``) join group ``billing``: each polls,
   "processes" a batch (appends it to its own file and flushes) and only then commits
   (at-least-once: a worker killed between the two leaves records that its successor
   processes again);
3. SIGKILLs one worker: its session times out and the coordinator gives its partitions to the
   other two, which resume at its last committed offsets;
4. SIGKILLs the broker that is the group's coordinator: another broker leads its
   ``__consumer_offsets`` partition, replays the group, and the workers find it;
5. stops the producer and waits until the group's committed offsets reach the log end offsets
   (lag 0, which ``kraft groups describe billing`` shows), then checks that every acknowledged
   record was processed, and counts duplicates.

A worker on its own (any cluster)::

    python examples/consumer_group.py --worker HOST:PORT billing orders processed.txt
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from kraft import AdminClient, Consumer, LocalCluster, Producer, TopicPartition
from storage.errors import GroupIdNotFoundError

TOPIC = "orders"
GROUP = "billing"
PARTITIONS = 12
WORKERS = 3


def worker(bootstrap: str, group: str, topic: str, out: Path) -> int:
    """Consume ``topic`` in ``group``: process (append ``partition offset`` lines, flushed),
    then commit; until SIGTERM."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with (
        out.open("a") as sink,
        Consumer(
            bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            client_id=f"worker-{os.getpid()}",
        ) as consumer,
    ):
        consumer.subscribe(
            [topic],
            on_assign=lambda c, ps: print(f"assigned {sorted(p.partition for p in ps)}"),
            on_revoke=lambda c, ps: print(f"revoked {sorted(p.partition for p in ps)}"),
        )
        while not stop.is_set():
            records = consumer.poll(0.5)
            if not records:
                continue
            sink.write("".join(f"{r.partition} {r.offset}\n" for r in records))
            sink.flush()
            os.fsync(sink.fileno())
            consumer.commit()  # after processing: at-least-once
    return 0


def processed(directory: Path) -> list[tuple[int, int]]:
    """Every (partition, offset) the workers processed (a torn last line is skipped)."""
    out = []
    for path in sorted(directory.glob("worker-*.txt")):
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2:
                out.append((int(parts[0]), int(parts[1])))
    return out


def members(admin: AdminClient) -> int:
    try:
        return len(admin.describe_group(GROUP).members)
    except GroupIdNotFoundError:  # before the first worker joined
        return 0


def wait_until(condition: object, timeout: float, what: str) -> None:
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"FAILED: timed out waiting until {what}")
        time.sleep(0.2)


def main(data_dir: Path | None, records: int) -> int:
    with LocalCluster(
        controllers=1,
        brokers=3,
        data_dir=data_dir,
        controller_config={"broker.session.timeout.ms": "2000"},
        broker_config={
            "broker.heartbeat.interval.ms": "250",
            "group.consumer.session.timeout.ms": "6000",
        },
    ) as cluster:
        cluster.wait_until_healthy(timeout=60)
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        work = cluster.data_dir / "work"
        work.mkdir(exist_ok=True)

        acked: list[tuple[int, int]] = []
        stop = threading.Event()

        def produce() -> None:
            with Producer(cluster.bootstrap, linger_ms=5) as producer:
                i = 0
                while not stop.is_set() and i < records:
                    futures = [
                        producer.send(TOPIC, key=b"order-%d" % n, value=b"%d" % n)
                        for n in range(i, min(i + 100, records))
                    ]
                    i += len(futures)
                    acked.extend(
                        (m.partition, m.offset) for m in (f.result(timeout=120) for f in futures)
                    )
                    time.sleep(0.2)  # a steady stream, across the two kills

        producer = threading.Thread(target=produce, name="producer")
        producer.start()
        workers = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--worker",
                    cluster.bootstrap,
                    GROUP,
                    TOPIC,
                    str(work / f"worker-{n}.txt"),
                ],
                stdout=subprocess.DEVNULL,
                stderr=(work / f"worker-{n}.log").open("w"),
            )
            for n in range(WORKERS)
        ]
        try:
            with AdminClient(cluster.bootstrap) as admin:
                wait_until(lambda: members(admin) == WORKERS, 60, "3 members")
                print(f"{WORKERS} workers share {PARTITIONS} partitions")
                wait_until(lambda: len(processed(work)) > records // 5, 60, "some progress")
                workers[0].send_signal(signal.SIGKILL)
                workers[0].wait()
                started = time.monotonic()
                print("killed a worker with SIGKILL")
                wait_until(
                    lambda: members(admin) == WORKERS - 1,
                    60,
                    "the killed worker's session expires",
                )
                print(f"its partitions moved after {time.monotonic() - started:.1f} s")
                coordinator = admin.describe_group(GROUP).coordinator
                cluster.kill_broker(coordinator)
                print(f"killed the group coordinator, broker {coordinator}, with SIGKILL")
                wait_until(
                    lambda: admin.describe_group(GROUP).coordinator != coordinator,
                    60,
                    "another broker coordinates the group",
                )
                print(f"broker {admin.describe_group(GROUP).coordinator} coordinates it now")
                producer.join(timeout=180)
                stop.set()
                ends = {
                    tp: listed.offset  # type: ignore[union-attr]
                    for tp, listed in admin.list_offsets(
                        {TopicPartition(TOPIC, p): -1 for p in range(PARTITIONS)}
                    ).items()
                }
                wait_until(
                    lambda: admin.list_group_offsets(GROUP) == ends, 120, "lag 0 (all committed)"
                )
                print("committed offsets == log end offsets: lag 0")
            describe = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "kraft.cli",
                    "groups",
                    "describe",
                    GROUP,
                    "--bootstrap",
                    cluster.bootstrap,
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            print(describe.stdout, end="")
        finally:
            stop.set()
            for w in workers:
                if w.poll() is None:
                    w.terminate()
            for w in workers:
                w.wait(timeout=30)
            producer.join(timeout=30)

        done = processed(work)
        missing = set(acked) - set(done)
        duplicates = len(done) - len(set(done))
        if missing:
            print(f"FAILED: {len(missing)} acknowledged records never processed")
            return 1
        print(
            f"all {len(acked)} acknowledged records processed at least once "
            f"({duplicates} processed twice: at-least-once after the kill)"
        )
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--records", type=int, default=6000)
    parser.add_argument("--worker", nargs=4, metavar=("BOOTSTRAP", "GROUP", "TOPIC", "OUT"))
    args = parser.parse_args()
    if args.worker:
        bootstrap, group, topic, out = args.worker
        sys.exit(worker(bootstrap, group, topic, Path(out)))
    sys.exit(main(args.data_dir, args.records))
