"""The history of a fault run, and `check_history`: what the clients saw, judged as Jepsen does.

A run records every client operation as it happens (`History.record`), one JSON object per
line: a producer's `Send`, then its `Ack` (the offset the cluster gave it) or its `SendFailed`
(``definite`` when the cluster said the write did not happen, indeterminate on a timeout); a
consumer's `Poll` of one record; a consumer's `Seek` (a restart or a reassignment, after
which its reads may go back). At the end a `FinalRead` of every partition, from its log
start to its high watermark, is the cluster's own account. Values are unique per run
(``"<producer>-<n>"``), so a value names its write.

`check_history` judges the whole history, not only the final read, and reports:

- **lost**: acknowledged, and absent from the final read (the one unforgivable outcome
  with ``acks=all``);
- **duplicated**: one value at two offsets of the final read or of the polls;
- **inconsistent offsets**: one offset of a partition seen with two values (two polls, or a
  poll and the final read): a consumer read a history the cluster later rewrote;
- **non-monotonic sends**: a producer's acknowledged offsets in one partition going back in
  the order it *sent* them (an idempotent producer's writes land in order; acknowledgements
  may be recorded out of order, as callbacks run on several threads);
- **non-monotonic polls**: a consumer's polls of one partition going back without a `Seek`;
- **vanished**: read by a poll, never acknowledged, and absent from the final read: a
  consumer saw a write the cluster then lost (a dirty read);
- **unseen**: acknowledged and in the final read, but never read by any poll
  (informational: the readers were behind when the run stopped, not a violation).

It is pure: a list of operations in, a `HistoryReport` out, so it can be shown to catch what
it must (tests feed it histories with each anomaly).
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, ClassVar, Final

from replication.nemesis.anomalies import Anomalies, AnomalyReport
from replication.nemesis.groups import (
    GroupAssign,
    GroupCommit,
    GroupFinal,
    GroupLeave,
    GroupRevoke,
)
from replication.nemesis.metadata import MetaDone, MetaFinal, MetaOp
from replication.nemesis.txn_history import TXN_OPERATIONS, TxnFinalRead, TxnOperation


@dataclass(frozen=True, slots=True, kw_only=True)
class Send:
    """A producer handed ``value`` to the client for ``topic``/``partition``."""

    kind: ClassVar[str] = "send"
    time_ms: int
    process: str
    topic: str
    partition: int
    value: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Ack:
    """The cluster acknowledged ``value`` at ``offset``."""

    kind: ClassVar[str] = "ack"
    time_ms: int
    process: str
    topic: str
    partition: int
    value: str
    offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SendFailed:
    """The send of ``value`` failed: ``definite`` if the cluster said it was not written,
    else indeterminate (a timeout: it may or may not be in the log)."""

    kind: ClassVar[str] = "send_failed"
    time_ms: int
    process: str
    topic: str
    partition: int
    value: str
    definite: bool
    error: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Poll:
    """A consumer read ``value`` at ``offset``."""

    kind: ClassVar[str] = "poll"
    time_ms: int
    process: str
    topic: str
    partition: int
    offset: int
    value: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Seek:
    """A consumer moved its position in a partition (a restart, a reset, a reassignment):
    its next poll there may go back."""

    kind: ClassVar[str] = "seek"
    time_ms: int
    process: str
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FinalRead:
    """The whole partition below its high watermark, read after the faults healed."""

    kind: ClassVar[str] = "final_read"
    time_ms: int
    topic: str
    partition: int
    log_start_offset: int
    high_watermark: int
    records: tuple[tuple[int, str], ...]
    """``(offset, value)`` in offset order."""


Operation = (
    Send
    | Ack
    | SendFailed
    | Poll
    | Seek
    | FinalRead
    | MetaOp
    | MetaDone
    | MetaFinal
    | GroupAssign
    | GroupRevoke
    | GroupCommit
    | GroupLeave
    | GroupFinal
    | TxnOperation
)
"""Every operation of a history: the writes and reads judged here, the metadata workload's
(`replication.nemesis.metadata`), the consumer group's (`replication.nemesis.groups`) and the
transactional workload's (`replication.nemesis.txn_history`)."""

_KINDS: Final[dict[str, type[Operation]]] = {
    cls.kind: cls
    for cls in (
        Send,
        Ack,
        SendFailed,
        Poll,
        Seek,
        FinalRead,
        MetaOp,
        MetaDone,
        MetaFinal,
        GroupAssign,
        GroupRevoke,
        GroupCommit,
        GroupLeave,
        GroupFinal,
        *TXN_OPERATIONS,
    )
}


def to_json(op: Operation) -> str:
    data = asdict(op)
    data["kind"] = op.kind
    return json.dumps(data, separators=(",", ":"))


def from_json(line: str) -> Operation:
    """One operation from its JSON line.

    Raises:
        ValueError: not an operation of this history format.
    """
    data: dict[str, Any] = json.loads(line)
    cls = _KINDS.get(str(data.pop("kind", "")))
    if cls is None:
        raise ValueError(f"not a history operation: {line[:80]!r}")
    if cls in (FinalRead, TxnFinalRead):
        data["records"] = tuple((int(o), str(v)) for o, v in data["records"])
    elif cls is MetaFinal:
        data["topics"] = tuple(data["topics"])
    elif cls in (GroupAssign, GroupRevoke):
        data["partitions"] = tuple(data["partitions"])
    elif cls is GroupFinal:
        data["offsets"] = {int(p): int(o) for p, o in data["offsets"].items()}
    try:
        return cls(**data)
    except TypeError as e:
        raise ValueError(f"malformed {cls.kind} operation: {e}") from None


class History:
    """Operations in the order they happened, appended to a JSON-lines file if given.
    `record` may be called from any thread (producer callbacks run on I/O threads)."""

    def __init__(self, out: IO[str] | None = None) -> None:
        self.operations: list[Operation] = []
        self._out = out
        self._lock = threading.Lock()

    def record(self, op: Operation) -> None:
        line = to_json(op) + "\n" if self._out is not None else ""
        with self._lock:
            self.operations.append(op)
            if self._out is not None:
                self._out.write(line)

    @staticmethod
    def load(path: Path) -> list[Operation]:
        with path.open() as f:
            return [from_json(line) for line in f if line.strip()]


@dataclass(slots=True)
class HistoryReport(AnomalyReport):
    """What `check_history` found (see the module docstring)."""

    sends: int = 0
    acknowledged: int = 0
    failed_definite: int = 0
    failed_indeterminate: int = 0
    polls: int = 0
    final_records: int = 0
    lost: Anomalies = field(default_factory=Anomalies)
    duplicated: Anomalies = field(default_factory=Anomalies)
    inconsistent_offsets: Anomalies = field(default_factory=Anomalies)
    non_monotonic_sends: Anomalies = field(default_factory=Anomalies)
    non_monotonic_polls: Anomalies = field(default_factory=Anomalies)
    vanished: Anomalies = field(default_factory=Anomalies)
    unseen: Anomalies = field(default_factory=Anomalies)

    VIOLATIONS: ClassVar[tuple[str, ...]] = (
        "lost",
        "duplicated",
        "inconsistent_offsets",
        "non_monotonic_sends",
        "non_monotonic_polls",
        "vanished",
    )


def check_history(operations: Iterable[Operation]) -> HistoryReport:
    """Judge a run's history (see the module docstring)."""
    report = HistoryReport()
    acked: dict[str, tuple[str, int, int]] = {}  # value -> (topic, partition, offset)
    polled_values: dict[str, set[tuple[str, int, int]]] = defaultdict(set)
    seen_at: dict[tuple[str, int, int], str] = {}  # (topic, partition, offset) -> value
    send_order: dict[str, int] = {}  # value -> position among its producer's sends
    acks_by_stream: dict[tuple[str, str, int], list[tuple[int, int, str]]] = defaultdict(list)
    last_poll: dict[tuple[str, str, int], int] = {}
    finals: list[FinalRead] = []

    def saw(topic: str, partition: int, offset: int, value: str, by: str) -> None:
        key = (topic, partition, offset)
        other = seen_at.setdefault(key, value)
        if other != value:
            report.inconsistent_offsets.add(
                f"{topic}-{partition}@{offset}: {other!r} then {value!r} ({by})"
            )

    for op in operations:
        match op:
            case Send():
                send_order[op.value] = report.sends
                report.sends += 1
            case Ack():
                report.acknowledged += 1
                acked[op.value] = (op.topic, op.partition, op.offset)
                acks_by_stream[(op.process, op.topic, op.partition)].append(
                    (send_order.get(op.value, -1), op.offset, op.value)
                )
            case SendFailed():
                if op.definite:
                    report.failed_definite += 1
                else:
                    report.failed_indeterminate += 1
            case Poll():
                report.polls += 1
                stream = (op.process, op.topic, op.partition)
                previous_offset = last_poll.get(stream)
                if previous_offset is not None and op.offset <= previous_offset:
                    report.non_monotonic_polls.add(
                        f"{op.process} {op.topic}-{op.partition}: {op.offset} after"
                        f" {previous_offset}"
                    )
                last_poll[stream] = op.offset
                polled_values[op.value].add((op.topic, op.partition, op.offset))
                saw(op.topic, op.partition, op.offset, op.value, f"poll by {op.process}")
            case Seek():
                last_poll.pop((op.process, op.topic, op.partition), None)
            case FinalRead():
                finals.append(op)

    for (process, topic, partition), stream_acks in acks_by_stream.items():
        stream_acks.sort()
        for (_, previous_offset, previous), (_, offset, value) in itertools.pairwise(stream_acks):
            if offset <= previous_offset:
                report.non_monotonic_sends.add(
                    f"{process} {topic}-{partition}: {value!r} at {offset}, sent after"
                    f" {previous!r} at {previous_offset}"
                )

    final_values: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
    read_partitions: dict[tuple[str, int], FinalRead] = {}
    for final in finals:
        read_partitions[(final.topic, final.partition)] = final
        for offset, value in final.records:
            report.final_records += 1
            final_values[value].append((final.topic, final.partition, offset))
            saw(final.topic, final.partition, offset, value, "final read")

    for value, final_places in final_values.items():
        if len(final_places) > 1:
            report.duplicated.add(f"{value!r} at {sorted(final_places)}")
    for value, polled_places in polled_values.items():
        if len(polled_places) > 1 and len(final_values.get(value, ())) <= 1:
            report.duplicated.add(f"{value!r} polled at {sorted(polled_places)}")

    for value, (topic, partition, offset) in acked.items():
        read_back = read_partitions.get((topic, partition))
        if read_back is None:
            continue  # a partition the run did not read back is not judged
        if value not in final_values:
            if offset < read_back.log_start_offset:
                continue  # retention deleted it: not a loss
            report.lost.add(f"{value!r} acknowledged at {topic}-{partition}@{offset}")
        elif value not in polled_values:
            report.unseen.add(f"{value!r} at {topic}-{partition}@{offset}")

    for value, polled_places in polled_values.items():
        if value in acked or value in final_values:
            continue
        if any((t, p) in read_partitions for t, p, _ in polled_places):
            report.vanished.add(f"{value!r} polled at {sorted(polled_places)}, never acknowledged")
    return report


def iter_jsonl(lines: Sequence[str]) -> Iterator[Operation]:
    """Operations from JSON lines (blank lines skipped)."""
    for line in lines:
        if line.strip():
            yield from_json(line)


__all__ = [
    "Ack",
    "Anomalies",
    "FinalRead",
    "History",
    "HistoryReport",
    "Operation",
    "Poll",
    "Seek",
    "Send",
    "SendFailed",
    "check_history",
    "from_json",
    "iter_jsonl",
    "to_json",
]
