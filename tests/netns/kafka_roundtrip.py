"""A librdkafka client on a host of its own: run in a client network namespace by the netns
tests, it produces through a netns cluster's Kafka listener and reads the records back:

    ip netns exec NS python tests/netns/kafka_roundtrip.py SETTINGS_JSON   (`run_on_host`)

SETTINGS_JSON: ``{"bootstrap": ..., "topic": ..., "count": N, "security": {...}}`` (security:
librdkafka's keys, {} for plaintext). It prints one JSON line: ``brokers`` (the Kafka listener
addresses Metadata advertised, by broker id), ``delivered`` (acknowledged offsets, in
order), ``read`` (the values read back, in order, by partition 0) and ``errors``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import confluent_kafka


def roundtrip(settings: dict[str, Any]) -> dict[str, Any]:
    common = {"bootstrap.servers": settings["bootstrap"], **settings["security"]}
    topic, count = settings["topic"], int(settings["count"])
    errors: list[str] = []
    delivered: list[int] = []

    def on_delivery(error: Any, message: Any) -> None:
        if error is not None:
            errors.append(str(error))
        else:
            delivered.append(message.offset())

    producer = confluent_kafka.Producer({**common, "acks": "all", "enable.idempotence": True})
    metadata = producer.list_topics(timeout=20)
    brokers = {b.id: f"{b.host}:{b.port}" for b in metadata.brokers.values()}
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode(), partition=0, on_delivery=on_delivery)
    left = producer.flush(30)
    if left:
        errors.append(f"{left} records not delivered in 30 s")

    consumer = confluent_kafka.Consumer(
        {**common, "group.id": "netns-roundtrip", "enable.auto.commit": False}
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    read: list[str] = []
    deadline = time.monotonic() + 30
    while len(read) < len(delivered) and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is None:
            continue
        if message.error() is not None:
            errors.append(str(message.error()))
            continue
        read.append((message.value() or b"").decode())
    consumer.close()
    return {"brokers": brokers, "delivered": delivered, "read": read, "errors": errors}


def librdkafka_security(settings: Mapping[str, str]) -> dict[str, str]:
    """A netns cluster's client settings (kafka-python's names) in librdkafka's: the
    ``KAFKA_*`` variables `kraft netns up` exports, lower-cased and dotted."""
    from kraft.security.tls import KAFKA_CLIENT_ENV

    return {
        KAFKA_CLIENT_ENV[k].removeprefix("KAFKA_").lower().replace("_", "."): v
        for k, v in settings.items()
    }


def run_on_host(
    exec_prefix: Sequence[str], bootstrap: str, topic: str, count: int, security: Mapping[str, str]
) -> dict[str, Any]:
    """`roundtrip` in a process of its own on the host ``exec_prefix`` runs commands on."""
    settings = {"bootstrap": bootstrap, "topic": topic, "count": count, "security": security}
    done = subprocess.run(
        [*exec_prefix, sys.executable, __file__, json.dumps(settings)],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


if __name__ == "__main__":
    print(json.dumps(roundtrip(json.loads(sys.argv[1]))), flush=True)
