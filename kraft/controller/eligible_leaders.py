"""Eligible leader replicas (KIP-966): who may lead a partition whose ISR lost its last member.

Kafka's "strict min ISR" rule (the broker side, `replication.core.high_watermark`): a leader's
high watermark does not move while its ISR is smaller than the effective
``min.insync.replicas``. So a replica that leaves the ISR while the ISR is (or becomes) smaller
than that still holds every committed record: the ISR moved on without it, the high watermark
did not. KIP-966 keeps such replicas as the partition's **ELR** instead of forgetting them, and
lets them lead when the ISR is empty. The rules (Kafka's ``PartitionChangeBuilder``, here as
pure functions the builder calls in one place, `kraft.controller.partition_change`):

1. **Joining.** When a change leaves the ISR below the effective min ISR, every member of the
   current ISR or ELR that is not in the new ISR is in the new ELR. With ELR the ISR may become
   empty: a fenced last member moves to the ELR (without ELR, KIP-841 keeps it in the ISR).
2. **Clearing.** Once the ISR is back at the min ISR or above, the ELR is empty.
3. **Unclean shutdown.** A replica whose broker registers again without having shut down
   cleanly (its ``previous_broker_epoch`` is not the epoch it had), or that reports its log
   offline, may have lost committed records: it leaves the ELR and never joins it in that
   change.
4. **Election order** (`PartitionChangeBuilder.elect_leader`): the ISR; if the ISR is empty, the
   first acceptable (unfenced, active) ELR member in replicas order, which becomes the ISR
   alone; if ISR and ELR are both empty, the last known leader once it is acceptable again
   (an unclean election: ISR = [it], RECOVERING, KIP-704; this keeps the availability Kafka had
   before ELR when every replica went down); then an unclean election where allowed.
5. **Last known leader.** When a change empties the ISR, the leader it had is recorded in
   ``last_known_elr``; a change that gives the partition a leader clears it.

The gate is the controller key ``eligible.leader.replicas.enable`` (default true in kraft; Kafka
4.0 shipped it off, 4.1 turns it on for new clusters). With it off, the ELR fields are cleared
on a partition's next change and KIP-841's rule (the last ISR member stays) applies.

The controller's min ISR is the broker's: ``min.insync.replicas`` of the topic, capped at the
replication factor (`effective_min_isr`), since that is when the broker's high watermark stops.
A change of ``min.insync.replicas`` clears every affected ELR (`clear_elr_on_min_isr_change`): a
lower min ISR lets the high watermark move past the ELR members again.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from kraft.metadata.configs import MIN_INSYNC_REPLICAS, effective_min_isr
from kraft.metadata.image import MetadataImage, PartitionRegistration
from kraft.metadata.records import NO_LEADER, PartitionChangeRecord


@dataclass(frozen=True, slots=True)
class ElrPolicy:
    """ELR is on for this change: the partition's effective min ISR, and the replicas known to
    have shut down uncleanly (rule 3)."""

    min_isr: int
    unclean_shutdown: frozenset[int] = frozenset()


def elr_policy(
    image: MetadataImage,
    topic_name: str,
    partition: PartitionRegistration,
    *,
    enabled: bool,
    unclean_shutdown: Collection[int] = (),
) -> ElrPolicy | None:
    """The policy for one partition's change, or None when ELR is off."""
    if not enabled:
        return None
    configured = int(image.topic_config(topic_name, MIN_INSYNC_REPLICAS))
    return ElrPolicy(
        min_isr=effective_min_isr(configured, len(partition.replicas)),
        unclean_shutdown=frozenset(unclean_shutdown),
    )


def target_elr(
    current: PartitionRegistration, target_isr: Sequence[int], policy: ElrPolicy
) -> tuple[int, ...]:
    """Rules 1-3: the ELR that goes with ``target_isr`` (before the election)."""
    if len(target_isr) >= policy.min_isr:
        return ()
    leaving = set(current.elr) | set(current.isr)
    return tuple(
        r
        for r in current.replicas
        if r in leaving and r not in target_isr and r not in policy.unclean_shutdown
    )


def last_known_leader(current: PartitionRegistration) -> int | None:
    """Rule 4's third choice: the recorded last leader, if the record names exactly one."""
    if len(current.last_known_elr) != 1:
        return None
    return current.last_known_elr[0]


def target_last_known_elr(
    current: PartitionRegistration, new_isr: Sequence[int], new_leader: int
) -> tuple[int, ...]:
    """Rule 5: the ``last_known_elr`` after a change to ``new_isr`` and ``new_leader``. (A
    partition that had no leader when its ISR emptied records its last ISR member.)"""
    if not new_isr and current.isr:
        return (current.leader,) if current.leader != NO_LEADER else current.isr[:1]
    if new_leader != NO_LEADER:
        return ()
    return current.last_known_elr


def clear_elr_on_min_isr_change(
    image: MetadataImage, topic_names: Collection[str]
) -> list[PartitionChangeRecord]:
    """Clear the ELR of every partition of ``topic_names`` whose ``min.insync.replicas`` just
    changed (Kafka does the same): with a lower min ISR the high watermark may move past an ELR
    member, which then no longer holds every committed record. The last known leader stays
    (it is only ever elected uncleanly)."""
    records: list[PartitionChangeRecord] = []
    for topic, index, partition in image.iter_partitions():
        if topic.name in topic_names and partition.elr:
            records.append(
                PartitionChangeRecord(
                    topic_id=topic.topic_id, partition=index, eligible_leader_replicas=()
                )
            )
    return records


__all__ = [
    "ElrPolicy",
    "clear_elr_on_min_isr_change",
    "elr_policy",
    "last_known_leader",
    "target_elr",
    "target_last_known_elr",
]
