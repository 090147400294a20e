"""The admin handlers over a real broker's API with its authorizer on: a request refused by
the broker's ACLs before forwarding (`BrokerApi.forward` raises) is answered per resource with
Kafka's code, as Kafka answers, and the controller is never asked.

The broker is `tests.broker.test_broker_api`'s: not started, its image set by hand, ACLs that
let alice (over TLS) WRITE and DESCRIBE topic ``t`` and nothing else.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema

from replication.broker.kafka.apis import HANDLERS
from replication.broker.kafka.entities import build
from replication.broker.kafka.frames import Request
from replication.broker.server import BrokerServer
from storage.errors import ErrorCode
from tests.broker.test_broker_api import ALICE, _broker

pytestmark = pytest.mark.timeout(60)


async def call(server: BrokerServer, key: int, version: int, body: dict[str, Any]) -> Any:
    request = Request(0, key, version, 1, "test", build(load_request_schema(key, version), body))
    answer = await HANDLERS[key].handle(server.api, request, ALICE)
    assert answer is not None
    return build(load_response_schema(key, version), {"throttle_time": 0, **answer})


def test_refusals_before_forwarding_are_answered_per_resource(tmp_path: Path) -> None:
    async def main() -> None:
        async with _broker(tmp_path) as server:
            configs = await call(
                server,
                32,
                4,
                {
                    "resources": [
                        {"resource_type": 2, "resource_name": "secret", "configuration_keys": None},
                        {"resource_type": 4, "resource_name": "101", "configuration_keys": None},
                    ]
                },
            )
            assert [(r.resource_name, int(r.error_code)) for r in configs.results] == [
                ("secret", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                ("101", ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
            ]
            created = await call(
                server,
                19,
                7,
                {
                    "topics": [
                        {"name": n, "num_partitions": 1, "replication_factor": 1}
                        for n in ("new-a", "new-b")
                    ]
                },
            )
            assert {(t.name, int(t.error_code)) for t in created.topics} == {
                ("new-a", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                ("new-b", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
            }
            grown = await call(
                server, 37, 3, {"topics": [{"name": "t", "count": 2, "assignments": None}]}
            )
            assert [int(r.error_code) for r in grown.results] == [
                ErrorCode.TOPIC_AUTHORIZATION_FAILED  # ALTER on "t", which alice lacks
            ]
            acls = await call(server, 29, 3, {"resource_type_filter": 1, "pattern_type_filter": 1,
                                              "operation": 1, "permission_type": 1})  # fmt: skip
            assert int(acls.error_code) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            elected = await call(server, 43, 2, {"election_type": 0, "topic_partitions": None})
            assert int(elected.error_code) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            log_dirs = await call(server, 35, 4, {"topics": None})
            assert int(log_dirs.error_code) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            tv = {"feature": "transaction.version", "max_version_level": 1, "upgrade_type": 2}
            features = await call(server, 57, 1, {"feature_updates": [tv]})
            assert int(features.error_code) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            assert features.results == ()  # ALTER on the CLUSTER, which alice lacks

    asyncio.run(main())
