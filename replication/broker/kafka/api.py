"""`KafkaBrokerApi`: what the Kafka listener calls, the broker API itself; and the shape of a
Kafka API handler.

The broker API (`replication.broker.api.BrokerApi`) serves every transport: each handler takes
one of kraft's request dataclasses and the transport's `RequestContext`, so a Kafka client is
authorized, bounded and counted exactly as a gRPC one is. The listener and its handlers name it
by this alias, the one home of the handlers' signatures (tests hand in objects with the same
methods).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from replication.broker.api import RequestContext
from replication.broker.api.broker_api import BrokerApi
from replication.broker.kafka.frames import Encoded, Request

KafkaBrokerApi: TypeAlias = BrokerApi

Response: TypeAlias = Mapping[str, Any] | Encoded | None
"""A handler's answer: kio's field names for the newest version (the listener builds the
version asked for), bytes already encoded, or None for no answer (Produce with acks=0)."""

Handler: TypeAlias = Callable[[KafkaBrokerApi, Request, RequestContext], Awaitable[Response]]
"""One Kafka API's handler: the kio request in, the broker API called, the answer out."""


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """One row of the Kafka listener's table: an API's name, the versions served, its handler."""

    name: str
    """Kafka's name of the API (``RequestContext.api``)."""
    min_version: int
    max_version: int
    handle: Handler


__all__ = ["ApiSpec", "Handler", "KafkaBrokerApi", "Response"]
