"""The admin converters (`replication.broker.kafka.apis.admin`, `configs`,
`acls`) over a stand-in broker API that records what is forwarded and answers as the
controller would: Kafka's request fields become kraft's dataclasses, kraft's answers become
Kafka's, and a refusal or a controller out of reach becomes a per-resource code."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema

from kraft.controller.messages import (
    AclCreationResult,
    AlterConfigOp,
    AlterConfigsResourceResult,
    ConfigSource,
    CreatableTopicResult,
    CreateAclsRequest,
    CreateAclsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeConfigsEntry,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kraft.metadata.records import ConfigResourceType
from kraft.security.acls import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from replication.broker.api import RequestContext
from replication.broker.kafka.apis import HANDLERS
from replication.broker.kafka.entities import build, to_chunks
from replication.broker.kafka.frames import Request
from replication.messages import (
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
    MetadataPartition,
    MetadataRequest,
    MetadataResponse,
    MetadataTopic,
    PartitionProducers,
    ProducerDescription,
    TopicPartitions,
)
from storage.errors import (
    ClusterAuthorizationFailedError,
    ErrorCode,
    RequestTimedOutError,
    TopicAuthorizationFailedError,
)

CTX = RequestContext(principal="User:ANONYMOUS")
TOPIC_ID = "8a1af514-9a35-426b-8383-8a5f748e131f"


class Controller:
    """A broker API whose ``forward`` calls ``answer`` (which may raise, as a refusal does)
    and whose Metadata knows ``topics`` (name -> partition count)."""

    def __init__(self, answer: Callable[[Any], Any], topics: dict[str, int] | None = None) -> None:
        self.answer = answer
        self.forwarded: list[Any] = []
        self.topics = topics if topics is not None else {}

    async def forward(self, request: Any, ctx: RequestContext) -> Any:
        self.forwarded.append(request)
        return self.answer(request)

    async def describe_log_dirs(
        self, request: DescribeLogDirsRequest, ctx: RequestContext
    ) -> DescribeLogDirsResponse:
        self.forwarded.append(request)
        return DescribeLogDirsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)

    async def describe_producers(
        self, request: DescribeProducersRequest, ctx: RequestContext
    ) -> DescribeProducersResponse:
        self.forwarded.append(request)
        return DescribeProducersResponse(
            partitions=tuple(
                PartitionProducers(
                    topic=t.name,
                    partition=p,
                    producers=(
                        ProducerDescription(
                            producer_id=7, producer_epoch=1, last_sequence=4, last_timestamp_ms=9
                        ),
                    ),
                )
                for t in request.topics
                for p in t.partitions
            )
        )

    async def metadata(self, request: MetadataRequest, ctx: RequestContext) -> MetadataResponse:
        names = request.topics or tuple(sorted(self.topics))
        return MetadataResponse(
            topics=tuple(
                MetadataTopic(
                    name=n,
                    topic_id=TOPIC_ID,
                    partitions=tuple(
                        MetadataPartition(partition_index=i, leader_id=1, replica_nodes=(1,))
                        for i in range(self.topics[n])
                    ),
                )
                if n in self.topics
                else MetadataTopic(name=n, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                for n in names
            )
        )


def call(api: Controller, key: int, version: int, body: dict[str, Any]) -> Any:
    """The handler's answer to ``body``, encoded for ``version`` and as kio's entity."""
    request = Request(
        sequence=0,
        api_key=key,
        api_version=version,
        correlation_id=1,
        client_id="test",
        body=build(load_request_schema(key, version), body),
    )
    answer = asyncio.run(HANDLERS[key].handle(api, request, CTX))  # type: ignore[arg-type]
    return build(load_response_schema(key, version), {"throttle_time": 0, **answer})


def test_the_admin_apis_are_advertised_from_kafka_4s_floors() -> None:
    served = {spec.name: (spec.min_version, spec.max_version) for spec in HANDLERS.values()}
    assert served["CreateTopics"] == (2, 7)
    assert served["DeleteTopics"] == (1, 6)
    assert served["DescribeConfigs"] == (1, 4)
    assert served["DescribeTopicPartitions"] == (0, 0)
    assert {
        "AlterConfigs",
        "IncrementalAlterConfigs",
        "CreatePartitions",
        "ElectLeaders",
        "AlterPartitionReassignments",
        "ListPartitionReassignments",
        "DescribeAcls",
        "CreateAcls",
        "DeleteAcls",
    } <= set(served)


def test_create_topics_converts_defaults_assignments_configs_and_answers_per_topic() -> None:
    def answer(r: CreateTopicsRequest) -> CreateTopicsResponse:
        return CreateTopicsResponse(
            topics=tuple(
                CreatableTopicResult(
                    name=t.name, topic_id=TOPIC_ID, num_partitions=2, replication_factor=1
                )
                for t in r.topics
            )
        )

    api = Controller(answer, topics={"a": 2, "b": 2})
    topic = {"num_partitions": -1, "replication_factor": -1, "assignments": [], "configs": []}
    response = call(
        api,
        19,
        7,
        {
            "topics": [
                {**topic, "name": "a", "configs": [{"name": "retention.ms", "value": "5"}]},
                {
                    **topic,
                    "name": "b",
                    "assignments": [
                        {"partition_index": 1, "broker_ids": [2]},
                        {"partition_index": 0, "broker_ids": [1]},
                    ],
                },
                {
                    **topic,
                    "name": "c",
                    "num_partitions": 3,
                    "assignments": [{"partition_index": 0, "broker_ids": [1]}],
                },
                {**topic, "name": "d", "assignments": [{"partition_index": 1, "broker_ids": [1]}]},
                {**topic, "name": "e", "configs": [{"name": "retention.ms", "value": None}]},
                {**topic, "name": "f"},
                {**topic, "name": "f"},
            ]
        },
    )
    (sent,) = api.forwarded
    assert [(t.name, t.num_partitions, t.replication_factor) for t in sent.topics] == [
        ("a", -1, -1),
        ("b", -1, -1),
    ]
    assert sent.topics[0].configs == {"retention.ms": "5"}
    assert sent.topics[1].assignments == ((1,), (2,))  # ordered by partition index
    codes = {t.name: int(t.error_code) for t in response.topics}
    assert codes == {
        "a": 0,
        "b": 0,
        "c": ErrorCode.INVALID_REQUEST,  # a count and an assignment
        "d": ErrorCode.INVALID_REPLICA_ASSIGNMENT,  # partitions not numbered from 0
        "e": ErrorCode.INVALID_CONFIG,
        "f": ErrorCode.INVALID_REQUEST,  # named twice
    }
    assert str(response.topics[0].topic_id) == TOPIC_ID


def test_a_refused_request_is_sent_again_per_resource_so_each_gets_its_own_code() -> None:
    def answer(r: CreatePartitionsRequest) -> CreatePartitionsResponse:
        if any(t.name == "secret" for t in r.topics):
            raise TopicAuthorizationFailedError("no ALTER on 'secret'")
        return CreatePartitionsResponse(
            results=tuple(CreatePartitionsTopicResult(name=t.name) for t in r.topics)
        )

    api = Controller(answer, topics={"open": 4})
    response = call(
        api,
        37,
        3,
        {
            "topics": [
                {"name": "open", "count": 4, "assignments": None},
                {"name": "secret", "count": 4, "assignments": None},
            ],
            "validate_only": False,
        },
    )
    assert {r.name: int(r.error_code) for r in response.results} == {
        "open": 0,
        "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    }
    assert len(api.forwarded) == 3  # whole, then each


def test_a_controller_out_of_reach_answers_each_topic_with_the_retriable_code() -> None:
    def answer(r: Any) -> Any:
        raise RequestTimedOutError("no controller")

    response = call(Controller(answer), 20, 6, {"topics": [{"name": "a", "topic_id": None}]})
    assert [(r.name, int(r.error_code)) for r in response.responses] == [
        ("a", ErrorCode.REQUEST_TIMED_OUT)
    ]


def test_delete_topics_by_id_in_v6_and_by_name_before() -> None:
    def answer(r: DeleteTopicsRequest) -> DeleteTopicsResponse:
        return DeleteTopicsResponse(
            topics=(
                *(DeletableTopicResult(name=n, topic_id=TOPIC_ID) for n in r.topic_names),
                *(DeletableTopicResult(name="by-id", topic_id=i) for i in r.topic_ids),
            )
        )

    api = Controller(answer)
    by_id = call(api, 20, 6, {"topics": [{"name": None, "topic_id": TOPIC_ID}]})
    assert api.forwarded[-1] == DeleteTopicsRequest(topic_ids=(TOPIC_ID,))
    assert [(r.name, str(r.topic_id)) for r in by_id.responses] == [("by-id", TOPIC_ID)]
    by_name = call(api, 20, 4, {"topic_names": ["x"]})
    assert api.forwarded[-1] == DeleteTopicsRequest(topic_names=("x",))
    assert [(r.name, int(r.error_code)) for r in by_name.responses] == [("x", 0)]


def _configs(dynamic: dict[str, str]) -> Callable[[Any], Any]:
    def answer(r: Any) -> Any:
        if isinstance(r, DescribeConfigsRequest):
            return DescribeConfigsResponse(
                results=tuple(
                    DescribeConfigsResult(
                        resource_type=res.resource_type,
                        resource_name=res.resource_name,
                        configs=(
                            *(
                                DescribeConfigsEntry(
                                    name=k,
                                    value=v,
                                    source=ConfigSource.DYNAMIC_TOPIC_CONFIG,
                                    documentation="doc",
                                )
                                for k, v in dynamic.items()
                            ),
                            DescribeConfigsEntry(
                                name="segment.ms", value="1", source=ConfigSource.DEFAULT_CONFIG
                            ),
                        ),
                    )
                    for res in r.resources
                )
            )
        assert isinstance(r, IncrementalAlterConfigsRequest)
        return IncrementalAlterConfigsResponse(
            responses=tuple(
                AlterConfigsResourceResult(
                    resource_type=res.resource_type, resource_name=res.resource_name
                )
                for res in r.resources
            )
        )

    return answer


def test_describe_configs_gives_sources_synonyms_and_documentation_as_asked() -> None:
    api = Controller(_configs({"retention.ms": "5"}))
    response = call(
        api,
        32,
        4,
        {
            "resources": [
                {"resource_type": 2, "resource_name": "t", "configuration_keys": None},
                {"resource_type": 8, "resource_name": "1", "configuration_keys": None},
            ],
            "include_synonyms": False,
            "include_documentation": True,
        },
    )
    (sent,) = api.forwarded
    assert (
        sent.resources[0].resource_type is ConfigResourceType.TOPIC
        and sent.resources[0].config_names is None
    )
    topic, logger = response.results
    assert {c.name: (c.value, c.config_source, c.documentation) for c in topic.configs} == {
        "retention.ms": ("5", ConfigSource.DYNAMIC_TOPIC_CONFIG, "doc"),
        "segment.ms": ("1", ConfigSource.DEFAULT_CONFIG, None),
    }
    assert int(logger.error_code) == ErrorCode.INVALID_REQUEST  # BROKER_LOGGER: not kept


def test_describe_configs_refused_answers_the_resource_not_the_request() -> None:
    def answer(r: DescribeConfigsRequest) -> Any:
        if any(res.resource_type is ConfigResourceType.BROKER for res in r.resources):
            raise ClusterAuthorizationFailedError("no DESCRIBE_CONFIGS on the cluster")
        return _configs({})(r)

    response = call(
        Controller(answer),
        32,
        1,
        {
            "resources": [
                {"resource_type": 2, "resource_name": "t", "configuration_keys": ["segment.ms"]},
                {"resource_type": 4, "resource_name": "1", "configuration_keys": None},
            ]
        },
    )
    assert [int(r.error_code) for r in response.results] == [
        0,
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ]


def test_alter_configs_replaces_the_dynamic_config_with_sets_and_deletes() -> None:
    api = Controller(_configs({"retention.ms": "5", "cleanup.policy": "compact"}))
    response = call(
        api,
        33,
        2,
        {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": "t",
                    "configs": [{"name": "retention.ms", "value": "9"}],
                }
            ],
            "validate_only": False,
        },
    )
    assert [int(r.error_code) for r in response.responses] == [0]
    altered = api.forwarded[-1]
    assert isinstance(altered, IncrementalAlterConfigsRequest)
    assert [(c.name, c.op, c.value) for c in altered.resources[0].configs] == [
        ("retention.ms", AlterConfigOp.SET, "9"),
        ("cleanup.policy", AlterConfigOp.DELETE, None),
    ]


def test_incremental_alter_configs_passes_ops_and_refuses_duplicates_and_bad_ops() -> None:
    api = Controller(_configs({}))
    entry = {"name": "retention.ms", "value": "1"}
    response = call(
        api,
        44,
        1,
        {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": "t",
                    "configs": [{**entry, "config_operation": 2}],
                },
                {
                    "resource_type": 4,
                    "resource_name": "",
                    "configs": [{**entry, "config_operation": 9}],
                },
                {"resource_type": 2, "resource_name": "twice", "configs": []},
                {"resource_type": 2, "resource_name": "twice", "configs": []},
            ],
            "validate_only": True,
        },
    )
    (sent,) = api.forwarded
    assert sent.validate_only and [c.op for c in sent.resources[0].configs] == [
        AlterConfigOp.APPEND
    ]
    assert sorted((r.resource_name, int(r.error_code)) for r in response.responses) == [
        ("", ErrorCode.INVALID_REQUEST),
        ("t", 0),
        ("twice", ErrorCode.INVALID_REQUEST),
        ("twice", ErrorCode.INVALID_REQUEST),
    ]


def test_elect_leaders_refused_whole_is_cluster_authorization_failed_per_partition() -> None:
    def answer(r: ElectLeadersRequest) -> Any:
        raise ClusterAuthorizationFailedError("no ALTER on the cluster")

    response = call(
        Controller(answer),
        43,
        2,
        {"election_type": 0, "topic_partitions": [{"topic": "t", "partitions": [0, 1]}]},
    )
    assert int(response.error_code) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert [int(p.error_code) for p in response.replica_election_results[0].partition_result] == [
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    ] * 2


def test_describe_topic_partitions_pages_with_a_cursor() -> None:
    api = Controller(lambda r: None, topics={"a": 2, "b": 3})
    body = {"topics": [], "response_partition_limit": 3, "cursor": None}
    first = call(api, 75, 0, body)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in first.topics] == [
        ("a", [0, 1]),
        ("b", [0]),
    ]
    assert (first.next_cursor.topic_name, first.next_cursor.partition_index) == ("b", 1)
    rest = call(api, 75, 0, {**body, "cursor": {"topic_name": "b", "partition_index": 1}})
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in rest.topics] == [
        ("b", [1, 2])
    ]
    assert rest.next_cursor is None
    unknown = call(api, 75, 0, {**body, "topics": [{"name": "zz"}]})
    assert [int(t.error_code) for t in unknown.topics] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]


def test_acls_convert_both_ways_and_an_unknown_type_is_invalid() -> None:
    acl = AclBinding(
        resource_type=ResourceType.TOPIC,
        resource_name="t",
        pattern_type=PatternType.LITERAL,
        principal="User:alice",
        host="*",
        operation=AclOperation.READ,
        permission_type=AclPermissionType.ALLOW,
    )

    def answer(r: Any) -> Any:
        if isinstance(r, CreateAclsRequest):
            return CreateAclsResponse(results=tuple(AclCreationResult() for _ in r.creations))
        assert isinstance(r, DescribeAclsRequest)
        return DescribeAclsResponse(acls=(acl,))

    api = Controller(answer)
    creation = {
        "resource_type": 2,
        "resource_name": "t",
        "resource_pattern_type": 3,
        "principal": "User:alice",
        "host": "*",
        "operation": 3,
        "permission_type": 3,
    }
    created = call(
        api,
        30,
        3,
        {"creations": [creation, {**creation, "resource_type": 7}, {**creation, "operation": 0}]},
    )
    assert [int(r.error_code) for r in created.results] == [
        0,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.INVALID_REQUEST,
    ]
    assert api.forwarded[-1] == CreateAclsRequest(creations=(acl,))
    described = call(
        api,
        29,
        3,
        {
            "resource_type_filter": 1,
            "resource_name_filter": None,
            "pattern_type_filter": 1,
            "principal_filter": None,
            "host_filter": None,
            "operation": 1,
            "permission_type": 1,
        },
    )
    (resource,) = described.resources
    assert (resource.resource_type, resource.resource_name, resource.pattern_type) == (2, "t", 3)
    assert [(a.principal, a.operation, a.permission_type) for a in resource.acls] == [
        ("User:alice", 3, 3)
    ]


@pytest.mark.parametrize(
    "key",
    sorted(
        k
        for k, s in HANDLERS.items()
        if s.name
        in {
            "CreateTopics",
            "DeleteTopics",
            "CreatePartitions",
            "DescribeConfigs",
            "AlterConfigs",
            "IncrementalAlterConfigs",
            "ElectLeaders",
            "AlterPartitionReassignments",
            "ListPartitionReassignments",
            "DescribeAcls",
            "CreateAcls",
            "DeleteAcls",
            "DescribeTopicPartitions",
            "DescribeLogDirs",
            "DescribeProducers",
        }
    ),
)
def test_every_admin_version_answers_an_empty_request_with_an_encodable_response(key: int) -> None:
    spec = HANDLERS[key]

    def refuse(r: Any) -> Any:
        raise ClusterAuthorizationFailedError("no")

    for version in range(spec.min_version, spec.max_version + 1):
        cls = load_request_schema(key, version)
        request = Request(0, key, version, 1, "test", build(cls, {}))
        answer = asyncio.run(spec.handle(Controller(refuse), request, CTX))  # type: ignore[arg-type]
        assert answer is not None
        response = build(load_response_schema(key, version), {"throttle_time": 0, **answer})
        assert to_chunks(response).size > 0


def test_describe_producers_and_a_refused_describe_log_dirs_convert() -> None:
    api = Controller(lambda r: None)
    producers = call(api, 61, 0, {"topics": [{"name": "t", "partition_indexes": [0, 2]}]})
    assert api.forwarded[-1] == DescribeProducersRequest(
        topics=(TopicPartitions(name="t", partitions=(0, 2)),)
    )
    (topic,) = producers.topics
    assert [p.partition_index for p in topic.partitions] == [0, 2]
    (state,) = topic.partitions[0].active_producers
    assert (state.producer_id, state.producer_epoch, state.last_sequence) == (7, 1, 4)
    assert (state.coordinator_epoch, state.current_txn_start_offset) == (-1, -1)
    log_dirs = call(api, 35, 4, {"topics": None})
    assert api.forwarded[-1] == DescribeLogDirsRequest(topics=None)
    assert int(log_dirs.error_code) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert log_dirs.results == ()
