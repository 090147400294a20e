"""The transactional history of a fault run, and `check_txn_history`, its checker.

A transactional producer (`replication.nemesis.txn_workload`) records each transaction as
`TxnBegin`, a `TxnSend` per record handed to the client (value ``"<txn>-<i>"``: unique, and
naming its transaction ``"<producer>-<n>"``), a `TxnDelivered` per delivery report (the offset
the leader gave the record, or the error), and one or more `TxnEnd`: the commit or abort
asked for, with its outcome:

- ``ok``: the coordinator answered; a commit is then *committed*, an abort *aborted*;
- ``failed``: the client said the request did not take effect (librdkafka's
  ``txn_requires_abort``: the transaction failed and must be aborted);
- ``indeterminate``: no answer (a timeout, a fatal error, the producer fenced mid-commit):
  the transaction may or may not have committed.

A transaction whose commit was never asked for, or whose every commit failed, can never
commit: it is *aborted*, whether or not its abort was acknowledged (the coordinator aborts it
on the transaction timeout or when the producer's next epoch starts). One with a commit that
ended ``indeterminate`` (and none ``ok``) is *indeterminate*. `TxnRestart` marks a producer
that started over with ``init_transactions`` after a fatal error (a new epoch).

Readers record `TxnReaderStart` (a fresh consumer, from the beginning of every partition) and
a `TxnPoll` per record, with their ``isolation.level``. After the faults a read_committed
`TxnFinalRead` of every partition, up to its last stable offset once no transaction is open,
is the cluster's account.

`check_txn_history` is pure (operations in, a `TxnReport` out) and reports, after Jepsen's
Kafka checker:

- **aborted_reads** (G1a): a read_committed poll or the final read holds a record of an
  aborted transaction;
- **premature_reads** (G1b-like): a read_committed poll returned a record before its
  transaction's commit was even asked for: the reader went past the last stable offset;
- **lost**: a record of a transaction whose commit was acknowledged is not in the final read;
- **not_atomic**: the final read holds some records of a committed or indeterminate
  transaction, not all (an indeterminate one may show all or none, never a part);
- **duplicated**: one value at two offsets (of the final read, or of one reader's polls);
- **inconsistent_offsets**: one offset of a partition seen with two values, or one value at
  two offsets by two sources (polls, the final read, delivery reports of committed records);
- **non_monotonic_polls**: a read_committed reader's offsets in a partition not increasing
  between two of its starts.

The read_uncommitted reader is the contrast: it may see aborted records (`uncommitted_seen`
counts them), and is judged only for duplicates and inconsistent offsets.

A copier (consume-transform-produce, KIP-447: `replication.nemesis.txn_copier`) reads one
topic read_committed in a consumer group and, in its own transactions, writes a copy of each
record to another topic and commits the group's offsets with them
(``send_offsets_to_transaction``). Its transactions are recorded as a producer's, with a
`TxnCopied` per copy naming the source record, and `TxnGroupOffsets` holds the group's
committed offsets after the run. Exactly once, of the final read, is judged by
`replication.nemesis.copies` (**copied_twice**, **copied_aborted**, **offsets_not_atomic**),
as the simulator's checker judges its own copier.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Literal

from replication.nemesis.anomalies import Anomalies, AnomalyReport
from replication.nemesis.copies import judge_copies

READ_COMMITTED: Final = "read_committed"
READ_UNCOMMITTED: Final = "read_uncommitted"

Outcome = Literal["ok", "failed", "indeterminate"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnBegin:
    """Producer ``process`` began transaction ``txn`` (``"<process>-<n>"``)."""

    kind: ClassVar[str] = "txn_begin"
    time_ms: int
    process: str
    txn: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnSend:
    """``value`` handed to the client for ``topic``/``partition`` inside ``txn``."""

    kind: ClassVar[str] = "txn_send"
    time_ms: int
    process: str
    txn: str
    topic: str
    partition: int
    value: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnDelivered:
    """The delivery report of ``value``: its ``offset``, or -1 and the ``error``."""

    kind: ClassVar[str] = "txn_delivered"
    time_ms: int
    process: str
    txn: str
    topic: str
    partition: int
    value: str
    offset: int
    error: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnEnd:
    """A commit or an abort of ``txn``, asked for at ``start_ms``, and its outcome."""

    kind: ClassVar[str] = "txn_end"
    time_ms: int
    start_ms: int
    process: str
    txn: str
    action: Literal["commit", "abort"]
    outcome: Outcome
    error: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnRestart:
    """Producer ``process`` started over (a new client, ``init_transactions``: a new epoch)
    after ``error``."""

    kind: ClassVar[str] = "txn_restart"
    time_ms: int
    process: str
    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnReaderStart:
    """Reader ``process`` (at ``isolation``) started a consumer from every partition's
    beginning: its next polls may go back."""

    kind: ClassVar[str] = "txn_reader_start"
    time_ms: int
    process: str
    isolation: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnPoll:
    """Reader ``process`` (at ``isolation``) read ``value`` at ``offset``."""

    kind: ClassVar[str] = "txn_poll"
    time_ms: int
    process: str
    isolation: str
    topic: str
    partition: int
    offset: int
    value: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnFinalRead:
    """A partition read at ``isolation`` from its beginning to ``end_offset`` (the last
    stable offset, equal to the high watermark: no transaction was open)."""

    kind: ClassVar[str] = "txn_final_read"
    time_ms: int
    topic: str
    partition: int
    isolation: str
    end_offset: int
    records: tuple[tuple[int, str], ...]
    """``(offset, value)`` in offset order."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnCopied:
    """The copier's ``value`` (in ``txn``) is the copy of ``source_value``, which it read at
    ``source_topic``/``source_partition``@``source_offset``."""

    kind: ClassVar[str] = "txn_copied"
    time_ms: int
    process: str
    txn: str
    value: str
    source_topic: str
    source_partition: int
    source_offset: int
    source_value: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnGroupOffsets:
    """The copier group's committed offsets after the run: ``(topic, partition, offset)``,
    -1 where it committed none."""

    kind: ClassVar[str] = "txn_group_offsets"
    time_ms: int
    group: str
    offsets: tuple[tuple[str, int, int], ...]


TxnOperation = (
    TxnBegin
    | TxnSend
    | TxnDelivered
    | TxnEnd
    | TxnRestart
    | TxnReaderStart
    | TxnPoll
    | TxnFinalRead
    | TxnCopied
    | TxnGroupOffsets
)
TXN_OPERATIONS: Final[tuple[type[TxnOperation], ...]] = (
    TxnBegin,
    TxnSend,
    TxnDelivered,
    TxnEnd,
    TxnRestart,
    TxnReaderStart,
    TxnPoll,
    TxnFinalRead,
    TxnCopied,
    TxnGroupOffsets,
)


@dataclass(slots=True)
class TxnReport(AnomalyReport):
    """What `check_txn_history` found (see the module docstring)."""

    transactions: int = 0
    committed: int = 0
    aborted: int = 0
    indeterminate: int = 0
    indeterminate_visible: int = 0
    """Indeterminate transactions the final read shows (whole): they did commit."""
    restarts: int = 0
    records_sent: int = 0
    polls: int = 0
    uncommitted_seen: int = 0
    """Records of aborted transactions the read_uncommitted readers saw (expected)."""
    final_records: int = 0
    copies: int = 0
    """The copier's committed copies in the final read."""
    aborted_reads: Anomalies = field(default_factory=Anomalies)
    premature_reads: Anomalies = field(default_factory=Anomalies)
    lost: Anomalies = field(default_factory=Anomalies)
    not_atomic: Anomalies = field(default_factory=Anomalies)
    duplicated: Anomalies = field(default_factory=Anomalies)
    inconsistent_offsets: Anomalies = field(default_factory=Anomalies)
    non_monotonic_polls: Anomalies = field(default_factory=Anomalies)
    copied_twice: Anomalies = field(default_factory=Anomalies)
    copied_aborted: Anomalies = field(default_factory=Anomalies)
    offsets_not_atomic: Anomalies = field(default_factory=Anomalies)

    VIOLATIONS: ClassVar[tuple[str, ...]] = (
        "aborted_reads",
        "premature_reads",
        "lost",
        "not_atomic",
        "duplicated",
        "inconsistent_offsets",
        "non_monotonic_polls",
        "copied_twice",
        "copied_aborted",
        "offsets_not_atomic",
    )


@dataclass(slots=True)
class _Txn:
    values: list[str] = field(default_factory=list)
    commit_asked_ms: int | None = None
    """When the first commit was asked for (None: never)."""
    commit_outcomes: list[str] = field(default_factory=list)

    @property
    def state(self) -> Literal["committed", "aborted", "indeterminate"]:
        if "ok" in self.commit_outcomes:
            return "committed"
        if "indeterminate" in self.commit_outcomes:
            return "indeterminate"
        return "aborted"  # never asked to commit, or every commit failed


def txn_of(value: str) -> str:
    """The transaction a value names (``"p0-12-3"`` -> ``"p0-12"``)."""
    return value.rpartition("-")[0]


def check_txn_history(operations: Iterable[Any]) -> TxnReport:
    """Judge a transactional run's history (see the module docstring); operations of other
    kinds are ignored."""
    report = TxnReport()
    txns: dict[str, _Txn] = defaultdict(_Txn)
    delivered: dict[str, tuple[str, int, int]] = {}  # value -> (topic, partition, offset)
    polls: list[TxnPoll] = []
    starts: list[TxnReaderStart] = []
    finals: list[TxnFinalRead] = []
    copies: list[TxnCopied] = []
    group_offsets: list[TxnGroupOffsets] = []
    for op in operations:
        match op:
            case TxnBegin():
                txns.setdefault(op.txn, _Txn())  # one without records still counts
            case TxnSend():
                txns[op.txn].values.append(op.value)
                report.records_sent += 1
            case TxnDelivered() if op.offset >= 0:
                delivered[op.value] = (op.topic, op.partition, op.offset)
            case TxnEnd() if op.action == "commit":
                txn = txns[op.txn]
                if txn.commit_asked_ms is None:
                    txn.commit_asked_ms = op.start_ms
                txn.commit_outcomes.append(op.outcome)
            case TxnRestart():
                report.restarts += 1
            case TxnReaderStart():
                starts.append(op)
            case TxnPoll():
                polls.append(op)
            case TxnFinalRead():
                finals.append(op)
            case TxnCopied():
                copies.append(op)
            case TxnGroupOffsets():
                group_offsets.append(op)

    report.transactions = len(txns)
    state = {name: txn.state for name, txn in txns.items()}

    def state_of(value: str) -> str:
        return state.get(txn_of(value), "unknown")

    seen_at: dict[tuple[str, int, int], tuple[str, str]] = {}  # place -> (value, by)
    placed: dict[str, tuple[tuple[str, int, int], str]] = {}  # value -> (place, by)

    def saw(topic: str, partition: int, offset: int, value: str, by: str) -> None:
        place = (topic, partition, offset)
        other, other_by = seen_at.setdefault(place, (value, by))
        if other != value:
            report.inconsistent_offsets.add(
                f"{topic}-{partition}@{offset}: {other!r} ({other_by}) and {value!r} ({by})"
            )
        # A value at two places by one source is a duplicate (judged below); by two, it moved.
        first, first_by = placed.setdefault(value, (place, by))
        if first != place and first_by != by:
            report.inconsistent_offsets.add(f"{value!r} at {first} ({first_by}), {place} ({by})")

    _check_polls(report, polls, starts, txns, state_of, saw)
    final_places = _check_final(report, finals, state_of, saw)
    if copies and finals:
        _check_copies(report, copies, group_offsets, finals, final_places, state_of)
    for value, (topic, partition, offset) in delivered.items():
        if state_of(value) == "committed":
            saw(topic, partition, offset, value, "delivery report")
    for name, txn in txns.items():
        tally = txn.state
        setattr(report, tally, getattr(report, tally) + 1)
        if not finals or tally == "aborted" or not txn.values:
            continue
        missing = [v for v in txn.values if v not in final_places]
        if tally == "committed":
            for value in missing:
                report.lost.add(f"{value!r} of {name}, committed, not in the final read")
        elif not missing:
            report.indeterminate_visible += 1
        if missing and len(missing) < len(txn.values):
            report.not_atomic.add(
                f"{name} ({tally}): {len(txn.values) - len(missing)} of {len(txn.values)}"
                f" records in the final read, missing {missing[:3]}"
            )
    return report


def _check_polls(
    report: TxnReport,
    polls: list[TxnPoll],
    starts: list[TxnReaderStart],
    txns: dict[str, _Txn],
    state_of: Any,
    saw: Any,
) -> None:
    """The readers' polls: aborted and premature reads, order, duplicates per reader."""
    starts_of: dict[str, list[int]] = defaultdict(list)
    for start in starts:
        starts_of[start.process].append(start.time_ms)
    last: dict[tuple[str, str, int], tuple[int, int]] = {}  # stream -> (offset, start_ms)
    places: dict[tuple[str, str], set[tuple[str, int, int]]] = defaultdict(set)
    for poll in polls:
        report.polls += 1
        saw(poll.topic, poll.partition, poll.offset, poll.value, f"poll by {poll.process}")
        places[(poll.process, poll.value)].add((poll.topic, poll.partition, poll.offset))
        value_state = state_of(poll.value)
        if poll.isolation != READ_COMMITTED:
            report.uncommitted_seen += value_state == "aborted"
            continue
        if value_state == "aborted":
            report.aborted_reads.add(
                f"{poll.process} read {poll.value!r} at {poll.topic}-{poll.partition}"
                f"@{poll.offset}, of an aborted transaction"
            )
        asked = txns[txn_of(poll.value)].commit_asked_ms if txn_of(poll.value) in txns else None
        if value_state != "aborted" and (asked is None or poll.time_ms < asked):
            report.premature_reads.add(
                f"{poll.process} read {poll.value!r} at {poll.time_ms} ms, before its commit"
                f" was asked for ({asked} ms)"
            )
        started = max((t for t in starts_of[poll.process] if t <= poll.time_ms), default=-1)
        stream = (poll.process, poll.topic, poll.partition)
        previous = last.get(stream)
        if previous is not None and previous[1] == started and poll.offset <= previous[0]:
            report.non_monotonic_polls.add(
                f"{poll.process} {poll.topic}-{poll.partition}: {poll.offset} after {previous[0]}"
            )
        last[stream] = (poll.offset, started)
    for (process, value), at in places.items():
        if len(at) > 1:
            report.duplicated.add(f"{value!r} polled by {process} at {sorted(at)}")


def _check_final(
    report: TxnReport, finals: list[TxnFinalRead], state_of: Any, saw: Any
) -> dict[str, tuple[str, int, int]]:
    """The read_committed final read: aborted reads and duplicates; the place of each value."""
    places: dict[str, tuple[str, int, int]] = {}
    for final in finals:
        if final.isolation != READ_COMMITTED:
            continue
        for offset, value in final.records:
            report.final_records += 1
            place = (final.topic, final.partition, offset)
            saw(*place, value, "final read")
            if value in places:
                report.duplicated.add(f"{value!r} at {places[value]} and {place}")
            places.setdefault(value, place)
            if state_of(value) == "aborted":
                report.aborted_reads.add(
                    f"final read: {value!r} at {final.topic}-{final.partition}@{offset}, of an"
                    " aborted transaction"
                )
    return places


def _check_copies(
    report: TxnReport,
    copies: list[TxnCopied],
    group_offsets: list[TxnGroupOffsets],
    finals: list[TxnFinalRead],
    final_places: dict[str, tuple[str, int, int]],
    state_of: Any,
) -> None:
    """Exactly once through the copier (`replication.nemesis.copies`)."""
    committed: dict[str, list[str]] = defaultdict(list)  # source value -> its committed copies
    for copy in copies:
        if copy.value in final_places:
            committed[copy.source_value].append(copy.value)
    report.copies = sum(len(made) for made in committed.values())
    sources = {copy.source_topic for copy in copies}
    reads = [
        (final.topic, final.partition, final.records)
        for final in finals
        if final.topic in sources and final.isolation == READ_COMMITTED
    ]
    offsets = {(t, p): o for t, p, o in group_offsets[-1].offsets} if group_offsets else None

    def aborted(value: str) -> bool:
        return bool(state_of(value) == "aborted")

    for check, detail in judge_copies(committed, aborted, reads, offsets):
        getattr(report, check).add(detail)


__all__ = [
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "TXN_OPERATIONS",
    "TxnBegin",
    "TxnCopied",
    "TxnDelivered",
    "TxnEnd",
    "TxnFinalRead",
    "TxnGroupOffsets",
    "TxnOperation",
    "TxnPoll",
    "TxnReaderStart",
    "TxnReport",
    "TxnRestart",
    "TxnSend",
    "check_txn_history",
    "txn_of",
]
