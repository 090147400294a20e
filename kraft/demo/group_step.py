"""The main job's group step: three consumer processes read the topic in one consumer group
(KIP-848), one is killed with SIGKILL, the other two take over its partitions, the lag drains.

Each consumer is a process (`kraft.demo.group_worker`). It polls, *processes* what it got
by reporting the offsets to the demo (one JSON line on stdout, flushed), and only then commits:
at-least-once. The demo reads those lines as they come, so it prints the assignment each
member itself sees, and it knows every record the group processed. A member holds off until
the whole group owns its share (the ``go`` file), so the three start together.

The kill: once a third of the records are processed, the demo SIGKILLs consumer 1 right after
it reports a processed batch, racing the commit that follows it (the worst moment for
at-least-once: if the kill wins, that batch is processed again).
Nothing tells the coordinator; it notices when the member's session expires
(``group.consumer.session.timeout.ms``, `SESSION_TIMEOUT_MS` in the demo's cluster) and gives
its partitions to the others. The rebalance time printed is from the kill until the
survivors' own callbacks say they own every partition.

What the killed consumer had processed but not yet committed is processed again by its
successor, which starts at the last committed offset: the duplicates at-least-once allows.
The step fails if an acknowledged record was never processed by the group.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from kraft.cluster.process import PARENT_PID_ENV
from kraft.demo.console import Console, bar
from kraft.demo.group_worker import GROUP, MAX_POLL_RECORDS
from kraft.demo.report import DemoError, Summary

if TYPE_CHECKING:
    from kraft.cluster import LocalCluster
    from kraft.demo.acks import AckTracker

CONSUMERS = 3
SESSION_TIMEOUT_MS = 3_000
"""``group.consumer.session.timeout.ms`` of the demo's brokers (Kafka's default is 45 s): the
time a killed member keeps its partitions, so most of the rebalance time after a kill."""
GROUP_TIMEOUT_S = 90.0
"""The step fails if the group has not settled, rebalanced and drained within this."""
LAG_EVERY_S = 0.5
KILL_ANYWAY_S = 2.0
"""The victim is killed right after it reports a processed batch (before it commits), or after
this long without one."""


@dataclass
class _Member:
    index: int
    process: subprocess.Popen[str]
    owned: set[int] = field(default_factory=set)
    killed: bool = False


class _Group:
    """The members' reports, read by one thread per member: what each owns, and how many
    times each (partition, offset) was processed."""

    def __init__(self, ends: Sequence[int], console: Console) -> None:
        self.ends = list(ends)
        self.counts = [bytearray(end) for end in ends]
        self.processed = 0
        self.members: list[_Member] = []
        self.lock = threading.Lock()
        self.victim: _Member | None = None
        """Armed: SIGKILL this member as soon as it reports a processed batch."""
        self.killed_at: float | None = None
        self.killed_batch = 0
        self.quiet = False
        """Done: the members' leaving is not part of the story."""
        self._console = console

    def read(self, member: _Member, stdout: IO[str]) -> None:
        for line in stdout:
            try:
                event = json.loads(line)
            except ValueError:  # a line torn by the kill
                continue
            name = event.get("e")
            with self.lock:
                if name == "processed":
                    # NB: counted even from a killed member: a line in the pipe was written
                    # before the SIGKILL landed, and the member may have processed (and
                    # committed) a further poll between the line that armed the kill and the
                    # kill itself, so its next owner rightly starts after it.
                    for partition, first, last, count in event["r"]:
                        self._count(partition, first, last, count)
                    if self.victim is member:  # processed, not yet committed: kill it now
                        self.kill_locked(sum(r[3] for r in event["r"]))
                    continue
                if member.killed:
                    continue
                partitions = sorted(event.get("p", ()))
                if name == "assigned":
                    member.owned.update(partitions)
                elif name in ("revoked", "lost"):
                    member.owned.difference_update(partitions)
            if self.quiet:
                continue
            if name in ("assigned", "revoked", "lost") and partitions:
                self._console.event(
                    f"consumer {member.index} {name} partitions {partitions}; it owns "
                    f"{sorted(member.owned)}"
                )
            elif name in ("error", "commit_failed"):
                self._console.event(f"consumer {member.index}: {name} {event.get('error')}")

    def _count(self, partition: int, first: int, last: int, count: int) -> None:
        counts = self.counts[partition]
        self.processed += count
        if count == last - first + 1:
            for offset in range(first, min(last + 1, len(counts))):
                counts[offset] = min(255, counts[offset] + 1)
        # NB: a poll's records of a partition are contiguous here (no transactions, no
        # compaction); if not, the missing ones are reported as never processed.

    def kill_locked(self, batch: int) -> None:
        """SIGKILL the armed victim (under `lock`)."""
        victim = self.victim
        assert victim is not None
        victim.process.send_signal(signal.SIGKILL)
        self.killed_at = time.monotonic()
        self.killed_batch = batch
        victim.killed = True
        self.victim = None

    def owners(self) -> dict[int, set[int]]:
        with self.lock:
            return {m.index: set(m.owned) for m in self.members if not m.killed}


def run_group(
    cluster: LocalCluster,
    topic: str,
    partitions: int,
    tracker: AckTracker,
    summary: Summary,
    console: Console,
    work_dir: Path,
) -> None:
    """Step 6 of the main job (see the module docstring).

    Raises:
        DemoError: the group did not settle, rebalance or drain within `GROUP_TIMEOUT_S`, or
            an acknowledged record was never processed.
    """
    from kraft import AdminClient, TopicPartition

    console.say(
        f"\n6. consumer group {GROUP!r}: {CONSUMERS} consumer processes share {topic!r} "
        f"(commit after processing: at-least-once); a third of the way, kill -9 one of them "
        f"(session timeout {SESSION_TIMEOUT_MS / 1000:.1f}s)"
    )
    summary.group_session_timeout_ms = SESSION_TIMEOUT_MS
    started = time.monotonic()
    deadline = started + GROUP_TIMEOUT_S
    with AdminClient(cluster.bootstrap, **cluster.client_security) as admin:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        listed = admin.list_offsets({tp: -1 for tp in tps})
        ends = [_end(listed[tp]) for tp in tps]
        group = _Group(ends, console)
        go = work_dir / "group-go"
        go.unlink(missing_ok=True)
        logs: list[IO[str]] = []
        try:
            for index in range(1, CONSUMERS + 1):
                log = (work_dir / f"consumer-{index}.log").open("w")
                logs.append(log)
                argv = [sys.executable, "-m", "kraft.demo.group_worker", cluster.bootstrap]
                security = [json.dumps(cluster.client_security)] if cluster.tls else []
                process = subprocess.Popen(
                    [*argv, topic, str(go), *security],
                    stdout=subprocess.PIPE,
                    stderr=log,
                    text=True,
                    # Dies with the demo even if the demo is SIGKILLed (`die_with_parent`);
                    # its own session: Ctrl-C reaches the demo, which stops it.
                    env={**os.environ, PARENT_PID_ENV: str(os.getpid())},
                    start_new_session=True,
                )
                member = _Member(index, process)
                group.members.append(member)
                summary.pids.append(process.pid)
                assert process.stdout is not None
                threading.Thread(
                    target=group.read, args=(member, process.stdout), daemon=True
                ).start()
            _settle(group, partitions, deadline)
            go.touch()
            console.event(
                "the group is stable: "
                + "; ".join(
                    f"consumer {i} owns {sorted(owned)}" for i, owned in group.owners().items()
                )
                + f" (joined in {time.monotonic() - started:.1f}s); go"
            )
            _drain(admin, group, tps, tracker, summary, console, deadline)
        finally:
            for m in group.members:
                if m.process.poll() is None:
                    m.process.send_signal(signal.SIGTERM)
            for m in group.members:
                try:
                    m.process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    m.process.kill()
                    m.process.wait()
            for f in logs:
                f.close()
    summary.group_s = round(time.monotonic() - started, 3)
    _verify(group, tracker, summary, console)


def _end(listed: Any) -> int:
    from storage.errors import KraftError

    if isinstance(listed, KraftError):
        raise DemoError(f"no log end offset: {listed}")
    return int(listed.offset)


def _settle(group: _Group, partitions: int, deadline: float) -> None:
    """Wait until every member owns a share and together they own each partition once."""
    while time.monotonic() < deadline:
        owners = group.owners()
        owned = [p for ps in owners.values() for p in ps]
        if all(owners.values()) and sorted(owned) == list(range(partitions)):
            return
        for m in group.members:
            if m.process.poll() is not None:
                raise DemoError(f"consumer {m.index} exited early (its log: consumer-*.log)")
        time.sleep(0.05)
    raise DemoError(f"the group did not settle within {GROUP_TIMEOUT_S:.0f}s")


def _drain(
    admin: Any,
    group: _Group,
    tps: list[Any],
    tracker: AckTracker,
    summary: Summary,
    console: Console,
    deadline: float,
) -> None:
    """Kill consumer 1 a third of the way; report the rebalance; wait for lag 0."""
    total = sum(group.ends)
    partitions = len(tps)
    victim = group.members[0]
    killed_at: float | None = None
    armed = 0.0
    rebalanced = False
    lag = total
    next_lag = 0.0
    ticks = 0
    while True:
        now = time.monotonic()
        if now > deadline:
            raise DemoError(
                f"the group did not drain within {GROUP_TIMEOUT_S:.0f}s (lag {lag:,}, "
                f"{'rebalanced' if rebalanced else 'not rebalanced'})"
            )
        if now >= next_lag:
            next_lag = now + LAG_EVERY_S
            ticks += 1
            lag = _lag(admin, tps, group.ends, lag)
            console.progress(
                f"  group {bar(total - lag, total)} lag {lag:>9,} records; processed "
                f"{group.processed:,}",
                line=ticks % 2 == 1,
            )
        if not armed and group.processed >= total // 3:
            armed = now
            with group.lock:
                group.victim = victim  # the reader kills it after its next processed batch
        if killed_at is None and armed:
            with group.lock:
                if group.victim is not None and now - armed > KILL_ANYWAY_S:
                    group.kill_locked(0)  # it processes nothing more: kill it idle
                killed_at = group.killed_at
                owned = sorted(victim.owned)
            if killed_at is not None:
                summary.group_killed_partitions = owned
                lag = _lag(admin, tps, group.ends, lag)
                console.event(
                    f"kill -9 consumer {victim.index} (pid {victim.process.pid}), owner of "
                    f"partitions {owned}, "
                    + (
                        f"right after it processed a batch of {group.killed_batch:,} records "
                        f"(racing its commit); lag {lag:,}"
                        if group.killed_batch
                        else f"while idle; lag {lag:,}"
                    )
                )
        if killed_at is not None and not rebalanced:
            owned_now = sorted(p for ps in group.owners().values() for p in ps)
            if owned_now == list(range(partitions)):
                rebalanced = True
                summary.group_rebalance_s = round(time.monotonic() - killed_at, 3)
                console.event(
                    f"rebalance done: the survivors own every partition, "
                    f"{summary.group_rebalance_s:.2f}s after the kill (the coordinator saw no "
                    f"heartbeat for its {SESSION_TIMEOUT_MS / 1000:.1f}s session timeout, "
                    f"expired consumer {victim.index} and reassigned its partitions)"
                )
        if rebalanced and lag == 0:
            group.quiet = True
            console.end_progress(
                f"   lag 0: the group's committed offsets reached the log end offset of every "
                f"partition, {time.monotonic() - killed_at:.1f}s after the kill"
                if killed_at is not None
                else "   lag 0"
            )
            return
        time.sleep(0.05)


def _lag(admin: Any, tps: list[Any], ends: list[int], before: int) -> int:
    """The group's lag: log end offsets minus committed offsets, summed (``before`` while the
    coordinator cannot answer, e.g. as it moves)."""
    from storage.errors import KraftError

    try:
        committed = admin.list_group_offsets(GROUP)
    except KraftError:
        return before
    return sum(end - committed.get(tp, 0) for tp, end in zip(tps, ends, strict=True))


def _verify(group: _Group, tracker: AckTracker, summary: Summary, console: Console) -> None:
    partition_of, offset_of = tracker.partition_of, tracker.offset_of
    counts = group.counts
    missed = 0
    for seq in range(len(partition_of)):
        partition = partition_of[seq]
        if partition == 255:
            continue  # not acknowledged
        offset = offset_of[seq]
        if offset >= len(counts[partition]) or not counts[partition][offset]:
            missed += 1
    twice = sum(c - 1 for per in counts for c in per if c > 1)
    summary.group_processed = group.processed
    summary.group_missed = missed
    summary.group_duplicates = twice
    console.say(
        f"   the group processed {group.processed:,} records; acknowledged records never "
        f"processed: {missed}; processed twice: {twice:,}"
    )
    console.say(
        "   at-least-once: a consumer commits only after processing, so a record processed by "
        "the killed consumer after its last commit is processed again by the partition's next "
        "owner, which starts at that commit"
        + (
            f" (here {twice:,}: its last poll, at most {MAX_POLL_RECORDS:,} records)."
            if twice
            else " (here none: its commit landed before the kill did)."
            if group.killed_batch
            else " (here none: it was killed idle, with everything it processed committed)."
        )
        + " Committing before processing would give at-most-once instead: no duplicates, "
        "but the killed consumer's last poll would be lost."
    )
    if missed:
        summary.errors.append(f"the group never processed {missed} acknowledged records")


__all__ = ["GROUP", "SESSION_TIMEOUT_MS", "run_group"]
