"""The controller's pure decision logic: Kafka's QuorumController minus the I/O.

`ControllerCore` takes controller requests and ticks, and answers with a `ControllerResult`:
the metadata records to append as **one atomic Raft batch**, and the response to release once
that batch has committed. It never touches the network, the disk or the clock (time is the
``now_ms`` argument; randomness is the injected ``rng``), so the same code runs in the gRPC
server and in the deterministic simulator.

Usage (the shell's loop)::

    core = ControllerCore(rng=random.Random(seed), config=ControllerConfig())

    # Every controller replays the committed log (standbys too, to be ready for failover):
    for entry in ready.committed_entries:
        core.replay(decode_record(entry.value), entry.offset, entry.epoch)

    # When this node's Raft leader has committed its epoch-start entry:
    core.become_active(epoch=epoch, next_offset=raft.log_end_offset, now_ms=now_ms)

    result = core.handle_create_topics_request(request, now_ms)
    if result.records:
        raft.propose([encode_record(r) for r in result.records], now_ms)   # one batch
        ...await the commit of that batch, then reply result.response
    else:
        reply result.response

    # At core.next_deadline_ms() (absolute; None: no timer), and after every input:
    batch = core.tick(now_ms)          # session-timeout fencing; propose if non-empty

    # On losing leadership (or if a propose fails): drop uncommitted state.
    core.resign()

Decisions are made against the *pending* image (committed + produced-but-uncommitted records);
``resign`` rolls it back to the committed image. See `kraft.controller.core` for the offset
contract (a broker epoch is the offset of its registration record).

The request handlers are also available as pure functions of a `MetadataImage` in the
``*_control`` modules (and `kraft.controller.reassignment` for KIP-455 reassignments), and
`place_replicas` / `PartitionChangeBuilder` can be used on their own.
"""

from kraft.controller.cluster_control import PRODUCER_ID_BLOCK_SIZE, BrokerHeartbeatManager
from kraft.controller.core import ControllerConfig, ControllerCore
from kraft.controller.messages import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    AlterConfigsResourceResult,
    AlterPartitionData,
    AlterPartitionPartitionResult,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopic,
    AlterPartitionTopicResult,
    BrokerEpochState,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    ControllerRequest,
    CreatableTopic,
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    ElectionType,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
    PartitionElectionResult,
    ReassignablePartition,
    ReassignablePartitionResponse,
    ReassignableTopic,
    ReassignableTopicResponse,
    RegisterBrokerRequest,
    RegisterBrokerResponse,
    ReplicaElectionResult,
    TopicIdPartition,
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
)
from kraft.controller.partition_change import Election, PartitionChangeBuilder
from kraft.controller.placement import UsableBroker, place_replicas
from kraft.controller.result import ControllerResult
from kraft.controller.topic_control import TOPIC_NAME_MAX_LENGTH, validate_topic_name

__all__ = [
    "PRODUCER_ID_BLOCK_SIZE",
    "TOPIC_NAME_MAX_LENGTH",
    "AllocateProducerIdsRequest",
    "AllocateProducerIdsResponse",
    "AlterConfigOp",
    "AlterConfigsResource",
    "AlterConfigsResourceResult",
    "AlterPartitionData",
    "AlterPartitionPartitionResult",
    "AlterPartitionReassignmentsRequest",
    "AlterPartitionReassignmentsResponse",
    "AlterPartitionRequest",
    "AlterPartitionResponse",
    "AlterPartitionTopic",
    "AlterPartitionTopicResult",
    "AlterableConfig",
    "BrokerEpochState",
    "BrokerHeartbeatManager",
    "BrokerHeartbeatRequest",
    "BrokerHeartbeatResponse",
    "ControllerConfig",
    "ControllerCore",
    "ControllerRequest",
    "ControllerResult",
    "CreatableTopic",
    "CreatableTopicResult",
    "CreatePartitionsRequest",
    "CreatePartitionsResponse",
    "CreatePartitionsTopic",
    "CreatePartitionsTopicResult",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "DeletableTopicResult",
    "DeleteTopicsRequest",
    "DeleteTopicsResponse",
    "ElectLeadersRequest",
    "ElectLeadersResponse",
    "Election",
    "ElectionType",
    "IncrementalAlterConfigsRequest",
    "IncrementalAlterConfigsResponse",
    "ListPartitionReassignmentsRequest",
    "ListPartitionReassignmentsResponse",
    "OngoingPartitionReassignment",
    "OngoingTopicReassignment",
    "PartitionChangeBuilder",
    "PartitionElectionResult",
    "ReassignablePartition",
    "ReassignablePartitionResponse",
    "ReassignableTopic",
    "ReassignableTopicResponse",
    "RegisterBrokerRequest",
    "RegisterBrokerResponse",
    "ReplicaElectionResult",
    "TopicIdPartition",
    "UnregisterBrokerRequest",
    "UnregisterBrokerResponse",
    "UsableBroker",
    "place_replicas",
    "validate_topic_name",
]
