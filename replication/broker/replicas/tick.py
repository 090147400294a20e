"""`run_tick_loop`: the task that ticks each replica when its deadline comes.

No fixed tick: the task sleeps until the earliest `PartitionReplica.next_deadline_ms` (a produce
timeout, an AlterPartition retry, a follower's caught-up window, a producer snapshot after a
roll, a ``flush.ms`` flush) or the next high-watermark checkpoint
(``replica.high.watermark.checkpoint.interval.ms``), or until an input wakes it (each
replica's ``on_input``: a request, a response, a metadata change, an append); then it ticks the
replicas that are due. Sleeps are bounded below (`MIN_TICK_INTERVAL_MS`: no spin) and above
(`MAX_TICK_SLEEP_MS`: a missed wake costs a delay, never a hang).
"""

from __future__ import annotations

import asyncio
from typing import Any

from kraft.raft_shell.clock import clock_ms
from replication.broker.replicas.change_event import wait_any
from replication.broker.replicas.partition import PartitionReplica
from replication.broker.replicas.replica_manager import (
    MAX_TICK_SLEEP_MS,
    MIN_TICK_INTERVAL_MS,
    ReplicaManager,
)
from storage.errors import KraftError


async def run_tick_loop(replicas: ReplicaManager, checkpoint_interval_ms: int, log: Any) -> None:
    """Tick each replica of ``replicas`` when its deadline comes; checkpoint high watermarks
    every ``checkpoint_interval_ms``. Runs until cancelled."""
    next_checkpoint_ms = clock_ms() + checkpoint_interval_ms
    deadlines: dict[PartitionReplica, int | None] = {}
    wake = replicas.tick_wake
    while True:
        wake.clear()  # NB: before reading deadlines: a wake after this is not lost
        now = clock_ms()
        checkpoint = now >= next_checkpoint_ms
        if checkpoint:
            next_checkpoint_ms = now + checkpoint_interval_ms
        touched = replicas.take_touched()
        hosted = list(replicas.replicas.values())
        if len(deadlines) != len(hosted) or any(r not in deadlines for r in hosted):
            known = deadlines  # replicas came or went: forget the gone, read the new
            deadlines = {r: known.get(r) for r in hosted}
            touched.update(r for r in hosted if r not in known)
        for replica in hosted:
            if replica in touched:
                deadlines[replica] = replica.next_deadline_ms()
            deadline = deadlines[replica]
            if not checkpoint and (deadline is None or deadline > now):
                continue
            try:
                replica.tick()
                if checkpoint:
                    replica.checkpoint_high_watermark()
            except (KraftError, OSError) as e:  # pragma: no cover - keep ticking, say so
                tp = str(replica.topic_partition)
                log.error("tick_failed", topic_partition=tp, error=repr(e))
            deadlines[replica] = replica.next_deadline_ms()
        passed_ms = clock_ms()
        wake_at_ms = min(
            (d for d in deadlines.values() if d is not None), default=next_checkpoint_ms
        )
        wake_at_ms = min(wake_at_ms, next_checkpoint_ms)
        sleep_ms = min(wake_at_ms - passed_ms, MAX_TICK_SLEEP_MS)
        if sleep_ms > 0:
            # NB: a future and a timer (`wait_any`), not ``wait_for(wake.wait())``: that made
            # a task per pass, and inputs wake this loop up to every MIN_TICK_INTERVAL_MS
            await wait_any((wake,), sleep_ms / 1000)
        # NB: at most one pass per MIN_TICK_INTERVAL_MS, however often inputs wake us.
        rest_ms = MIN_TICK_INTERVAL_MS - (clock_ms() - passed_ms)
        if rest_ms > 0:
            await asyncio.sleep(rest_ms / 1000)


__all__ = ["run_tick_loop"]
