"""The broker's gRPC transport: thin adapters from ``kraft.v1.Broker`` and the forwarded
``kraft.v1.Controller`` calls to `replication.broker.api.BrokerApi` (`replication.broker.grpc.
adapter`)."""

from replication.broker.grpc.adapter import GrpcPeers, add_broker_api_to_server

__all__ = ["GrpcPeers", "add_broker_api_to_server"]
