"""`ClusterChecker`: the replication safety invariants, checked as the state changes, for ISR
and quorum-mode partitions alike (in a quorum partition the leader epoch is the Raft epoch and
the high watermark the Raft commit offset).

The broker shells call a hook at every change the invariants depend on (an append as leader,
a published high watermark, a core's epoch after each Ready, a committed metadata batch, an
acknowledgement), so every invariant is checked inside the event that could break it:

- ``single_leader_per_epoch``: at most one broker appends as leader in a partition's leader
  epoch (a stale leader of an older epoch may still take acks=1 writes, as in Kafka); in a
  quorum-mode partition also at most one broker wins each Raft epoch's election.
- ``monotonic_leader_epoch``: the controller's leader and partition epochs never decrease; a
  replica's core never goes to an older leader epoch within one broker incarnation.
- ``monotonic_high_watermark``: a leader's high watermark never decreases within its epoch;
  a follower's never decreases while it follows one leader epoch, from its first fetch
  answer on. NB: Kafka allows both to
  go down elsewhere, and so does this checker: a follower copies the HW of each fetch answer
  (``ReplicaFetcherThread``), so a new leader whose HW lags lowers it; a restarted replica
  starts from its periodic HW checkpoint; a follower that truncates after an unclean
  election lowers it to its log end.
- ``committed_identical``: every replica's log below its high watermark agrees, batch for
  batch (offsets, leader epochs, bytes), with the one history the cluster has committed: a
  consumer never reads two different contents at one offset. Checked over the range each
  HW advance uncovers, and over ``[log start, HW)`` when a replica opens after a restart.
- ``acked_never_lost``: an acks=all record acknowledged at offset O is the committed batch at
  O (at acknowledgement and whenever any replica's HW covers O again), and after the faults
  heal it is in the leader's log below its HW.
- ``idempotent_no_duplicate``: no (producer id, epoch, base sequence) is committed twice.
- ``isr_never_fenced``: a committed ISR holds a fenced broker only as its last member (KIP-841
  keeps the last member, leaderless, until it comes back).
- ``consumer_reads_one_content``: end to end, through the consumers' fetches: no (partition,
  offset) is ever read with two different values, over the whole run.
- ``consumer_reads_produced``: every value a consumer reads was produced (to that partition).

The controller quorum's Raft invariants are `kraft.sim.RaftChecker`'s, on the same events.
"""

from __future__ import annotations

from typing import final

from kraft.metadata.image import MetadataImage
from kraft.sim.checker import InvariantViolated
from kraft.sim.cluster_log import SimPartitionLog
from kraft.types import TopicPartition
from storage.records import read_header


@final
class ClusterChecker:
    """Remembers what the cluster committed and fails on the first broken invariant."""

    def __init__(self) -> None:
        self.writers: dict[tuple[TopicPartition, int], int] = {}
        self.committed: dict[TopicPartition, dict[int, tuple[int, int, int]]] = {}
        """tp -> offset -> (batch base offset, leader epoch, crc) of the committed history."""
        self.sequences: dict[TopicPartition, dict[tuple[int, int, int], int]] = {}
        self.acked: dict[TopicPartition, dict[int, int]] = {}
        """tp -> base offset -> crc of every batch acknowledged with acks=all."""
        self._core_epoch: dict[tuple[int, TopicPartition], int] = {}
        self._high_watermark: dict[tuple[int, TopicPartition], tuple[bool, int, int]] = {}
        self._partition_epochs: dict[tuple[str, int], tuple[int, int]] = {}
        self.produced: dict[TopicPartition, set[bytes]] = {}
        self.consumed: dict[TopicPartition, dict[int, bytes | None]] = {}
        """tp -> offset -> the value every consumer read there."""
        self.replicas_removed = 0
        """Replicas a reassignment moved off a broker (KIP-455)."""
        self.quorum_winners: dict[tuple[TopicPartition, int], int] = {}
        """(tp, Raft epoch) -> the broker that won it (quorum-mode partitions)."""
        self.checks = 0

    @staticmethod
    def fail(invariant: str, detail: str) -> None:
        raise InvariantViolated(invariant, detail)

    # --- brokers ------------------------------------------------------------------------------

    def on_crash(self, broker_id: int) -> None:
        """A new incarnation of the broker's replicas follows (a crash or a re-registration)."""
        for key in [k for k in self._core_epoch if k[0] == broker_id]:
            del self._core_epoch[key]
        for key in [k for k in self._high_watermark if k[0] == broker_id]:
            del self._high_watermark[key]

    def on_replica_removed(self, broker_id: int, tp: TopicPartition) -> None:
        """A reassignment (KIP-455) moved ``tp`` off the broker, which deleted its log: a
        later replica there starts afresh (its epochs and high watermark included)."""
        self.replicas_removed += 1
        self._core_epoch.pop((broker_id, tp), None)
        self._high_watermark.pop((broker_id, tp), None)

    def on_leader_append(self, broker_id: int, tp: TopicPartition, epoch: int, base: int) -> None:
        self.checks += 1
        holder = self.writers.setdefault((tp, epoch), broker_id)
        if holder != broker_id:
            self.fail(
                "single_leader_per_epoch",
                f"{tp}: brokers {holder} and {broker_id} both appended as leader in epoch {epoch}"
                f" (at offset {base})",
            )

    def on_quorum_leader(self, tp: TopicPartition, broker_id: int, epoch: int) -> None:
        """A quorum group's replica won the Raft election for ``epoch``: one winner per epoch."""
        self.checks += 1
        holder = self.quorum_winners.setdefault((tp, epoch), broker_id)
        if holder != broker_id:
            self.fail(
                "single_leader_per_epoch",
                f"{tp}: brokers {holder} and {broker_id} both won the Raft election of epoch "
                f"{epoch}",
            )

    def on_core(self, broker_id: int, tp: TopicPartition, leader_epoch: int) -> None:
        self.checks += 1
        key = (broker_id, tp)
        prev = self._core_epoch.get(key, -1)
        if leader_epoch < prev:
            self.fail(
                "monotonic_leader_epoch",
                f"broker {broker_id} {tp}: core went from epoch {prev} to {leader_epoch}",
            )
        self._core_epoch[key] = leader_epoch

    def on_open(self, broker_id: int, tp: TopicPartition, log: SimPartitionLog, hw: int) -> None:
        self._check_committed(broker_id, tp, log, log.log_start_offset, hw)

    def on_high_watermark(
        self,
        broker_id: int,
        tp: TopicPartition,
        log: SimPartitionLog,
        old: int,
        new: int,
        leader_epoch: int,
        *,
        is_leader: bool,
        from_leader: bool,
    ) -> None:
        self.checks += 1
        if new > log.log_end_offset:
            self.fail(
                "high_watermark_within_log",
                f"broker {broker_id} {tp}: HW {new} past log end {log.log_end_offset}",
            )
        key = (broker_id, tp)
        seen = self._high_watermark.get(key)
        if (
            from_leader
            and seen is not None
            and seen[0] == is_leader
            and seen[1] == leader_epoch
            and new < seen[2]
        ):
            role = "leader" if is_leader else "follower"
            self.fail(
                "monotonic_high_watermark",
                f"broker {broker_id} {tp}: {role} HW went from {seen[2]} to {new} "
                f"in leader epoch {leader_epoch}",
            )
        if from_leader:
            self._high_watermark[key] = (is_leader, leader_epoch, new)
        else:  # a new follower core publishes its own HW; the leader's first answer may lower it
            self._high_watermark.pop(key, None)
        if new > old:
            self._check_committed(broker_id, tp, log, old, new)

    def _check_committed(
        self, broker_id: int, tp: TopicPartition, log: SimPartitionLog, low: int, high: int
    ) -> None:
        if low >= high:
            return
        committed = self.committed.setdefault(tp, {})
        sequences = self.sequences.setdefault(tp, {})
        acked = self.acked.get(tp, {})
        for batch in log.batches_between(low, high):
            header = read_header(batch)
            entry = (header.base_offset, header.partition_leader_epoch, header.crc)
            first = committed.get(header.base_offset)
            if first is None:
                for offset in range(header.base_offset, header.next_offset):
                    seen = committed.setdefault(offset, entry)
                    if seen != entry:
                        self._diverged(broker_id, tp, offset, seen, entry, acked)
                if header.producer_id >= 0 and not header.is_control:  # NB: a marker may be
                    # written twice (a new transaction coordinator writes it again)
                    key = (header.producer_id, header.producer_epoch, header.base_sequence)
                    at = sequences.setdefault(key, header.base_offset)
                    if at != header.base_offset:
                        self.fail(
                            "idempotent_no_duplicate",
                            f"{tp}: producer {header.producer_id} sequence "
                            f"{header.base_sequence} committed at {at} and {header.base_offset}",
                        )
            elif first != entry:
                self._diverged(broker_id, tp, header.base_offset, first, entry, acked)

    def _diverged(
        self,
        broker_id: int,
        tp: TopicPartition,
        offset: int,
        seen: tuple[int, int, int],
        entry: tuple[int, int, int],
        acked: dict[int, int],
    ) -> None:
        invariant = "acked_never_lost" if seen[0] in acked else "committed_identical"
        self.fail(
            invariant,
            f"broker {broker_id} {tp}: offset {offset} below the HW holds batch "
            f"(base {entry[0]}, epoch {entry[1]}) but the committed one is "
            f"(base {seen[0]}, epoch {seen[1]})",
        )

    # --- clients ------------------------------------------------------------------------------

    def on_acked(self, tp: TopicPartition, base: int, crc: int) -> None:
        """An acks=all produce succeeded at ``base`` with a batch of CRC ``crc``."""
        self.checks += 1
        entry = self.committed.get(tp, {}).get(base)
        if entry is None or entry[0] != base or entry[2] != crc:
            self.fail(
                "acked_never_lost",
                f"{tp}: acks=all batch acknowledged at {base} is not the committed batch there "
                f"({entry})",
            )
        self.acked.setdefault(tp, {})[base] = crc

    def on_produced(self, tp: TopicPartition, values: list[bytes]) -> None:
        """A producer built a batch of ``values`` (before sending it, maybe never acked)."""
        self.produced.setdefault(tp, set()).update(values)

    def on_consumed(
        self, tp: TopicPartition, offset: int, value: bytes | None, broker_id: int
    ) -> None:
        """A consumer read ``value`` at ``offset`` from ``broker_id``."""
        self.checks += 1
        if value is None or value not in self.produced.get(tp, ()):
            self.fail(
                "consumer_reads_produced",
                f"{tp}: a consumer read {value!r} at offset {offset} from broker {broker_id}, "
                f"which no producer sent",
            )
        seen = self.consumed.setdefault(tp, {}).setdefault(offset, value)
        if seen != value:
            self.fail(
                "consumer_reads_one_content",
                f"{tp}: offset {offset} read as {seen!r} earlier and as {value!r} now "
                f"(from broker {broker_id})",
            )

    def check_acked_on_leader(self, tp: TopicPartition, log: SimPartitionLog, hw: int) -> None:
        """After the heal: every acknowledged batch is in the leader's log below its HW."""
        for base, crc in self.acked.get(tp, {}).items():
            batch = log.batch_at(base)
            if (
                batch is None
                or read_header(batch).crc != crc
                or read_header(batch).next_offset > hw
            ):
                self.fail(
                    "acked_never_lost",
                    f"{tp}: acknowledged batch at {base} is missing from the leader below its "
                    f"HW {hw}",
                )

    # --- controller ---------------------------------------------------------------------------

    def on_metadata(self, image: MetadataImage) -> None:
        self.checks += 1
        for topic, index, registration in image.iter_partitions():
            key = (topic.topic_id, index)
            epochs = (registration.leader_epoch, registration.partition_epoch)
            prev = self._partition_epochs.get(key, (-1, -1))
            if epochs[0] < prev[0] or epochs[1] < prev[1]:
                self.fail(
                    "monotonic_leader_epoch",
                    f"{topic.name}-{index}: (leader, partition) epochs went {prev} -> {epochs}",
                )
            self._partition_epochs[key] = epochs
            isr = registration.isr
            if len(isr) > 1:
                for broker_id in isr:
                    broker = image.broker(broker_id)
                    if broker is None or broker.fenced:
                        self.fail(
                            "isr_never_fenced",
                            f"{topic.name}-{index}: ISR {list(isr)} holds fenced broker "
                            f"{broker_id}",
                        )


__all__ = ["ClusterChecker"]
