"""The replicated state machine's side of the driver: the callbacks, and `Applier`, which feeds
them committed batches exactly once per process lifetime."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kraft.raft.messages import SnapshotId
from kraft.raft.voters import split_snapshot
from storage.records import offset_values, read_header


class StateMachine(Protocol):
    """What a replicated state machine gives the log (the embeddable API's callbacks)."""

    def apply(self, offset: int, data: bytes) -> None:
        """Apply the committed record at ``offset``; called in offset order, exactly once per
        process lifetime for offsets above the restored snapshot."""

    def snapshot(self) -> bytes:
        """The state after the last applied record, as bytes."""
        return b""

    def restore(self, data: bytes) -> None:
        """Replace the state with a snapshot's."""


class BatchStateMachine(Protocol):
    """A state machine that wants whole batches (the controller: records of one batch are one
    atomic change). If a state machine has ``apply_batch``, it is called instead of ``apply``,
    for control batches too (KRaft's leader-change batch marks the start of an epoch)."""

    def apply_batch(
        self, base_offset: int, epoch: int, records: list[tuple[int, bytes]], is_control: bool
    ) -> None: ...


class NullStateMachine:
    def apply(self, offset: int, data: bytes) -> None:
        pass

    def snapshot(self) -> bytes:
        return b""

    def restore(self, data: bytes) -> None:
        pass


@dataclass(frozen=True, slots=True)
class AppliedBatch:
    """A committed batch: offsets [base_offset, end_offset) written in ``epoch``."""

    base_offset: int
    end_offset: int
    epoch: int


class Applier:
    """Hands committed batches to the state machine, each record once, in offset order.

    ``applied_offset`` is the last offset the state machine holds (a restored snapshot's end
    minus one at start); ``bytes_since_snapshot`` what it took in since its last snapshot.
    """

    def __init__(self, state_machine: StateMachine) -> None:
        self.state_machine = state_machine
        self.applied_offset = -1
        self.bytes_since_snapshot = 0

    def restore(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Load a snapshot: the state machine now holds everything below its end offset."""
        _, data = split_snapshot(data)  # KIP-853: the voters frame is the Raft core's
        self.state_machine.restore(data)
        self.applied_offset = snapshot_id.end_offset - 1
        self.bytes_since_snapshot = 0

    def apply(self, batch: bytes) -> AppliedBatch | None:
        """Apply one committed batch; None if the state machine held all of it already."""
        header = read_header(batch)
        if header.next_offset - 1 <= self.applied_offset:
            return None
        self.bytes_since_snapshot += header.size_bytes
        apply_batch = getattr(self.state_machine, "apply_batch", None)
        applied = self.applied_offset
        if apply_batch is not None:
            records = [(o, v or b"") for o, v in offset_values(batch) if o > applied]
            apply_batch(
                header.base_offset, header.partition_leader_epoch, records, header.is_control
            )
        elif not header.is_control:
            apply = self.state_machine.apply
            for offset, value in offset_values(batch):
                if offset > applied:
                    apply(offset, value or b"")
        self.applied_offset = header.next_offset - 1
        return AppliedBatch(header.base_offset, header.next_offset, header.partition_leader_epoch)

    def snapshot_taken(self) -> None:
        self.bytes_since_snapshot = 0


__all__ = ["AppliedBatch", "Applier", "BatchStateMachine", "NullStateMachine", "StateMachine"]
