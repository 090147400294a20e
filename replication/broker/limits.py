"""Request limits of the broker's APIs: what one request may name, checked by the API layer
(`replication.broker.api`) on the dataclasses and, before decoding, by a transport on its wire
message, which has the same field names."""

from __future__ import annotations

from typing import Final

MAX_PARTITIONS_PER_REQUEST: Final = 10_000
"""The most partitions (or topic names) one client request may name, as the controller bounds
one admin request (`kraft.controller.limits`). Found by ``kraft fuzz``: one ListOffsets naming
10^6 partitions (4.9 MB) held the broker's event loop for 22 s, heartbeats included. A
follower's fetch (``replica_id >= 0``) is exempt: it names what its leader leads."""


def too_many_partitions(request: object) -> str | None:
    """Why ``request`` names too many partitions, or None.

    ``request`` is an API dataclass (`replication.messages`) or
    a transport's message with the same field names (the gRPC adapter counts on the proto
    message before decoding it, so a huge request costs no decoding): ``topics`` or
    ``topic_data``, each with ``partitions`` or ``partition_data`` (a bare name counts one).
    """
    if type(request).__name__ == "BrokerFetchRequest" and getattr(request, "replica_id", -1) >= 0:
        return None
    topics = getattr(request, "topics", None)
    if topics is None:
        topics = getattr(request, "topic_data", None)
    if topics is None:
        return None
    count = 0
    for topic in topics:
        partitions = getattr(topic, "partitions", None)
        if partitions is None:
            partitions = getattr(topic, "partition_data", None)
        count += 1 if partitions is None else len(partitions)
        if count > MAX_PARTITIONS_PER_REQUEST:
            return (
                f"INVALID_REQUEST: the request names more than {MAX_PARTITIONS_PER_REQUEST} "
                "partitions"
            )
    return None


__all__ = ["MAX_PARTITIONS_PER_REQUEST", "too_many_partitions"]
