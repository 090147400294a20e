"""The active controller's periodic work (`ControllerCore.tick`), as a pure function of the
pending image, the brokers' sessions, the leader balancer and the time.

One tick makes one atomic batch (possibly empty):

- fence a broker silent for ``broker.session.timeout.ms``, with its ISR removals and leader
  moves (KIP-841), one broker and at most ``PARTITION_CHANGES_PER_BATCH`` partition changes per
  tick (`fence_one_expired_broker`): its session stays expired, so the next tick comes at once
  and takes the next step;
- else one step of a controlled shutdown under way (`controlled_shutdown_tick`), the next tick
  at once;
- elect leaders for offline partitions that now can have one (for example after
  ``unclean.leader.election.enable`` was turned on for a topic), at most
  ``PARTITION_CHANGES_PER_BATCH`` per tick;
- when a leader-balance check is due, elect preferred leaders where a broker's imbalance
  exceeds ``leader.imbalance.per.broker.percentage`` (`kraft.controller.leader_balance`);
- complete the reassignments a change made complete (KIP-455), when asked to scan;
- finalize the configured feature levels the cluster has none of yet (the first active
  controller of a new cluster: `kraft.metadata.features`).

Each step decides against the image the batch's earlier records leave behind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from structlog.typing import FilteringBoundLogger

from kraft.controller.cluster_control import (
    PARTITION_CHANGES_PER_BATCH,
    BrokerHeartbeatManager,
    controlled_shutdown_tick,
    fence_one_expired_broker,
)
from kraft.controller.leader_balance import LeaderBalancer
from kraft.controller.partition_control import elect_offline_leaders
from kraft.controller.reassignment import complete_reassignments
from kraft.metadata.features import bootstrap_records
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import MetadataRecord, PartitionChangeRecord


@dataclass(frozen=True, slots=True)
class PeriodicWork:
    records: tuple[MetadataRecord, ...]
    """One batch, in order."""
    after: MetadataImage
    """The pending image with ``records`` applied."""
    more: bool
    """Work is left for a tick at once (a fencing or shutdown step, or electable partitions
    beyond this batch's limit)."""


def periodic_work(
    pending: MetadataImage,
    heartbeats: BrokerHeartbeatManager,
    balancer: LeaderBalancer,
    *,
    now_ms: int,
    base_offset: int,
    epoch: int,
    elr_enabled: bool,
    scan_reassignments: bool,
    features: Mapping[str, int],
    log: FilteringBoundLogger,
) -> PeriodicWork:
    """The tick's batch, to be appended at ``base_offset`` in ``epoch`` (see the module)."""
    records, fenced = fence_one_expired_broker(pending, heartbeats, now_ms, elr_enabled=elr_enabled)
    more_shutdown = bool(records) and fenced is None  # a fencing step: more may be left
    if not records:
        # One step of a controlled shutdown under way (its heartbeats take steps too).
        shutdown, more_shutdown = controlled_shutdown_tick(pending, elr_enabled=elr_enabled)
        records.extend(shutdown)
    working = pending.apply_batch(records, base_offset, epoch)

    def acceptable(broker_id: int) -> bool:
        # NB: not a broker whose fencing is under way (its session expired): electing it
        # again would undo the step that just moved its leaderships.
        return working.is_active_broker(broker_id) and not heartbeats.session_expired(
            broker_id, now_ms
        )

    offline = elect_offline_leaders(
        working,
        is_acceptable=acceptable,
        elr_enabled=elr_enabled,
        limit=PARTITION_CHANGES_PER_BATCH,
    )
    if offline:
        working = working.apply_batch(offline, base_offset + len(records), epoch)
        records.extend(offline)
    if (due := balancer.next_deadline_ms()) is not None and now_ms >= due:
        balanced = balancer.maybe_balance(working, now_ms)
        if balanced:
            log.info("leaders_rebalanced", partitions=len(balanced))
            working = working.apply_batch(balanced, base_offset + len(records), epoch)
        records.extend(balanced)
    if scan_reassignments:
        completed = complete_reassignments(working)
        if completed:
            working = working.apply_batch(completed, base_offset + len(records), epoch)
        records.extend(completed)
    finalized = bootstrap_records(working.features, features)
    if finalized:
        log.info("features_finalized", **{r.name: r.feature_level for r in finalized})
        working = working.apply_batch(finalized, base_offset + len(records), epoch)
        records.extend(finalized)
    if fenced is not None:
        log.info(
            "brokers_fenced_on_session_timeout",
            broker_ids=[fenced],
            partition_changes=count_partition_changes(records),
        )
    more = more_shutdown or len(offline) >= PARTITION_CHANGES_PER_BATCH
    return PeriodicWork(records=tuple(records), after=working, more=more)


def count_partition_changes(records: Sequence[MetadataRecord]) -> int:
    return sum(isinstance(r, PartitionChangeRecord) for r in records)
