"""The broker API: one handler per Kafka API, shared by every transport (no grpc here).

Kafka's `KafkaApis`: each handler of `BrokerApi` takes a request dataclass and a
`RequestContext` and returns a response dataclass with Kafka's error codes inside.
Authorization, request limits and metrics run in this layer, so neither the gRPC adapter
(`replication.broker.grpc`) nor the Kafka listener can skip them.
"""

from replication.broker.api.authorization import Refused
from replication.broker.api.broker_api import BrokerApi
from replication.broker.api.context import RequestContext

__all__ = ["BrokerApi", "Refused", "RequestContext"]
