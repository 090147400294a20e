"""The pure ISR-replication core: `PartitionLeader`, `PartitionFollower`, `ProducerStateManager`.

These are the rules of Kafka's ``Partition``, ``ReplicaManager`` (produce purgatory),
``AbstractFetcherThread`` and ``ProducerStateManager`` for one partition, with no I/O, no clock
and no randomness: the broker shell owns the `storage.log.SegmentedLog`, the network and the
time, feeds the cores inputs, and applies what they decide. The simulator runs the same cores.

One partition, one core at a time: a `PartitionLeader` while metadata names this broker the
leader, a `PartitionFollower` otherwise. Both share the partition's `ProducerStateManager`
(the shell loads it at startup from a snapshot plus the log, and snapshots it now and then).
When ``handle_partition_change`` returns False, the shell builds the other core, passing the
current high watermark on.

NB: this loop is written once, in `replication.driver.IsrPartitionDriver`, which the broker,
``kraft sim cluster`` and the tests' harness all use; a contract test forbids a second copy.
What follows is what that driver does.

The leader's loop (all on the shell's one event loop, per partition)::

    leader = PartitionLeader(..., log=segmented_log, producer_state=state, now_ms=now)

    # produce
    append = leader.handle_produce_request(PartitionProduce(...), now)
    if append is not None:
        try:
            base = log.append(append.records, leader_epoch=append.leader_epoch)
        except KraftError as e:
            leader.on_append_failed(append.request_id, e.code, now)
        else:
            leader.on_appended(append.request_id, base, now)
    # follower fetch
    answer = leader.handle_follower_fetch(FollowerFetch(...), now)
    records = log.read(answer.read_offset, max_bytes) if answer.read_offset is not None else b""
    # also: handle_alter_partition_response, handle_partition_change, update_brokers, and
    # tick(now) when leader.next_deadline_ms() comes (absolute; ask again after every input)

    while leader.has_ready():          # after every input
        rd = leader.ready()
        if rd.assign_epoch_start:      # 1. epoch cache entry of a new leader epoch (KIP-101)
            log.leader_epoch_cache.assign(*rd.assign_epoch_start)
        publish(rd.high_watermark)     # 2. consumers read below it; wake parked fetches
        answer_produces(rd.produce_completions)   # 3. (nothing for acks=0)
        if rd.alter_partition:         # 4. to the controller; its result goes to
            send(rd.alter_partition)   #    leader.handle_alter_partition_response
        leader.advance(rd)

The follower's loop::

    follower = PartitionFollower(..., truncation_strategy=TruncationStrategy.LEADER_EPOCH)
    if (request := follower.build_fetch_request(now)) is not None:
        send(request)                  # response -> follower.handle_fetch_response(resp, now)
    while follower.has_ready():
        rd = follower.ready()
        if rd.truncate_fully_and_start_at is not None:
            log.truncate_fully_and_start_at(rd.truncate_fully_and_start_at)
        if rd.truncate_to is not None:
            log.truncate_to(rd.truncate_to)
            log.leader_epoch_cache.truncate_from_end(log.log_end_offset)
        if rd.append:
            log.append_as_follower(rd.append)   # on KraftError: follower.on_append_failed(rd, now)
        if rd.rebuild_producer_state:
            state.reload(snapshot_at_or_below(log.log_end_offset), headers_after_it)
        publish(rd.high_watermark)
        follower.advance(rd)

Nothing a peer sends makes a core raise: stale or bad requests are answered with an error
code. Broken call sequences (an append not acknowledged, a Ready not applied) are programmer
errors and fail assertions.
"""

from replication.core.config import ReplicationConfig
from replication.core.delayed_produce import DelayedProduce, DelayedProducePurgatory
from replication.core.fetch_validation import fence_leader_epoch, validate_fetch_position
from replication.core.follower import (
    NO_LEADER,
    FollowerReady,
    PartitionFollower,
    TruncationStrategy,
)
from replication.core.high_watermark import (
    NEVER_MS,
    ReplicaState,
    effective_min_isr,
    high_watermark_candidate,
)
from replication.core.isr_state import (
    AlterPartitionOutcome,
    AlterPartitionVerdict,
    CommittedPartitionState,
    PartitionState,
    PendingExpandIsr,
    PendingPartitionChange,
    PendingShrinkIsr,
    handle_alter_partition_result,
)
from replication.core.leader import LeaderReady, PartitionLeader
from replication.core.log_view import (
    NO_OFFSET,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochCacheView,
    PartitionLogView,
)
from replication.core.messages import (
    ACKS_ALL,
    ACKS_LEADER,
    ACKS_NONE,
    AlterPartitionSend,
    BrokerStatus,
    DivergingEpoch,
    FollowerFetch,
    FollowerFetchRequest,
    FollowerFetchResponse,
    LeaderAppend,
    LeaderFetchAnswer,
    PartitionProduce,
    ProduceCompletion,
)
from replication.core.producer_state import (
    MAX_CACHED_BATCHES,
    BatchMetadata,
    ProducerCheck,
    ProducerStateEntry,
    ProducerStateManager,
    SequenceAccepted,
    SequenceDuplicate,
    SequenceRejected,
)

__all__ = [
    "ACKS_ALL",
    "ACKS_LEADER",
    "ACKS_NONE",
    "MAX_CACHED_BATCHES",
    "NEVER_MS",
    "NO_LEADER",
    "NO_OFFSET",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "AlterPartitionOutcome",
    "AlterPartitionSend",
    "AlterPartitionVerdict",
    "BatchMetadata",
    "BrokerStatus",
    "CommittedPartitionState",
    "DelayedProduce",
    "DelayedProducePurgatory",
    "DivergingEpoch",
    "EpochCacheView",
    "FollowerFetch",
    "FollowerFetchRequest",
    "FollowerFetchResponse",
    "FollowerReady",
    "LeaderAppend",
    "LeaderFetchAnswer",
    "LeaderReady",
    "PartitionFollower",
    "PartitionLeader",
    "PartitionLogView",
    "PartitionProduce",
    "PartitionState",
    "PendingExpandIsr",
    "PendingPartitionChange",
    "PendingShrinkIsr",
    "ProduceCompletion",
    "ProducerCheck",
    "ProducerStateEntry",
    "ProducerStateManager",
    "ReplicaState",
    "ReplicationConfig",
    "SequenceAccepted",
    "SequenceDuplicate",
    "SequenceRejected",
    "TruncationStrategy",
    "effective_min_isr",
    "fence_leader_epoch",
    "handle_alter_partition_result",
    "high_watermark_candidate",
    "validate_fetch_position",
]
