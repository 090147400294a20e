"""The broker's partition replicas: each partition's log and driver, kept in line with the
metadata image, ticked, fetched for, probed and trimmed (Kafka's ``ReplicaManager`` and
``Partition``).

- `replica_manager`, `reconcile`: the replicas this broker should host, by pure rules on the
  image, and the object that opens, changes and closes them;
- `partition`: `PartitionReplica`, the asyncio shell of one partition's driver
  (`replication.driver`); `tick`, `change_event`, `produce_together`, `sequence_turn`: how it
  waits, wakes and appends;
- `fetcher`, `fetch_stream`, `throttle`: a follower's fetches to each leader broker;
- `read_replica` (KIP-392), `stable_reads` (KIP-98), `txn_verification` (KIP-890): what a
  leader answers whom;
- `offline`, `retention`, `cleaner`, `producer_snapshots`, `topic_settings`, `replica_metrics`:
  disk errors, trimming, compaction and the settings and counters of each replica;
- `quorum_host`, `quorum_state`: the Raft groups of quorum-mode replicas.
"""
