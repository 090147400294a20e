"""One member of a classic consumer group, as its own process (the tests kill it with SIGKILL):

    python -m tests.kafka_wire.group_member CLIENT BOOTSTRAP TOPIC GROUP ASSIGNOR

CLIENT is kafka-python, aiokafka or confluent-kafka; ASSIGNOR the client's assignor name
("" for its default). It subscribes, and prints one JSON line per event, flushed:
``{"assigned": [partitions]}`` whenever its assignment changes and
``{"partition": p, "offset": o, "value": v}`` per record, printed before the record's offset
is committed (so a record is printed again only if its commit did not happen: after a kill).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

SESSION_TIMEOUT_MS = 6_000  # kraft's (and Kafka's) group.min.session.timeout.ms
HEARTBEAT_INTERVAL_MS = 1_000


def say(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


class Printer:
    def __init__(self) -> None:
        self.assigned: list[int] | None = None

    def assignment(self, partitions: list[int]) -> None:
        partitions = sorted(partitions)
        if partitions != self.assigned:
            self.assigned = partitions
            say({"assigned": partitions})

    def record(self, partition: int, offset: int, value: bytes | None) -> None:
        say({"partition": partition, "offset": offset, "value": (value or b"").decode()})


def run_kafka_python(bootstrap: str, topic: str, group: str, assignor: str) -> None:
    import kafka
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    assignors: dict[str, Any] = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "cooperative-sticky": CooperativeStickyAssignor,
    }
    extra = {"partition_assignment_strategy": [assignors[assignor]]} if assignor else {}
    consumer = kafka.KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
        **extra,
    )
    out = Printer()
    while True:
        batches = consumer.poll(200)
        out.assignment([tp.partition for tp in consumer.assignment()])
        for tp, records in batches.items():
            for r in records:
                out.record(tp.partition, r.offset, r.value)
        if batches:
            consumer.commit()


async def run_aiokafka(bootstrap: str, topic: str, group: str, assignor: str) -> None:
    import aiokafka
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    assignors: dict[str, Any] = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
    }
    extra = {"partition_assignment_strategy": (assignors[assignor],)} if assignor else {}
    consumer = aiokafka.AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
        **extra,
    )
    await consumer.start()
    out = Printer()
    while True:
        batches = await consumer.getmany(timeout_ms=200)
        out.assignment([tp.partition for tp in consumer.assignment()])
        for tp, records in batches.items():
            for r in records:
                out.record(tp.partition, r.offset, r.value)
        if batches:
            await consumer.commit()


def run_confluent(bootstrap: str, topic: str, group: str, assignor: str) -> None:
    import confluent_kafka

    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": SESSION_TIMEOUT_MS,
        "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
    }
    if assignor:
        config["partition.assignment.strategy"] = assignor
    consumer = confluent_kafka.Consumer(config)
    consumer.subscribe([topic])
    out = Printer()
    while True:
        message = consumer.poll(0.2)
        out.assignment([tp.partition for tp in consumer.assignment()])
        if message is None or message.error() is not None:
            continue
        out.record(message.partition(), message.offset(), message.value())
        consumer.commit(message=message, asynchronous=False)


def main() -> None:
    client, bootstrap, topic, group, assignor = sys.argv[1:6]
    if client == "kafka-python":
        run_kafka_python(bootstrap, topic, group, assignor)
    elif client == "aiokafka":
        asyncio.run(run_aiokafka(bootstrap, topic, group, assignor))
    elif client == "confluent-kafka":
        run_confluent(bootstrap, topic, group, assignor)
    else:
        raise SystemExit(f"unknown client {client!r}")


if __name__ == "__main__":
    main()
