"""``kraft bench produce send``: the producer client alone, against a stub network that answers
every Produce at once (no cluster, no gRPC): its CPU per record.

    python -m kraft.bench.produce_consume send --records 200000
"""

from __future__ import annotations

import time
from typing import Any

from kraft.bench.produce_consume import PARTITIONS, produce


def send_micro(
    records: int, size: int, acks: str, window: int, linger_ms: int, batch_size: int
) -> dict[str, Any]:
    """The producer client alone: `produce`'s harness against a stub network that answers
    every Produce at once from one callback thread (as gRPC's), with no cluster and no gRPC.
    Reports the calling thread's CPU per record (``send`` + the harness's
    ``add_done_callback``) and the whole process's (with the sender thread and callbacks)."""
    from concurrent.futures import ThreadPoolExecutor

    from replication.clients.network import BrokerNetwork
    from replication.messages import (
        InitProducerIdResponse,
        MetadataBroker,
        MetadataPartition,
        MetadataResponse,
        MetadataTopic,
        ProducePartitionResponse,
        ProduceRequest,
        ProduceResponse,
        ProduceTopicResponse,
    )

    brokers = (1, 2, 3)

    class StubNetwork(BrokerNetwork):
        def __init__(self) -> None:
            super().__init__("stub-1:1")
            self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="stub-callbacks")

        def call(self, address: str, method: str, request: Any, *a: Any, **k: Any) -> Any:
            if method == "InitProducerId":
                return InitProducerIdResponse(producer_id=1, producer_epoch=0)
            assert method == "Metadata", method
            return MetadataResponse(
                brokers=tuple(MetadataBroker(node_id=b, host=f"stub-{b}", port=1) for b in brokers),
                topics=tuple(
                    MetadataTopic(
                        name=t,
                        partitions=tuple(
                            MetadataPartition(
                                partition_index=p, leader_id=p % 3 + 1, leader_epoch=0
                            )
                            for p in range(PARTITIONS)
                        ),
                    )
                    for t in request.topics
                ),
            )

        def call_async(
            self, address: str, method: str, request: Any, response_cls: Any, on_done: Any, *a: Any
        ) -> Any:
            assert isinstance(request, ProduceRequest)
            response = ProduceResponse(
                responses=tuple(
                    ProduceTopicResponse(
                        name=t.name,
                        partition_responses=tuple(
                            ProducePartitionResponse(index=p.index, base_offset=0)
                            for p in t.partition_data
                        ),
                    )
                    for t in request.topic_data
                )
            )
            return self.pool.submit(on_done, response, None)

    network = StubNetwork()
    cpu0, thread0 = time.process_time(), time.thread_time()
    try:
        out = produce(
            "stub-1:1", "bench", records, size, acks, window, linger_ms, batch_size, network
        )
    finally:
        network.pool.shutdown()
    thread_s, process_s = time.thread_time() - thread0, time.process_time() - cpu0
    out["calling_thread_cpu_us_per_record"] = round(thread_s / records * 1e6, 2)
    out["client_cpu_us_per_record"] = round(process_s / records * 1e6, 2)
    return out


__all__ = ["send_micro"]
