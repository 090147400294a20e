"""The Kafka wire protocol on a broker: any Kafka client speaks to kraft through it.

Layers, bottom up (issue 25; DESIGN.md "Two transports, one broker"):

- `frames`: sans-IO framing (`KafkaConnection`): bytes in, decoded kio requests out, responses
  out in request order; ``socket.request.max.bytes``, unknown APIs, KIP-511's ApiVersions
  fallback.
- `entities`: kio entities from plain mappings (`build`, any version) and to byte chunks; the
  length check that runs before kio reads a frame.
- `frame_writer`: a plaintext connection's answers written with one ``writev``.
- `apis`: the transport's one converter, a handler per API (kio <-> kraft's dataclasses)
  around the broker API, in the table that ApiVersions advertises.
- `api`: `KafkaBrokerApi`, the broker API the handlers call (`BrokerApi`, by an alias), and a
  handler's shape (`Handler`, `ApiSpec`).
- `listener`: `KafkaListener`, the asyncio shell of one named listener; `serving`:
  `KafkaListeners`, a broker's listeners started, registered and stopped as one.

A broker starts one `KafkaListener` per Kafka-protocol entry of ``listeners``::

    listener = KafkaListener(KafkaListenerConfig(name="KAFKA", host="127.0.0.1", port=9192), api)
    await listener.start()
"""

from replication.broker.kafka.api import KafkaBrokerApi
from replication.broker.kafka.apis import HANDLERS, SUPPORTED_VERSIONS
from replication.broker.kafka.frames import KafkaConnection
from replication.broker.kafka.listener import (
    DEFAULT_QUEUED_MAX_REQUESTS,
    KafkaListener,
    KafkaListenerConfig,
)

__all__ = [
    "DEFAULT_QUEUED_MAX_REQUESTS",
    "HANDLERS",
    "SUPPORTED_VERSIONS",
    "KafkaBrokerApi",
    "KafkaConnection",
    "KafkaListener",
    "KafkaListenerConfig",
]
