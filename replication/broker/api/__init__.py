"""The broker API: one handler per Kafka API, shared by every transport (no grpc here).

Kafka's `KafkaApis`: each handler takes a request dataclass and a `RequestContext` and returns
a response dataclass with Kafka's error codes inside. Authorization, request limits and metrics
run in this layer, so neither the gRPC adapter nor the Kafka listener can skip them.
"""

from replication.broker.api.context import RequestContext

__all__ = ["RequestContext"]
