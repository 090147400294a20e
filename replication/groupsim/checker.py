"""`GroupChecker`: the consumer-group invariants, checked as the simulation runs.

- ``exclusive_ownership``: no partition is owned by two members of the group at once, as the
  members themselves see it (their lease-bounded view), checked whenever a member gains a
  partition and whenever it processes one.
- ``processed_while_owned``: a member processes only partitions it owns.
- ``committed_never_back``: a partition's committed offset never decreases, except by an
  explicit admin reset.
- ``fenced_commit_rejected``: an offset commit is accepted only from the member's current
  epoch: once a member's epoch has moved on (or it was removed), a commit in the old epoch
  is rejected. The checker keeps the (member, epoch) pairs that ended from the replayed
  records, independently of the coordinator's own check.
- ``at_least_once``: a committed offset ``c`` means every record below ``c`` was processed by
  some member (commit after processing); at the end, with the group drained, every produced
  record was processed at least once. Records an admin reset skipped forward count as
  delivered (the operator asked for it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, final

from kraft.sim.checker import InvariantViolated
from replication.group import GroupCoordinator, OffsetCommitRequest, OffsetCommitResponse
from storage.errors import ErrorCode

from .host import HostObserver, Request

if TYPE_CHECKING:
    from .data import DataTopics
    from .member import TP, SimMember


@final
class GroupChecker(HostObserver):
    def __init__(self, group_id: str, data: DataTopics) -> None:
        self.group_id = group_id
        self._data = data
        self.members: list[SimMember] = []
        self._now: Callable[[], int] = lambda: 0
        self._processed: dict[TP, set[int]] = {}
        self._processed_prefix: dict[TP, int] = {}
        self.committed: dict[tuple[str, int], int] = {}  # (topic name, partition) -> offset
        self._epochs: dict[str, int] = {}
        self.ended_epochs: set[tuple[str, int]] = set()
        self.commits_accepted = 0
        self.resets = 0
        self.expired = 0
        self.max_members_seen = 0

    def bind_clock(self, now: Callable[[], int]) -> None:
        self._now = now

    # --- ownership -------------------------------------------------------------------------

    def _check_exclusive(self, member: SimMember, parts: Iterable[TP]) -> None:
        now = self._now()
        mine = set(parts)
        for other in self.members:
            if other is member:
                continue
            both = mine & other.view(now)
            if both:
                raise InvariantViolated(
                    "exclusive_ownership",
                    f"{sorted(both)[:3]} owned by {member.member_id} and {other.member_id}",
                )

    def on_gained(self, member: SimMember, parts: Iterable[TP]) -> None:
        self._check_exclusive(member, parts)

    def on_processed(self, member: SimMember, tp: TP, start: int, end: int) -> None:
        if tp not in member.view(self._now()):
            raise InvariantViolated(
                "processed_while_owned", f"{member.member_id} processed {tp} without owning it"
            )
        self._check_exclusive(member, [tp])
        self._mark(tp, start, end)

    def _mark(self, tp: TP, start: int, end: int) -> None:
        seen = self._processed.setdefault(tp, set())
        seen.update(range(start, end))
        prefix = self._processed_prefix.get(tp, 0)
        while prefix in seen:
            prefix += 1
        self._processed_prefix[tp] = prefix

    def processed_prefix(self, tp: TP) -> int:
        return self._processed_prefix.get(tp, 0)

    # --- the coordinator's committed state -------------------------------------------------------

    def _note_epochs(self, coord: GroupCoordinator) -> None:
        group = coord.groups().get(self.group_id)
        current = {} if group is None else {m: x.member_epoch for m, x in group.members.items()}
        for member_id, epoch in self._epochs.items():
            if current.get(member_id) != epoch:
                self.ended_epochs.add((member_id, epoch))
        self._epochs = current
        self.max_members_seen = max(self.max_members_seen, len(current))

    def _note_expired(self, coord: GroupCoordinator) -> None:
        """Offsets removed by retention (or a deleted group) are gone: like a reset."""
        group = coord.groups().get(self.group_id)
        live = set() if group is None else set(group.offsets)
        for key in [k for k in self.committed if k not in live]:
            del self.committed[key]
            self.expired += 1

    def on_loaded(self, coord: GroupCoordinator) -> None:
        self._note_epochs(coord)
        self._note_expired(coord)

    def on_replayed(
        self, coord: GroupCoordinator, request: Request | None, response: object
    ) -> None:
        if isinstance(request, OffsetCommitRequest) and isinstance(response, OffsetCommitResponse):
            self._on_commit(request, response)
        if request is None:
            self._note_expired(coord)
        self._note_epochs(coord)

    def _on_commit(self, req: OffsetCommitRequest, r: OffsetCommitResponse) -> None:
        admin = not req.member_id and req.member_epoch < 0
        accepted = [p for p in r.partitions if p.error_code == ErrorCode.NONE]
        if not accepted:
            return
        if not admin and (req.member_id, req.member_epoch) in self.ended_epochs:
            raise InvariantViolated(
                "fenced_commit_rejected",
                f"commit of {req.member_id} in its ended epoch {req.member_epoch} was accepted",
            )
        self.commits_accepted += 1
        if admin:
            self.resets += 1
        for part in accepted:
            offset = next(
                p.offset
                for p in req.partitions
                if p.topic == part.topic and p.partition == part.partition
            )
            key = (part.topic, part.partition)
            before = self.committed.get(key)
            if not admin and before is not None and offset < before:
                raise InvariantViolated(
                    "committed_never_back", f"{key} committed {offset} after {before}"
                )
            self.committed[key] = offset
            tp = (self._data.id_of(part.topic), part.partition)
            if admin:  # a reset forward skips records on purpose: they count as delivered
                self._mark(tp, 0, offset)
            if not admin and offset > self.processed_prefix(tp):
                raise InvariantViolated(
                    "at_least_once",
                    f"{key} committed {offset} but offset {self.processed_prefix(tp)} was "
                    f"never processed",
                )

    def check_drained(self) -> None:
        """At the end: every produced record was processed at least once."""
        for tp in self._data.partitions():
            end = self._data.end(tp)
            if self.processed_prefix(tp) < end:
                raise InvariantViolated(
                    "at_least_once",
                    f"{tp}: records from {self.processed_prefix(tp)} to {end} never processed",
                )
