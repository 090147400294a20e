"""The Kafka transport's converter: one handler per Kafka API, kio request -> kraft's request
dataclass -> the broker API -> kraft's response dataclass -> kio's fields, in one table.

This package is the only place a kio message becomes one of kraft's dataclasses or the other
way round (the gRPC transport's one converter is `replication.codec`). Beneath it the wire
(`replication.broker.kafka.frames`, `entities`, `listener`) knows nothing of what a request
means; above it the broker API (`replication.broker.api`) knows nothing of kio. A module per
family of APIs, each with its rows of the table:

- `table`: `HANDLERS` (Kafka's ``KafkaApis.handle`` match on the API key; the same rows are what
  ApiVersions advertises, so the two cannot drift), ApiVersions and SaslHandshake;
- `produce` (Produce, InitProducerId; `produce_answer` encodes a clean Produce answer without
  kio), `fetch` (sessions, KIP-227; topic ids, KIP-516), `offsets` (ListOffsets), `metadata`
  (Metadata, DescribeCluster);
- `groups` (FindCoordinator, offsets, KIP-848), `classic_groups` (JoinGroup, SyncGroup, ...),
  `txn` (transactions);
- `admin`, `configs`, `acls`, `features`: the admin APIs, forwarded to the controller
  (`forwarding`).

A handler only converts: it reads the kio request (``getattr`` with a default for a field its
version lacks), calls the broker API with the `RequestContext`, and returns the answer as a
mapping of kio's field names for the newest version (`replication.broker.kafka.entities.build`
makes the version the client asked for). Record batches pass through as bytes both ways.
"""

from replication.broker.kafka.apis.table import HANDLERS, SUPPORTED_VERSIONS

__all__ = ["HANDLERS", "SUPPORTED_VERSIONS"]
