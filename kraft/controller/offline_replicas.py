"""Offline replicas: what the controller does when a broker reports replicas whose log failed.

Kafka (KIP-858, JBOD in KRaft) lets a broker report its offline log directories in every
BrokerHeartbeat; the controller then moves leadership off each partition with a replica in such
a directory and drops that replica from the ISR, in one batch. A kraft broker has one data
directory, so that granularity would take every replica of the broker offline for one full or
corrupt partition log. kraft reports offline *replicas* instead (a documented deviation; see
docs/operations.md): ``BrokerHeartbeatRequest.offline_replicas`` lists the (topic id,
partition) of every replica whose log this broker took offline after a disk error (ENOSPC, EIO,
a corrupt batch found on read).

The rules, each a `PartitionChangeRecord` against the pending image:

- The report is the broker's *whole* set, in every heartbeat, so a lost heartbeat loses
  nothing and a new active controller learns it from the next one.
- A replica newly reported goes into the partition's ``offline_replicas`` and leaves the ISR
  (KIP-841's rule for fenced brokers: unless it is the last member, which stays so that the
  partition can come back without an unclean election); if it led, the leadership moves to an
  acceptable ISR member, else the partition has no leader. `PartitionChangeBuilder` never
  elects a replica in ``offline_replicas``, whatever the election.
- A replica no longer reported (its log was reopened and recovered, or its broker restarted)
  leaves ``offline_replicas``. It comes back as a follower and rejoins the ISR through the
  leader's AlterPartition once caught up, like any follower; a leaderless partition whose
  last ISR member it is elects it again in the same record.
- With eligible leader replicas on (KIP-966), a replica reported offline also leaves the ELR
  and does not join it: its log is being recovered and may miss committed records (the rule
  KIP-966 applies to a broker that shut down uncleanly). The last ISR member then leaves the
  ISR as a fenced one would, and an ELR member may lead.
- An AlterPartition may not add an offline replica to the ISR (INELIGIBLE_REPLICA; see
  `kraft.controller.partition_control`).
- Partitions that no longer exist, or that the broker does not replicate, are ignored.
- A quorum-mode partition keeps its ISR (its replicas) and never gets a leader from here: an
  offline replica that leads is cleared to no leader, and the partition's Raft group reports
  the next one (`kraft.controller.quorum_partitions`).
"""

from __future__ import annotations

from collections.abc import Iterable

from kraft.controller.eligible_leaders import elr_policy
from kraft.controller.messages import TopicIdPartition
from kraft.controller.partition_change import PartitionChangeBuilder
from kraft.controller.partition_control import unclean_election_enabled
from kraft.controller.quorum_partitions import is_quorum_topic
from kraft.metadata.image import MetadataImage
from kraft.metadata.partition_index import sorted_keys
from kraft.metadata.records import PartitionChangeRecord


def offline_replica_changes(
    image: MetadataImage,
    broker_id: int,
    reported: Iterable[TopicIdPartition],
    *,
    elr_enabled: bool = False,
) -> list[PartitionChangeRecord]:
    """The records that bring every partition of ``broker_id`` in line with its report of
    offline replicas (see the module docstring); empty when nothing changes."""
    offline = {(r.topic_id, r.partition) for r in reported}
    records: list[PartitionChangeRecord] = []
    topics = image.topics_by_id
    # NB: only the partitions reported now or marked before (the image's index), not every
    # partition: this runs on every heartbeat (~6 ms a call at 10,000 partitions before).
    candidates = {
        (topic_id, index)
        for topic_id, index in offline
        if (topic := topics.get(topic_id)) is not None and index in topic.partitions
    }
    candidates |= image.partition_index.offline_on(broker_id)
    for topic_id, index in sorted_keys(candidates, topics):
        topic = topics[topic_id]
        partition = topic.partitions[index]
        if broker_id not in partition.replicas:
            continue
        reported_offline = (topic.topic_id, index) in offline
        if reported_offline == (broker_id in partition.offline_replicas):
            continue
        quorum = is_quorum_topic(image, topic.name)
        if reported_offline:
            target_offline = (*partition.offline_replicas, broker_id)
            # KIP-841: the last ISR member stays, so the partition can recover cleanly (with
            # ELR off: the builder keeps it).
            target_isr = tuple(r for r in partition.isr if r != broker_id)
            if quorum:
                target_isr = partition.isr  # no ISR: the replicas (voters), always
        else:
            target_offline = tuple(r for r in partition.offline_replicas if r != broker_id)
            target_isr = partition.isr
        record = (
            PartitionChangeBuilder(
                partition,
                topic.topic_id,
                index,
                is_acceptable_leader=image.is_active_broker,
                unclean_allowed=unclean_election_enabled(image, topic.name),
                leader_by_vote=quorum,
                elr=elr_policy(
                    image,
                    topic.name,
                    partition,
                    enabled=elr_enabled,
                    unclean_shutdown=(broker_id,) if reported_offline else (),
                ),
            )
            .set_target_isr(target_isr)
            .set_target_offline_replicas(target_offline)
            .build()
        )
        if record is not None:
            records.append(record)
    return records


__all__ = ["offline_replica_changes"]
