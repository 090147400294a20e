"""`KafkaBrokerApi`: what the Kafka listener calls, the broker API itself.

The broker API (`replication.broker.api.BrokerApi`) serves every transport: each handler takes
one of kraft's request dataclasses and the transport's `RequestContext`, so a Kafka client is
authorized, bounded and counted exactly as a gRPC one is. The listener and its handlers name it
by this alias, the one home of the handlers' signatures (tests hand in objects with the same
methods).
"""

from __future__ import annotations

from typing import TypeAlias

from replication.broker.api.broker_api import BrokerApi

KafkaBrokerApi: TypeAlias = BrokerApi

__all__ = ["KafkaBrokerApi"]
