"""A client request naming more than 10,000 partitions is refused before it is decoded (found
by ``kraft fuzz``: one ListOffsets naming 10^6 partitions held a broker's event loop for
22 s); a follower's fetch names what its leader leads and is exempt."""

from __future__ import annotations

import time

import grpc
import pytest

from kraft._generated import broker_pb2
from kraft.cluster import LocalCluster
from kraft.transport.channels import client_channel
from replication.broker.service import MAX_PARTITIONS_PER_REQUEST, too_many_partitions


def _list_offsets(topics: int, partitions: int) -> broker_pb2.ListOffsetsRequest:
    return broker_pb2.ListOffsetsRequest(
        topics=[
            broker_pb2.ListOffsetsTopic(
                name=f"t{i}",
                partitions=[
                    broker_pb2.ListOffsetsPartition(partition_index=j) for j in range(partitions)
                ],
            )
            for i in range(topics)
        ]
    )


def test_the_bound_counts_partitions_across_topics_and_topic_names() -> None:
    assert too_many_partitions(_list_offsets(100, 100)) is None  # exactly the bound
    assert "10000" in (too_many_partitions(_list_offsets(101, 100)) or "")
    names = broker_pb2.MetadataRequest(
        topics=[f"t{i}" for i in range(MAX_PARTITIONS_PER_REQUEST + 1)]
    )
    assert too_many_partitions(names) is not None
    produce = broker_pb2.ProduceRequest(
        topic_data=[
            broker_pb2.ProduceTopicData(
                name="t",
                partition_data=[broker_pb2.ProducePartitionData(index=j) for j in range(10_001)],
            )
        ]
    )
    assert too_many_partitions(produce) is not None
    follower = broker_pb2.BrokerFetchRequest(
        replica_id=101,
        topics=[
            broker_pb2.FetchTopic(
                topic="t",
                partitions=[broker_pb2.FetchPartition(partition=j) for j in range(20_000)],
            )
        ],
    )
    assert too_many_partitions(follower) is None


@pytest.mark.process
@pytest.mark.timeout(120)
def test_a_broker_refuses_a_huge_list_offsets_at_once() -> None:
    with LocalCluster(controllers=1, brokers=1) as cluster:
        cluster.wait_until_healthy(timeout=60)
        address = next(iter(cluster.broker_addresses.values()))
        with client_channel(address) as channel:
            call = channel.unary_unary(
                "/kraft.v1.Broker/ListOffsets",
                request_serializer=lambda b: b,
                response_deserializer=lambda b: b,
            )
            started = time.monotonic()
            with pytest.raises(grpc.RpcError) as raised:
                call(_list_offsets(1000, 1000).SerializeToString(), timeout=30)
            assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "more than 10000 partitions" in (raised.value.details() or "")
            assert time.monotonic() - started < 15  # refused, not processed for 20 s
