"""The coordinators a broker hosts on its internal topics' partitions (Kafka's
``coordinator.group`` and ``coordinator.transaction``).

- `group_runtime`, `group_shard`: the shell that runs the pure coordinators
  (`replication.group`) of each ``__consumer_offsets`` partition this broker leads;
- `group_service` (KIP-848 and the offsets APIs), `classic_service` (JoinGroup, SyncGroup, ...),
  `group_lag`, `coordinator_lookup` (FindCoordinator);
- `txn_service`, `txn_markers` (KIP-98), `producer_ids`: the transaction coordinator, its
  markers, and producer ids from the controller's blocks.
"""
