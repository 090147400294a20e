"""Validation of a follower's fetch position against the leader's log: pure functions.

`validate_fetch_position` is Kafka's ``Partition.readRecords`` check (KIP-320 truncation on
fetch, with KIP-101/279 semantics): the follower sends the epoch of its last batch
(``last_fetched_epoch``) with its fetch offset, and the leader looks that epoch up in its
epoch cache (OffsetForLeaderEpoch). If the leader's log has the epoch ending at or after the
fetch offset, the logs agree up to it; if the epoch ended earlier, or the leader never had it
(the answer is its largest epoch below), the follower's log diverges and the answer carries
``diverging_epoch = (epoch, end offset)`` instead of records. The follower then truncates to
``min(end offset, its own end offset of that epoch)`` and fetches again.

`fence_leader_epoch` is KIP-320's fencing of a fetch that names another leader epoch, and
`fence_follower_broker_epoch` binds a follower's fetch to its broker registration (KIP-903).
"""

from __future__ import annotations

from kraft.types import Epoch, Offset
from replication.core.log_view import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, PartitionLogView
from replication.core.messages import DivergingEpoch, LeaderFetchAnswer
from storage.errors import ErrorCode


def fence_leader_epoch(current_leader_epoch: int, leader_epoch: int) -> ErrorCode | None:
    """KIP-320: FENCED_LEADER_EPOCH for an older epoch, UNKNOWN_LEADER_EPOCH for a newer one
    (our metadata lags), None when they match or the fetch names none (-1)."""
    if current_leader_epoch == -1 or current_leader_epoch == leader_epoch:
        return None
    if current_leader_epoch < leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    return ErrorCode.UNKNOWN_LEADER_EPOCH


def fence_follower_broker_epoch(
    fetch_broker_epoch: int, registered_broker_epoch: int | None
) -> ErrorCode | None:
    """A follower fetch is bound to the replica's registration: it must carry the broker epoch
    the metadata has for that replica (KIP-903's replica epoch). Until TLS binds the sender,
    this is what stops a fetch that merely claims a replica id from moving the high watermark
    or the ISR: it must also name the live registration's epoch.

    Returns:
        NOT_LEADER_OR_FOLLOWER for an older incarnation or an unregistered broker,
        UNKNOWN_LEADER_EPOCH for a newer epoch than the metadata has, else None.
    """
    if registered_broker_epoch is None or fetch_broker_epoch < registered_broker_epoch:
        # Kafka's Replica.updateFetchStateOrThrow: an older broker incarnation (or none:
        # -1 is not accepted from a follower, every kraft follower sends its epoch).
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if fetch_broker_epoch > registered_broker_epoch:
        # A registration our metadata has not caught up with (or a made-up epoch): not
        # yet recognized, retriable, as Kafka answers a replica it does not know yet.
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return None


def validate_fetch_position(
    log: PartitionLogView,
    *,
    fetch_offset: Offset,
    last_fetched_epoch: Epoch,
    high_watermark: Offset,
) -> LeaderFetchAnswer:
    """How to answer a fetch at ``(fetch_offset, last_fetched_epoch)``.

    Returns:
        An answer with ``read_offset = fetch_offset`` when the follower's log agrees with ours
        up to ``fetch_offset``; with ``diverging_epoch`` when it does not; or with
        OFFSET_OUT_OF_RANGE when ``fetch_offset`` is outside ``[log start, log end]`` or the
        epoch's end offset is unknown. Every answer carries ``high_watermark`` and our log
        start and end offsets.
    """
    start, end = Offset(log.log_start_offset), Offset(log.log_end_offset)
    out_of_range = LeaderFetchAnswer(
        error_code=ErrorCode.OFFSET_OUT_OF_RANGE,
        high_watermark=high_watermark,
        log_start_offset=start,
        log_end_offset=end,
    )
    if last_fetched_epoch >= 0:
        epoch, end_offset = log.leader_epoch_cache.end_offset_for(last_fetched_epoch)
        if epoch == UNDEFINED_EPOCH or end_offset == UNDEFINED_EPOCH_OFFSET:
            return out_of_range
        # Kafka: below the log start it is out of range, diverging or not.
        if fetch_offset < start:
            return out_of_range
        if epoch < last_fetched_epoch or end_offset < fetch_offset:
            return LeaderFetchAnswer(
                high_watermark=high_watermark,
                log_start_offset=start,
                log_end_offset=end,
                diverging_epoch=DivergingEpoch(epoch=Epoch(epoch), end_offset=Offset(end_offset)),
            )
    if not start <= fetch_offset <= end:
        return out_of_range
    return LeaderFetchAnswer(
        high_watermark=high_watermark,
        log_start_offset=start,
        log_end_offset=end,
        read_offset=fetch_offset,
    )


__all__ = ["fence_follower_broker_epoch", "fence_leader_epoch", "validate_fetch_position"]
