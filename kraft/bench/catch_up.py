"""Catch-up benchmark: what a follower broker pays to catch up on many partitions at once.

A `LocalCluster` of one controller and 3 brokers holds one topic of ``--partitions``
partitions (RF=3). Broker 3 is paused (SIGSTOP, as a network fault freezes its links) while
``--megabytes`` of 1 KiB records go to every partition with ``acks=1``; its ISR memberships
shrink (``replica.lag.time.max.ms`` 4 s). Then every broker's peak resident memory is reset
(``/proc/PID/clear_refs``) and broker 3 resumes; the run ends 6 s (a high-watermark checkpoint
pass) after every partition's ISR holds all 3 replicas again. Reported per broker: the resident
memory at the resume, its peak during the catch-up (``VmHWM``) and what stays at the end, the
CPU time spent, and the event-loop
callbacks that held the loop 5 ms or more (``KRAFT_SLOW_CALLBACK_MS``, `kraft.loop_watch`):
how many, and the one that took the most CPU time, with its name (its wall time would count a
pause, or another process's turn on a busy machine); and the worst lateness of the loop's stall
watch (``event.loop.stall.warn.ms`` 20), which also counts callbacks run back to back.

Usage: ``python -m kraft.bench.catch_up [--partitions 300] [--megabytes 8] [--pause-s 12]
[--json]``. Linux only (``/proc``); resetting the peak needs the processes to be this user's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kraft.bench.cpu import process_cpu_s, rss_mib
from kraft.cluster.local import LocalCluster
from kraft.loop_watch import SLOW_CALLBACK_ENV

SLOW_CALLBACK_MS = 5
CHECKPOINT_WAIT_S = 6.0
"""How long the run goes on after the catch-up: past ``replica.high.watermark.checkpoint.
interval.ms`` (5 s), so the checkpoints of the high watermarks it moved count too."""
STALL_WARN_MS = 20
TOPIC = "catch-up"
VICTIM = 3
"""The broker (1-based index) that is paused and catches up."""


@dataclass(frozen=True, slots=True)
class BrokerCost:
    broker_id: int
    role: str
    """``follower``: the broker that caught up; ``leader``: one it fetched from."""
    start_rss_mib: float
    """...at the resume; then the peak during the catch-up and what stays at its end."""
    peak_rss_mib: float
    end_rss_mib: float
    cpu_s: float
    slow_callbacks: int
    longest_callback_ms: int
    longest_callback: str
    loop_late_ms: int
    """The stall watch's worst lateness (from `STALL_WARN_MS`): what the loop's other work
    waited, however many callbacks held it (and, on a busy machine, other processes)."""


def _read(value: float | None, what: str) -> float:
    """A broker's /proc figure (`kraft.bench.cpu`), which must be known: the broker runs."""
    if value is None:
        raise LookupError(f"{what}: the broker is gone")
    return value


def _loop_events(log: Path, since_offset: int, pause_ms: int) -> tuple[int, int, str, int]:
    """The slow callbacks logged after ``since_offset`` bytes of ``log``: how many, the
    most CPU time (ms) and its name; and the stall watch's worst lateness (ms), leaving out
    the wake-up that the pause (``pause_ms``) made late."""
    count, longest, name, late = 0, 0, "", 0
    with log.open("rb") as f:
        f.seek(since_offset)
        for line in f:
            if b"slow_callback" not in line and b"event_loop_stalled" not in line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("event") == "event_loop_stalled":
                late_ms = int(event.get("late_ms", 0))
                late = late if late_ms >= pause_ms else max(late, late_ms)
                continue
            count += 1
            # NB: CPU time: a callback under way when the broker was paused took the pause
            took = int(event.get("cpu_ms", 0))
            if took > longest:
                longest, name = took, str(event.get("callback", ""))[:120]
    return count, longest, name, late


def _all_in_sync(cluster: LocalCluster) -> bool:
    topic = cluster.describe_topic(TOPIC)
    return all(len(p.isr) == 3 for p in topic.partitions)


def _wait(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.2)


def run(partitions: int, megabytes: float, pause_s: float) -> dict[str, Any]:
    from replication.clients.producer import Producer

    os.environ[SLOW_CALLBACK_ENV] = str(SLOW_CALLBACK_MS)
    broker_config = {
        "replica.lag.time.max.ms": "4000",
        "event.loop.stall.warn.ms": str(STALL_WARN_MS),
    }
    with LocalCluster(controllers=1, brokers=3, kafka=False, broker_config=broker_config) as c:
        c.wait_until_healthy(timeout=60)
        c.create_topic(TOPIC, partitions, 3, config={"min.insync.replicas": "1"}, timeout=60)
        value = b"x" * 1024
        per_partition = max(1, int(megabytes * (1 << 20) / 1024 / partitions))
        with Producer(c.bootstrap, acks=1, linger_ms=20, enable_idempotence=False) as producer:
            futures = [producer.send_batch(TOPIC, [value] * 4, partition=p) for p in range(4)]
            for future in futures:
                future.result(timeout=60)
            _wait(lambda: _all_in_sync(c), 60, "every replica in sync before the pause")
            c.pause_broker(VICTIM)
            paused_at = time.monotonic()
            futures = [
                producer.send_batch(TOPIC, [value] * per_partition, partition=p)
                for p in range(partitions)
            ]
            for future in futures:
                future.result(timeout=120)
            time.sleep(max(0.0, pause_s - (time.monotonic() - paused_at)))
        ids = [c.broker_id(i) for i in (1, 2, 3)]
        pids = {b: c.broker(b).pid or 0 for b in ids}
        logs = {b: c.broker_log(b) for b in ids}
        offsets = {b: logs[b].stat().st_size for b in ids}
        cpu = {b: _read(process_cpu_s(pids[b]), "CPU") for b in ids}
        rss = {b: _read(rss_mib(pids[b]), "VmRSS") for b in ids}
        behind = sum(len(p.isr) < 3 for p in c.describe_topic(TOPIC).partitions)
        for b in ids:
            Path(f"/proc/{pids[b]}/clear_refs").write_text("5")  # VmHWM := VmRSS
        started = time.monotonic()
        c.resume_broker(VICTIM)
        _wait(lambda: _all_in_sync(c), 180, "the paused broker back in every ISR")
        took_s = time.monotonic() - started
        time.sleep(CHECKPOINT_WAIT_S)  # a high-watermark checkpoint of the moved ones too
        costs = []
        for b in ids:
            count, longest, name, late = _loop_events(logs[b], offsets[b], int(pause_s * 900))
            costs.append(
                BrokerCost(
                    broker_id=b,
                    role="follower" if b == c.broker_id(VICTIM) else "leader",
                    start_rss_mib=rss[b],
                    peak_rss_mib=_read(rss_mib(pids[b], "VmHWM"), "VmHWM"),
                    end_rss_mib=_read(rss_mib(pids[b]), "VmRSS"),
                    cpu_s=round(_read(process_cpu_s(pids[b]), "CPU") - cpu[b], 2),
                    slow_callbacks=count,
                    longest_callback_ms=longest,
                    longest_callback=name,
                    loop_late_ms=late,
                )
            )
    return {
        "partitions": partitions,
        "megabytes": round(per_partition * partitions * 1024 / (1 << 20), 1),
        "out_of_sync": behind,
        "catch_up_s": round(took_s, 1),
        "load_average": os.getloadavg()[0],
        "brokers": [asdict(cost) for cost in costs],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=300)
    parser.add_argument("--megabytes", type=float, default=8.0)
    parser.add_argument("--pause-s", type=float, default=12.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.partitions, args.megabytes, args.pause_s)
    if args.json:
        print(json.dumps(result))
        return 0
    print(
        f"{result['partitions']} partitions ({result['out_of_sync']} out of sync), "
        f"{result['megabytes']} MiB behind: caught up in "
        f"{result['catch_up_s']} s (load average {result['load_average']:.2f})"
    )
    for cost in result["brokers"]:
        print(
            f"  broker {cost['broker_id']} ({cost['role']}): RSS {cost['start_rss_mib']} MiB, "
            f"peak {cost['peak_rss_mib']} MiB, "
            f"end {cost['end_rss_mib']} MiB, CPU {cost['cpu_s']} s, "
            f"{cost['slow_callbacks']} callbacks >= {SLOW_CALLBACK_MS} ms, longest "
            f"{cost['longest_callback_ms']} ms ({cost['longest_callback']}), loop late up to "
            f"{cost['loop_late_ms']} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
