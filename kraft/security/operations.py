"""What every API needs: the one table of resource types and operations (Kafka's KafkaApis and
ControllerApis checks), read by `kraft.security.guard.AccessGuard`.

The rules are keyed by Kafka API name (`BROKER_APIS`, `CONTROLLER_APIS`) and read the request's
fields by name, so they hold for the API dataclasses (`replication.messages`,
`kraft.controller.messages`, ...) and the proto messages alike: the broker's API layer
(`replication.broker.api`) asks `api_requirement(api, request, topic_name)`; the gRPC
interceptor of the controller and the Raft servers asks `requirement(method, ...)`, which maps
a gRPC method (``/kraft.v1.Broker/Produce``) and its request message to the same
`Requirement`: groups of `Need`s that must ALL be met, where one `Need` of a group suffices
(Kafka's "CREATE on the cluster, or CREATE on the topic"). The first `Need` of the first unmet
group names the error: TOPIC_, GROUP_ or CLUSTER_AUTHORIZATION_FAILED
(`error_of`). ``node=True`` marks node-to-node RPCs (Raft, broker registration and heartbeats,
AlterPartition, AllocateProducerIds, follower fetches, a CreateTopics of internal topics only):
CLUSTER_ACTION on the cluster, which super users have (see `kraft.security.guard` for plaintext
listeners).

`filter_response(method, request, response, may)` removes what the caller may not DESCRIBE
from listings (Metadata, DescribeCluster, ListGroups, OffsetFetch of every topic), and answers
TOPIC_AUTHORIZATION_FAILED for a topic the caller named but may not describe, as Kafka does.

Per topic, as Kafka: Produce, Fetch, ListOffsets, OffsetCommit, OffsetDelete, CreateTopics and
DeleteTopics name their topics in `Requirement.topics` (DescribeGroups, ConsumerGroupDescribe
and DeleteGroups their groups, FindCoordinator its keys, answered per item the same way, with
the item's own error); when only some of a request's topics are refused,
those get TOPIC_AUTHORIZATION_FAILED in the answer and the others a normal one
(`kraft.security.per_topic`). A request whose every named topic is refused, or that misses a
permission on anything else (its group, the cluster), is refused whole; the error names the
first one refused.

Pure: the functions read the request's fields (dataclasses or proto messages, duck-typed) and,
for listings, `filter_response` edits a proto response in place; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from kraft.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from kraft.types import INTERNAL_TOPICS
from storage.errors import ErrorCode

_R = ResourceType
_O = AclOperation


class Need(NamedTuple):
    """One permission: ``operation`` on a resource; ``name=None`` means on ANY resource of
    the type (Kafka's ``authorizeByResourceType``, KIP-679)."""

    resource_type: ResourceType
    operation: AclOperation
    name: str | None


@dataclass(frozen=True, slots=True)
class Requirement:
    """All of ``groups`` must be met; within a group, one `Need` suffices."""

    groups: tuple[tuple[Need, ...], ...] = ()
    node: bool = False
    """A node-to-node RPC (CLUSTER_ACTION on the cluster)."""
    topics: tuple[str | None, ...] = ()
    """Per group, the topic (or the group, the coordinator key) it is about when the method
    answers per item (else None, or empty): an unmet group of an item refuses that item only
    (`kraft.security.per_topic`)."""


PUBLIC_SERVICES: Final = frozenset({"grpc.health.v1.Health"})
"""Services every caller may use (health probes)."""

TopicNameOf = Callable[[str], "str | None"]
"""Topic id -> name in the node's image (DeleteTopics by id)."""


def _cluster(operation: AclOperation) -> Need:
    return Need(_R.CLUSTER, operation, CLUSTER_NAME)


def _each(resource_type: ResourceType, operation: AclOperation, names: Iterable[str]) -> Any:
    return tuple((Need(resource_type, operation, n),) for n in dict.fromkeys(names))


def _per_topic(
    resource_type: ResourceType, operation: AclOperation, names: Iterable[str], *head: Any
) -> Requirement:
    """``head`` groups (met or the request is refused), then one group per named topic."""
    unique = list(dict.fromkeys(names))
    groups = (*head, *((Need(resource_type, operation, n),) for n in unique))
    return Requirement(groups, topics=(*(None for _ in head), *unique))


def _node() -> Requirement:
    return Requirement(((_cluster(_O.CLUSTER_ACTION),),), node=True)


def _config_need(operation: AclOperation, resource: Any) -> tuple[Need, ...]:
    """Topic configs are a TOPIC resource; broker configs (resource type 4) the cluster."""
    if resource.resource_type == int(_R.TOPIC):
        return (Need(_R.TOPIC, operation, resource.resource_name),)
    return (_cluster(operation),)


def _fetch(r: Any, _: TopicNameOf) -> Requirement:
    if r.replica_id >= 0:  # a follower (Kafka: CLUSTER_ACTION on the cluster)
        return _node()
    return _per_topic(_R.TOPIC, _O.READ, (t.topic for t in r.topics))


def _subscribed(r: Any) -> Iterable[str]:
    """The subscribed topic names of a heartbeat: a tuple or None on the dataclass
    (`replication.messages.groups`), an optional list message on the proto."""
    names = r.subscribed_topic_names
    if names is None or isinstance(names, tuple):
        return names or ()
    return tuple(names.items) if r.HasField("subscribed_topic_names") else ()


def _heartbeat(r: Any) -> Requirement:
    topics = _subscribed(r)
    return Requirement(
        ((Need(_R.GROUP, _O.READ, r.group_id),), *_each(_R.TOPIC, _O.DESCRIBE, topics))
    )


def _create_topics(r: Any, _: TopicNameOf) -> Requirement:
    names = list(dict.fromkeys(t.name for t in r.topics))
    if names and all(n in INTERNAL_TOPICS for n in names):
        # A broker creating ``__consumer_offsets`` for its group coordinator: a node's request
        # (Kafka's broker does it with its own, super-user, principal).
        return _node()
    groups = tuple((Need(_R.TOPIC, _O.CREATE, n), _cluster(_O.CREATE)) for n in names)
    return Requirement(groups, topics=tuple(names))


def _delete_topics(r: Any, topic_name: TopicNameOf) -> Requirement:
    names = [*r.topic_names, *(n for i in r.topic_ids if (n := topic_name(i)) is not None)]
    return _per_topic(_R.TOPIC, _O.DELETE, names)


Rule = Callable[[Any, TopicNameOf], Requirement]

BROKER_APIS: Final[dict[str, Rule]] = {
    # -- kraft.v1.Broker (KafkaApis) ----------------------------------------------------------
    "Produce": lambda r, _: _per_topic(_R.TOPIC, _O.WRITE, (t.name for t in r.topic_data)),
    "Fetch": _fetch,
    "ListOffsets": lambda r, _: _per_topic(_R.TOPIC, _O.DESCRIBE, (t.name for t in r.topics)),
    "Metadata": lambda r, _: Requirement(),  # filtered: `filter_response`
    # KIP-679: IDEMPOTENT_WRITE on the cluster, or WRITE on any topic; KIP-98: a transactional
    # producer needs WRITE on its transactional id.
    "InitProducerId": lambda r, _: Requirement(
        ((Need(_R.TRANSACTIONAL_ID, _O.WRITE, r.transactional_id),),)
        if r.transactional_id
        else ((_cluster(_O.IDEMPOTENT_WRITE), Need(_R.TOPIC, _O.WRITE, None)),)
    ),
    # Per key, per group and per group id, as Kafka's handleFindCoordinatorRequest,
    # handleConsumerGroupDescribe and handleDeleteGroupsRequest: a refused one is answered
    # with its error, the others served.
    "FindCoordinator": lambda r, _: _per_topic(
        _R.TRANSACTIONAL_ID if r.key_type == 1 else _R.GROUP, _O.DESCRIBE, r.coordinator_keys
    ),
    "ConsumerGroupHeartbeat": lambda r, _: _heartbeat(r),
    "OffsetCommit": lambda r, _: _per_topic(
        _R.TOPIC, _O.READ, (t.name for t in r.topics), (Need(_R.GROUP, _O.READ, r.group_id),)
    ),
    "OffsetFetch": lambda r, _: Requirement(
        (
            (Need(_R.GROUP, _O.DESCRIBE, r.group_id),),
            *_each(_R.TOPIC, _O.DESCRIBE, (t.name for t in r.topics)),
        )
    ),
    "ListGroups": lambda r, _: Requirement(),  # filtered: `filter_response`
    "ConsumerGroupDescribe": lambda r, _: _per_topic(_R.GROUP, _O.DESCRIBE, r.group_ids),
    "DeleteGroups": lambda r, _: _per_topic(_R.GROUP, _O.DELETE, r.groups_names),
    # KIP-98: a transaction coordinator's markers to a partition leader (Kafka: CLUSTER_ACTION).
    "WriteTxnMarkers": lambda r, _: _node(),
    # -- transactions (KIP-98, `replication.broker.coordinators.txn_service`) ----------------------
    "AddPartitionsToTxn": lambda r, _: (
        _node()
        if r.verify_only  # KIP-890: a partition leader asks the coordinator
        else Requirement(
            (
                (Need(_R.TRANSACTIONAL_ID, _O.WRITE, r.transactional_id),),
                *_each(_R.TOPIC, _O.WRITE, (t.name for t in r.topics)),
            )
        )
    ),
    # KIP-664: a partition leader's producers (`kraft transactions abort --start-offset`).
    "DescribeProducers": lambda r, _: Requirement(
        _each(_R.TOPIC, _O.READ, (t.name for t in r.topics))
    ),
    # KIP-890 part 1: a partition leader's verify_only entries (Kafka: CLUSTER_ACTION).
    "AddPartitionsToTxnBatch": lambda r, _: _node(),
    "AddOffsetsToTxn": lambda r, _: Requirement(
        (
            (Need(_R.TRANSACTIONAL_ID, _O.WRITE, r.transactional_id),),
            (Need(_R.GROUP, _O.READ, r.group_id),),
        )
    ),
    "EndTxn": lambda r, _: Requirement(
        ((Need(_R.TRANSACTIONAL_ID, _O.WRITE, r.transactional_id),),)
    ),
    "DescribeTransactions": lambda r, _: Requirement(
        _each(_R.TRANSACTIONAL_ID, _O.DESCRIBE, r.transactional_ids)
    ),
    # NB: Kafka lists the ids the caller may DESCRIBE; kraft asks DESCRIBE on the cluster.
    "ListTransactions": lambda r, _: Requirement(((_cluster(_O.DESCRIBE),),)),
    "TxnOffsetCommit": lambda r, _: Requirement(
        (
            (Need(_R.TRANSACTIONAL_ID, _O.WRITE, r.transactional_id),),
            (Need(_R.GROUP, _O.READ, r.commit.group_id),),
            *_each(_R.TOPIC, _O.READ, (t.name for t in r.commit.topics)),
        )
    ),
}
"""The rules of the APIs a broker answers itself (Kafka's KafkaApis), keyed by Kafka API name."""

KAFKA_ONLY_APIS: Final[dict[str, Rule]] = {
    # -- what a broker holds itself, asked by Kafka's admin tools: no gRPC method serves it --
    "DescribeLogDirs": lambda r, _: Requirement(((_cluster(_O.DESCRIBE),),)),
    # -- classic groups (`replication.broker.coordinators.classic_service`): not served on gRPC ----
    "JoinGroup": lambda r, _: Requirement(((Need(_R.GROUP, _O.READ, r.group_id),),)),
    "SyncGroup": lambda r, _: Requirement(((Need(_R.GROUP, _O.READ, r.group_id),),)),
    "Heartbeat": lambda r, _: Requirement(((Need(_R.GROUP, _O.READ, r.group_id),),)),
    "LeaveGroup": lambda r, _: Requirement(((Need(_R.GROUP, _O.READ, r.group_id),),)),
    # Per group, as Kafka's handleDescribeGroupsRequest: a refused group is answered
    # GROUP_AUTHORIZATION_FAILED, the others described.
    "DescribeGroups": lambda r, _: _per_topic(_R.GROUP, _O.DESCRIBE, r.group_ids),
    # The group whole, its topics per topic (Kafka's handleOffsetDeleteRequest).
    "OffsetDelete": lambda r, _: _per_topic(
        _R.TOPIC, _O.READ, (t for t, _ in r.partitions), (Need(_R.GROUP, _O.DELETE, r.group_id),)
    ),
}
"""The rules of the broker APIs served only on the Kafka listener (kraft's own clients use
KIP-848), keyed by Kafka API name."""

CONTROLLER_APIS: Final[dict[str, Rule]] = {
    # -- kraft.v1.Controller (ControllerApis; a broker checks before forwarding) --------------
    "BrokerRegistration": lambda r, _: _node(),
    "BrokerHeartbeat": lambda r, _: _node(),
    "AlterPartition": lambda r, _: _node(),
    "AllocateProducerIds": lambda r, _: _node(),
    "UnregisterBroker": lambda r, _: Requirement(((_cluster(_O.ALTER),),)),
    "CreateTopics": _create_topics,
    "DeleteTopics": _delete_topics,
    "CreatePartitions": lambda r, _: Requirement(
        _each(_R.TOPIC, _O.ALTER, (t.name for t in r.topics))
    ),
    "ElectLeaders": lambda r, _: Requirement(((_cluster(_O.ALTER),),)),
    "AlterPartitionReassignments": lambda r, _: Requirement(((_cluster(_O.ALTER),),)),
    "ListPartitionReassignments": lambda r, _: Requirement(((_cluster(_O.DESCRIBE),),)),
    "IncrementalAlterConfigs": lambda r, _: Requirement(
        tuple(_config_need(_O.ALTER_CONFIGS, c) for c in r.resources)
    ),
    "DescribeConfigs": lambda r, _: Requirement(
        tuple(_config_need(_O.DESCRIBE_CONFIGS, c) for c in r.resources)
    ),
    "DescribeCluster": lambda r, _: Requirement(),  # filtered: `filter_response`
    "DescribeQuorum": lambda r, _: Requirement(((_cluster(_O.DESCRIBE),),)),
    # KIP-853: an operator's request (a new controller's own UpdateRaftVoter is not one here).
    "AddRaftVoter": lambda r, _: Requirement(((_cluster(_O.ALTER),),)),
    "RemoveRaftVoter": lambda r, _: Requirement(((_cluster(_O.ALTER),),)),
    "CreateAcls": lambda r, _: Requirement(((_cluster(_O.ALTER),),)),
    "DeleteAcls": lambda r, _: Requirement(((_cluster(_O.ALTER),),)),
    "DescribeAcls": lambda r, _: Requirement(((_cluster(_O.DESCRIBE),),)),
    "UpdateFeatures": lambda r, _: Requirement(((_cluster(_O.ALTER),),)),
}
"""The rules of the controller's APIs (Kafka's ControllerApis; a broker checks them before
forwarding), keyed by Kafka API name."""

_RAFT: Final[dict[str, Rule]] = {
    # -- kraft.v1.Raft (KIP-595; the metadata quorum and quorum-mode partitions) --------------
    "Vote": lambda r, _: _node(),
    "BeginQuorumEpoch": lambda r, _: _node(),
    "EndQuorumEpoch": lambda r, _: _node(),
    "Fetch": lambda r, _: _node(),
    "FetchSnapshot": lambda r, _: _node(),
    "Stream": lambda r, _: _node(),
}

_RULES: Final[dict[str, Rule]] = {
    **{f"Broker/{api}": rule for api, rule in BROKER_APIS.items()},
    **{f"Controller/{api}": rule for api, rule in CONTROLLER_APIS.items()},
    **{f"Raft/{api}": rule for api, rule in _RAFT.items()},
    # Followers' Fetch and producers' Produce requests on one long-lived call each
    # (replication.broker.grpc.adapter): each request is authorized by the API layer as the
    # unary method's.
    "Broker/FetchStream": BROKER_APIS["Fetch"],
    "Broker/ProduceStream": BROKER_APIS["Produce"],
}
"""The same rules keyed ``Service/Method`` for the gRPC interceptor (`kraft.security.guard`)."""

PACKAGE: Final = "kraft.v1."


def rule_key(method: str) -> str:
    """``/kraft.v1.Broker/Produce`` -> ``Broker/Produce``."""
    return method.lstrip("/").removeprefix(PACKAGE)


def covered(method: str) -> bool:
    """Whether the table has a rule for ``method`` (an uncovered kraft method is refused)."""
    return rule_key(method) in _RULES


def requirement(method: str, request: Any, topic_name: TopicNameOf) -> Requirement | None:
    """What ``request`` to ``method`` needs; None for a method the table does not know
    (the caller refuses it: fail closed). ``request`` is None for a streaming RPC."""
    rule = _RULES.get(rule_key(method))
    if rule is None:
        return None
    if request is None:
        return _node()
    return rule(request, topic_name)


def api_requirement(api: str, request: Any, topic_name: TopicNameOf) -> Requirement | None:
    """What ``request`` to the Kafka API ``api`` (``Produce``, ``CreateTopics``, ...) needs, on
    a broker (its own APIs and the controller's it forwards); None for an API the tables do
    not know (refuse it: fail closed). ``request`` is the API's dataclass."""
    rule = BROKER_APIS.get(api) or KAFKA_ONLY_APIS.get(api) or CONTROLLER_APIS.get(api)
    return None if rule is None else rule(request, topic_name)


def error_of(need: Need) -> ErrorCode:
    """The refusal a missing `Need` gets (Kafka's per-resource authorization errors)."""
    if need.resource_type == _R.TOPIC:
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if need.resource_type == _R.GROUP:
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def _may_describe_topic(may: Callable[[Need], bool], name: str) -> bool:
    return may(Need(_R.TOPIC, _O.DESCRIBE, name))


def filter_response(method: str, request: Any, response: Any, may: Callable[[Need], bool]) -> None:
    """Hide from a listing what the caller may not DESCRIBE (Kafka's Metadata, ListGroups and
    OffsetFetch filtering); a topic the request named is answered TOPIC_AUTHORIZATION_FAILED
    instead (without its partitions), so a refusal does not tell whether the topic exists."""
    key = rule_key(method)
    if key in ("Broker/Metadata", "Controller/DescribeCluster"):
        named = (
            bool(request.topics) if key == "Broker/Metadata" else request.HasField("topic_names")
        )
        kept = []
        for topic in response.topics:
            if _may_describe_topic(may, topic.name):
                kept.append(topic)
            elif named:
                refused = type(topic)(name=topic.name)
                refused.error_code = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                kept.append(refused)
        del response.topics[:]
        response.topics.extend(kept)
    elif key == "Broker/ListGroups":
        groups = [g for g in response.groups if may(Need(_R.GROUP, _O.DESCRIBE, g.group_id))]
        del response.groups[:]
        response.groups.extend(groups)
    elif key == "Broker/OffsetFetch" and not request.topics:
        topics = [t for t in response.topics if _may_describe_topic(may, t.name)]
        del response.topics[:]
        response.topics.extend(topics)


def filters(method: str) -> bool:
    """Whether `filter_response` edits the responses of ``method``."""
    return rule_key(method) in (
        "Broker/Metadata",
        "Controller/DescribeCluster",
        "Broker/ListGroups",
        "Broker/OffsetFetch",
    )


def rules() -> tuple[str, ...]:
    """Every method the table knows (``Service/Method``), for docs and tests."""
    return tuple(_RULES)


__all__ = [
    "BROKER_APIS",
    "CONTROLLER_APIS",
    "KAFKA_ONLY_APIS",
    "PUBLIC_SERVICES",
    "Need",
    "Requirement",
    "api_requirement",
    "covered",
    "error_of",
    "filter_response",
    "filters",
    "requirement",
    "rule_key",
    "rules",
]
