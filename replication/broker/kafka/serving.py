"""`KafkaListeners`: a broker's Kafka-protocol listeners, started, registered and stopped as one.

The broker's whole hook: build it with the broker, ``await start()`` once its gRPC port is
bound, register ``endpoints()`` with the controller after its gRPC endpoint, ``await stop()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.metadata.records import Endpoint
from replication.broker.kafka.api import KafkaBrokerApi
from replication.broker.kafka.listener import KafkaListener, KafkaListenerConfig

if TYPE_CHECKING:
    from replication.broker.config import BrokerNodeConfig


class KafkaListeners:
    """One `KafkaListener` per Kafka entry of ``listeners`` (`BrokerNodeConfig.kafka_listeners`)."""

    def __init__(self, config: BrokerNodeConfig, api: KafkaBrokerApi) -> None:
        self._config = config
        self.listeners = [
            KafkaListener(
                KafkaListenerConfig(
                    name=spec.name,
                    host=spec.listen.rpartition(":")[0].strip("[]"),
                    port=int(spec.listen.rpartition(":")[2] or 0),
                    security_protocol=spec.security_protocol,
                    max_request_bytes=config.socket_request_max_bytes,
                    queued_max_requests=config.queued_max_requests,
                    tls=config.kafka_tls.get(spec.name),  # only SSL listeners have one
                    principal_rules=config.authorization.principal_rules,
                ),
                api,
            )
            for spec in config.kafka_listeners
        ]

    async def start(self) -> None:
        """Bind every listener. Raises OSError when one cannot bind (the others are stopped)."""
        try:
            for listener in self.listeners:
                await listener.start()
        except OSError:
            await self.stop()
            raise

    def endpoints(self) -> tuple[Endpoint, ...]:
        """What to register: each listener's advertised address (else its bound one)."""
        out = []
        for spec, listener in zip(self._config.kafka_listeners, self.listeners, strict=True):
            host, _, port = (spec.advertised or spec.listen).rpartition(":")
            if spec.advertised is None:
                port = str(listener.bound_port or port)
            out.append(
                Endpoint(
                    name=spec.name,
                    host=host.strip("[]"),
                    port=int(port),
                    security_protocol=spec.security_protocol,
                )
            )
        return tuple(out)

    async def stop(self) -> None:
        for listener in self.listeners:
            await listener.stop()


__all__ = ["KafkaListeners"]
