"""`run_tick_loop`: the task that ticks each replica when its deadline comes; and
`checkpoint_pass`, the periodic high-watermark checkpoint of every replica.

No fixed tick: the task sleeps until the earliest `PartitionReplica.next_deadline_ms` (a produce
timeout, an AlterPartition retry, a follower's caught-up window, a producer snapshot after a
roll, a ``flush.ms`` flush), or until an input wakes it (each replica's ``on_input``: a
request, a response, a metadata change, an append); then it ticks the replicas that are due,
yielding the loop between slices of them (`LoopSlice`: after a stall, all are due at once).
Sleeps are bounded below (`MIN_TICK_INTERVAL_MS`: no spin) and above (`MAX_TICK_SLEEP_MS`: a
missed wake costs a delay, never a hang).

Every ``replica.high.watermark.checkpoint.interval.ms`` (5 s) another task writes each replica's
high watermark that moved (Kafka's ``checkpointHighWatermarks``, on its scheduler). A checkpoint
costs two fsyncs; written one after another on the loop, those of 1,000 replicas held it for
hundreds of milliseconds after a catch-up had moved them all. `checkpoint_pass` writes them in
slices of `CHECKPOINT_SLICE` replicas, each slice's together on the checkpoint writers'
threads (`storage.checkpoint.CheckpointBatch`), and yields the loop between slices.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Final

from kraft.raft_shell.clock import clock_ms
from replication.broker.loop_slice import LoopSlice
from replication.broker.replicas.change_event import wait_any
from replication.broker.replicas.partition import PartitionReplica
from replication.broker.replicas.replica_manager import (
    MAX_TICK_SLEEP_MS,
    MIN_TICK_INTERVAL_MS,
    ReplicaManager,
)
from storage.checkpoint import CHECKPOINT_WRITERS, CheckpointBatch
from storage.errors import KraftError

CHECKPOINT_SLICE: Final = 2 * CHECKPOINT_WRITERS
"""Replicas whose high-watermark checkpoints one loop turn writes at most: two rounds of the
writers' threads, a few milliseconds on a quiet disk."""


async def run_tick_loop(replicas: ReplicaManager, log: Any) -> None:
    """Tick each replica of ``replicas`` when its deadline comes. Runs until cancelled."""
    deadlines: dict[PartitionReplica, int | None] = {}
    wake = replicas.tick_wake
    while True:
        wake.clear()  # NB: before reading deadlines: a wake after this is not lost
        now = clock_ms()
        touched = replicas.take_touched()
        hosted = list(replicas.replicas.values())
        if len(deadlines) != len(hosted) or any(r not in deadlines for r in hosted):
            known = deadlines  # replicas came or went: forget the gone, read the new
            deadlines = {r: known.get(r) for r in hosted}
            touched.update(r for r in hosted if r not in known)
        cut = LoopSlice()
        for replica in hosted:
            if replica in touched:
                deadlines[replica] = replica.next_deadline_ms()
            deadline = deadlines[replica]
            if deadline is None or deadline > now:
                continue
            # NB: a pass after a stall (a SIGSTOP, a long GC) finds every replica due: it
            # yields the loop between slices of them, as the periodic passes do, and skips a
            # replica retired meanwhile
            await cut.turn()
            if replicas.replicas.get(replica.topic_partition) is not replica:
                continue
            try:
                replica.tick()
            except (KraftError, OSError) as e:  # pragma: no cover - keep ticking, say so
                tp = str(replica.topic_partition)
                log.error("tick_failed", topic_partition=tp, error=repr(e))
            deadlines[replica] = replica.next_deadline_ms()
        passed_ms = clock_ms()
        wake_at_ms = min(
            (d for d in deadlines.values() if d is not None), default=passed_ms + MAX_TICK_SLEEP_MS
        )
        sleep_ms = min(wake_at_ms - passed_ms, MAX_TICK_SLEEP_MS)
        if sleep_ms > 0:
            # NB: a future and a timer (`wait_any`), not ``wait_for(wake.wait())``: that made
            # a task per pass, and inputs wake this loop up to every MIN_TICK_INTERVAL_MS
            await wait_any((wake,), sleep_ms / 1000)
        # NB: at most one pass per MIN_TICK_INTERVAL_MS, however often inputs wake us.
        rest_ms = MIN_TICK_INTERVAL_MS - (clock_ms() - passed_ms)
        if rest_ms > 0:
            await asyncio.sleep(rest_ms / 1000)


async def checkpoint_pass(replicas: Sequence[PartitionReplica], log: Any) -> int:
    """Write the high watermark of each of ``replicas`` that moved since its last checkpoint
    (durable on return), `CHECKPOINT_SLICE` replicas per loop turn; the number written. A
    replica whose write failed goes offline, as in the write itself."""
    written = 0
    for start in range(0, len(replicas), CHECKPOINT_SLICE):
        if start:
            await asyncio.sleep(0)
        chunk = replicas[start : start + CHECKPOINT_SLICE]
        batch = CheckpointBatch()
        with batch.collecting():
            for replica in chunk:
                try:
                    replica.checkpoint_high_watermark()  # NB: a closed or offline one: none
                except (KraftError, OSError) as e:  # pragma: no cover - keep going, say so
                    tp = str(replica.topic_partition)
                    log.error("checkpoint_failed", topic_partition=tp, error=repr(e))
        written += len(batch)
        by_directory = {replica.directory: replica for replica in chunk}
        for path, error in batch.flush():
            failed = by_directory.get(path.parent)
            if failed is not None:
                failed.go_offline(error)
    return written


__all__ = ["CHECKPOINT_SLICE", "checkpoint_pass", "run_tick_loop"]
