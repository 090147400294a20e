"""The consumer-group workload of a fault run and its checker.

Each `GroupWorker` is one member slot of the group ``GROUP``: it subscribes a `Consumer` with
``group_id`` (KIP-848: the coordinator assigns the partitions), polls and "processes" what it
gets (records each record as a `Poll`, so the history checker judges these reads too), then
commits the positions it reached (commit after processing: at-least-once), and after a while
leaves (closes the consumer) and joins again as a new member, so the group keeps
rebalancing while the faults run. What the member sees is recorded as it sees it:
``on_assign`` (`GroupAssign`, with a `Seek` per partition: its reads there start afresh),
``on_revoke`` and ``on_lost`` (`GroupRevoke`, ``lost`` for the latter), each commit's outcome
(`GroupCommit`) and the end of the member (`GroupLeave`). After the heal the run records the
group's committed offsets (`GroupFinal`).

`check_groups` judges them:

- **double_owners**: a partition owned by two members at once, as the members saw it (an
  ``on_assign`` of a partition another member had been assigned and had not yet revoked).
  A member that *lost* its partitions (``on_lost``: its session expired, the coordinator
  fenced it) may have believed it owned them after they moved on: Kafka allows such a zombie,
  and only forbids its commits, so those overlaps are counted apart (``zombie_overlaps``);
- **commit_regressions**: an acknowledged commit of a partition below an earlier acknowledged
  one, or the final committed offset below the highest acknowledged commit;
- **unprocessed**: a record acknowledged to a producer at an offset below its partition's
  final committed offset that no member ever polled (a commit covered a record nobody
  processed).
"""

from __future__ import annotations

import random
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

import structlog

from kraft.types import TopicPartition
from replication.clients.admin import AdminClient
from replication.clients.consumer import Consumer

GROUP: Final = "nemesis-group"

_logger = structlog.get_logger("replication.nemesis.groups")


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupAssign:
    """``on_assign``: the member got ``partitions`` (of ``topic``)."""

    kind: ClassVar[str] = "group_assign"
    time_ms: int
    process: str
    member: int
    """The member's incarnation (the slot rejoins as a new member)."""
    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupRevoke:
    """``on_revoke`` (or, with ``lost``, ``on_lost``): the member gave ``partitions`` up."""

    kind: ClassVar[str] = "group_revoke"
    time_ms: int
    process: str
    member: int
    topic: str
    partitions: tuple[int, ...]
    lost: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupCommit:
    """The member committed ``offset`` (the next to read) for ``partition``: ``ok`` if the
    coordinator acknowledged it."""

    kind: ClassVar[str] = "group_commit"
    time_ms: int
    process: str
    member: int
    topic: str
    partition: int
    offset: int
    ok: bool
    error: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupLeave:
    """The member is gone (its consumer closed, cleanly or not: ``clean``)."""

    kind: ClassVar[str] = "group_leave"
    time_ms: int
    process: str
    member: int
    clean: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupFinal:
    """The group's committed offsets after the heal (partition -> next offset to read)."""

    kind: ClassVar[str] = "group_final"
    time_ms: int
    topic: str
    offsets: dict[int, int] = field(default_factory=dict)


GroupOperation = GroupAssign | GroupRevoke | GroupCommit | GroupLeave | GroupFinal


class GroupWorker(threading.Thread):
    """One member slot of the group (see the module docstring). ``record`` takes the group
    operations and the `Poll` / `Seek` operations of the history."""

    def __init__(
        self,
        name: str,
        bootstrap: str,
        topic: str,
        record: Callable[[Any], None],
        clock_ms: Callable[[], int],
        *,
        seed: int,
        lifetime_s: tuple[float, float] = (4.0, 15.0),
    ) -> None:
        super().__init__(name=f"nemesis-{name}", daemon=True)
        self.process = name
        self._bootstrap_servers = bootstrap
        self._topic = topic
        self._record = record
        self._clock_ms = clock_ms
        self._rng = random.Random(seed)
        self._lifetime_s = lifetime_s
        self._stopping = threading.Event()
        self.member = 0
        self.polled = 0
        self.commits = 0
        self.failed_commits = 0

    def run(self) -> None:
        while not self._stopping.is_set():
            self.member += 1
            try:
                self._live(self.member)
            except Exception as e:
                _logger.info("nemesis_member_failed", member=self.process, error=str(e)[:200])
            self._stopping.wait(self._rng.uniform(0.2, 1.5))

    def _live(self, member: int) -> None:
        from replication.nemesis.history import Poll, Seek

        consumer = Consumer(
            self._bootstrap_servers,
            group_id=GROUP,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        clean = False
        try:

            def assigned(_: Consumer, tps: set[TopicPartition]) -> None:
                now = self._clock_ms()
                parts = tuple(sorted(tp.partition for tp in tps))
                self._record(
                    GroupAssign(
                        time_ms=now,
                        process=self.process,
                        member=member,
                        topic=self._topic,
                        partitions=parts,
                    )
                )
                for p in parts:
                    self._record(
                        Seek(
                            time_ms=now,
                            process=self.process,
                            topic=self._topic,
                            partition=p,
                            offset=-1,
                        )
                    )

            def revoked(lost: bool) -> Callable[[Consumer, set[TopicPartition]], None]:
                def callback(_: Consumer, tps: set[TopicPartition]) -> None:
                    self._record(
                        GroupRevoke(
                            time_ms=self._clock_ms(),
                            process=self.process,
                            member=member,
                            topic=self._topic,
                            partitions=tuple(sorted(tp.partition for tp in tps)),
                            lost=lost,
                        )
                    )

                return callback

            consumer.subscribe(
                [self._topic], on_assign=assigned, on_revoke=revoked(False), on_lost=revoked(True)
            )
            end = self._clock_ms() + int(1000 * self._rng.uniform(*self._lifetime_s))
            while not self._stopping.is_set() and self._clock_ms() < end:
                records = consumer.poll(timeout=0.5)
                positions: dict[TopicPartition, int] = {}
                for r in records:
                    self.polled += 1
                    self._record(
                        Poll(
                            time_ms=self._clock_ms(),
                            process=self.process,
                            topic=r.topic,
                            partition=r.partition,
                            offset=r.offset,
                            value=(r.value or b"").decode(errors="replace"),
                        )
                    )
                    tp = TopicPartition(r.topic, r.partition)
                    positions[tp] = max(positions.get(tp, 0), r.offset + 1)
                if positions:
                    self._commit(consumer, member, positions)
            clean = True
        finally:
            try:
                consumer.close()
            except Exception as e:
                clean = False
                _logger.info("nemesis_member_close_failed", member=self.process, error=str(e))
            self._record(
                GroupLeave(
                    time_ms=self._clock_ms(), process=self.process, member=member, clean=clean
                )
            )

    def _commit(
        self, consumer: Consumer, member: int, positions: dict[TopicPartition, int]
    ) -> None:
        """Commit what was just processed (each partition's next offset), and record it."""
        ok, error = True, ""
        try:
            consumer.commit(positions)
        except Exception as e:
            ok, error = False, f"{type(e).__name__}: {str(e)[:120]}"
        self.commits += ok
        self.failed_commits += not ok
        now = self._clock_ms()
        for tp, offset in sorted(positions.items(), key=lambda kv: kv[0].partition):
            self._record(
                GroupCommit(
                    time_ms=now,
                    process=self.process,
                    member=member,
                    topic=tp.topic,
                    partition=tp.partition,
                    offset=offset,
                    ok=ok,
                    error=error,
                )
            )

    def stop(self) -> None:
        self._stopping.set()
        self.join(timeout=30)


def read_final_offsets(bootstrap: str, topic: str, clock_ms: Callable[[], int]) -> GroupFinal:
    """The group's committed offsets of ``topic`` after the heal."""
    with AdminClient(bootstrap, timeout=60.0) as admin:
        offsets = admin.list_group_offsets(GROUP)
    return GroupFinal(
        time_ms=clock_ms(),
        topic=topic,
        offsets={tp.partition: o for tp, o in offsets.items() if tp.topic == topic},
    )


@dataclass(slots=True)
class GroupReport:
    """What `check_groups` found (see the module docstring)."""

    assignments: int = 0
    revocations: int = 0
    lost_revocations: int = 0
    commits_acknowledged: int = 0
    commits_failed: int = 0
    checked_records: int = 0
    double_owners: list[str] = field(default_factory=list)
    zombie_overlaps: list[str] = field(default_factory=list)
    commit_regressions: list[str] = field(default_factory=list)
    unprocessed: list[str] = field(default_factory=list)

    VIOLATIONS: ClassVar[tuple[str, ...]] = ("double_owners", "commit_regressions", "unprocessed")

    @property
    def valid(self) -> bool:
        return all(not getattr(self, name) for name in self.VIOLATIONS)

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            name: getattr(self, name)
            for name in (
                "assignments",
                "revocations",
                "lost_revocations",
                "commits_acknowledged",
                "commits_failed",
                "checked_records",
            )
        }
        data["valid"] = self.valid
        for name in (*self.VIOLATIONS, "zombie_overlaps"):
            found: list[str] = getattr(self, name)
            data[name] = {"count": len(found), "examples": found[:20]}
        return data


@dataclass(slots=True)
class _Ownership:
    owner: tuple[str, int]
    start: int
    """Index of the `GroupAssign` in the history."""
    end: int = 1 << 62
    lost: bool = False
    """Ended by ``on_lost`` or an unclean leave: the owner may have been a zombie."""


def check_groups(operations: Iterable[object], topic: str) -> GroupReport:
    """Judge the group operations of a history (see the module docstring); ``Ack`` and
    ``Poll`` operations of ``topic`` are read too."""
    from replication.nemesis.history import Ack, Poll

    report = GroupReport()
    spans: dict[int, list[_Ownership]] = defaultdict(list)
    open_spans: dict[tuple[tuple[str, int], int], _Ownership] = {}
    best_commit: dict[int, int] = {}
    acked: dict[int, dict[int, str]] = defaultdict(dict)  # partition -> offset -> value
    polled: set[tuple[int, int]] = set()
    final: GroupFinal | None = None

    def close(owner: tuple[str, int], partition: int, index: int, lost: bool) -> None:
        span = open_spans.pop((owner, partition), None)
        if span is not None:
            span.end, span.lost = index, lost

    for index, op in enumerate(operations):
        match op:
            case GroupAssign() if op.topic == topic:
                report.assignments += 1
                owner = (op.process, op.member)
                for p in op.partitions:
                    close(owner, p, index, False)
                    span = _Ownership(owner=owner, start=index)
                    open_spans[(owner, p)] = span
                    spans[p].append(span)
            case GroupRevoke() if op.topic == topic:
                report.revocations += 1
                report.lost_revocations += op.lost
                for p in op.partitions:
                    close((op.process, op.member), p, index, op.lost)
            case GroupLeave():
                owner = (op.process, op.member)
                for key in [k for k in open_spans if k[0] == owner]:
                    close(owner, key[1], index, not op.clean)
            case GroupCommit() if op.topic == topic:
                if not op.ok:
                    report.commits_failed += 1
                    continue
                report.commits_acknowledged += 1
                best = best_commit.get(op.partition, -1)
                if op.offset < best:
                    report.commit_regressions.append(
                        f"{topic}-{op.partition}: {op.process}#{op.member} committed "
                        f"{op.offset} after {best} was acknowledged"
                    )
                best_commit[op.partition] = max(best, op.offset)
            case GroupFinal() if op.topic == topic:
                final = op
            case Ack() if op.topic == topic:
                acked[op.partition][op.offset] = op.value
            case Poll() if op.topic == topic and op.process.startswith("g"):
                polled.add((op.partition, op.offset))

    for p, owned in sorted(spans.items()):
        for i, a in enumerate(owned):
            for b in owned[i + 1 :]:
                if a.owner == b.owner or b.start >= a.end or a.start >= b.end:
                    continue
                first = a if a.start <= b.start else b
                what = (
                    f"{topic}-{p}: {b.owner[0]}#{b.owner[1]} assigned while "
                    f"{a.owner[0]}#{a.owner[1]} still owned it"
                )
                (report.zombie_overlaps if first.lost else report.double_owners).append(what)

    if final is not None:
        for p, offset in sorted(final.offsets.items()):
            best = best_commit.get(p, -1)
            if offset < best:
                report.commit_regressions.append(
                    f"{topic}-{p}: final committed offset {offset} below the acknowledged {best}"
                )
            for acked_offset, value in sorted(acked.get(p, {}).items()):
                if acked_offset >= offset:
                    break
                report.checked_records += 1
                if (p, acked_offset) not in polled:
                    report.unprocessed.append(
                        f"{topic}-{p}@{acked_offset} ({value!r}) below the committed {offset}, "
                        "never polled by a member"
                    )
    return report


__all__ = [
    "GROUP",
    "GroupAssign",
    "GroupCommit",
    "GroupFinal",
    "GroupLeave",
    "GroupOperation",
    "GroupReport",
    "GroupRevoke",
    "GroupWorker",
    "check_groups",
    "read_final_offsets",
]
