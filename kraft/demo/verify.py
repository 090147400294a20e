"""The main job's read-back (step 5): consume the topic from the beginning with a plain
(assigned) consumer and check every acknowledged record is there exactly once, at the partition
and offset its acknowledgement gave."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from kraft.demo.acks import AckTracker, seq_of
from kraft.demo.console import Console, bar
from kraft.demo.report import DemoError, Summary

if TYPE_CHECKING:
    from kraft.cluster import LocalCluster

CONSUME_STALL_S = 60.0


def consume_and_verify(
    cluster: LocalCluster,
    topic: str,
    partitions: int,
    tracker: AckTracker,
    summary: Summary,
    console: Console,
) -> None:
    from kraft import Consumer, TopicPartition

    total = summary.records
    console.say(f"\n5. consuming {topic!r} from the beginning and checking every record")
    seen = bytearray(total)
    partition_of, offset_of = tracker.partition_of, tracker.offset_of
    consumed = foreign = misplaced = duplicates = 0
    with Consumer(
        cluster.bootstrap,
        auto_offset_reset="earliest",
        max_poll_records=20_000,
        **cluster.client_security,
    ) as consumer:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
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


__all__ = ["consume_and_verify"]
