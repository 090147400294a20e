"""The Kafka adapter's config handlers: DescribeConfigs, AlterConfigs, IncrementalAlterConfigs.

Forwarded to the active controller (`replication.broker.kafka.apis.forwarding`), for TOPIC and
BROKER resources (the ones kraft keeps; another type gets INVALID_REQUEST, a resource named
twice in one alter too, as in Kafka).

AlterConfigs (the legacy API, which replaces a resource's whole dynamic config) is served as
a DescribeConfigs and an IncrementalAlterConfigs: SET every given key, DELETE every other
dynamic one. Kafka's controller applies the replacement as one record batch; here a concurrent
alter of the same resource between the two steps may be undone (docs/kafka-compatibility.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Final

from kraft.controller.messages import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    ConfigSource,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kraft.metadata.records import ConfigResourceType
from replication.broker.api import RequestContext
from replication.broker.kafka.api import ApiSpec, KafkaBrokerApi, Response
from replication.broker.kafka.apis.forwarding import error, forward_parts
from replication.broker.kafka.frames import Request
from storage.errors import ErrorCode


def _duplicates(names: Sequence[Any]) -> set[Any]:
    return {n for n, count in Counter(names).items() if count > 1}


# -- DescribeConfigs ------------------------------------------------------------------------------


def resource_type(value: int) -> ConfigResourceType | None:
    """kraft's resource type of Kafka's number (TOPIC, BROKER), or None for another one
    (BROKER_LOGGER, CLIENT_METRICS, GROUP: not kept by kraft)."""
    try:
        return ConfigResourceType(value)
    except ValueError:
        return None


def _resource(rtype: int, name: str, code: int, message: str | None) -> dict[str, Any]:
    return {"resource_type": rtype, "resource_name": name, **error(code, message)}


def _in_request_order(results: list[dict[str, Any]], resources: Sequence[Any]) -> list[Any]:
    """``results`` in the order of the request's ``resources`` (as Kafka answers)."""
    order: dict[tuple[int, str], int] = {}
    for i, r in enumerate(resources):
        order.setdefault((int(r.resource_type), r.resource_name), i)
    return sorted(
        results, key=lambda r: order.get((int(r["resource_type"]), r["resource_name"]), 0)
    )


def _unsupported(rtype: int) -> str:
    return f"resource type {rtype} is not supported (TOPIC 2 and BROKER 4 are)"


async def handle_describe_configs(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    body = request.body
    synonyms = bool(getattr(body, "include_synonyms", False))
    documentation = bool(getattr(body, "include_documentation", False))
    results: list[dict[str, Any]] = []
    wanted: list[DescribeConfigsResource] = []
    for r in body.resources:
        rtype = resource_type(int(r.resource_type))
        if rtype is None:
            results.append(
                {
                    **_resource(
                        r.resource_type,
                        r.resource_name,
                        ErrorCode.INVALID_REQUEST,
                        _unsupported(r.resource_type),
                    ),
                    "configs": [],
                }
            )
            continue
        keys = r.configuration_keys
        wanted.append(
            DescribeConfigsResource(
                resource_type=rtype,
                resource_name=r.resource_name,
                config_names=None if keys is None else tuple(keys),
            )
        )
    for part, outcome in await forward_parts(
        api,
        ctx,
        wanted,
        lambda rs: DescribeConfigsRequest(resources=tuple(rs), include_synonyms=synonyms),
    ):
        if outcome.response is None:
            results.extend(
                {
                    **_resource(
                        int(r.resource_type), r.resource_name, outcome.code, outcome.message
                    ),
                    "configs": [],
                }
                for r in part
            )
            continue
        answer: DescribeConfigsResponse = outcome.response
        if answer.error_code != ErrorCode.NONE:
            results.extend(
                {
                    **_resource(
                        int(r.resource_type),
                        r.resource_name,
                        answer.error_code,
                        answer.error_message,
                    ),
                    "configs": [],
                }
                for r in part
            )
            continue
        results.extend(
            {
                **_resource(
                    int(res.resource_type), res.resource_name, res.error_code, res.error_message
                ),
                "configs": [
                    {
                        "name": c.name,
                        "value": c.value,
                        "read_only": c.read_only,
                        "config_source": int(c.source),
                        "is_sensitive": False,
                        # v0's flag (Kafka 4.x serves v1+, where config_source says it).
                        "is_default": c.source == ConfigSource.DEFAULT_CONFIG,
                        "synonyms": [
                            {"name": s.name, "value": s.value, "source": int(s.source)}
                            for s in c.synonyms
                        ],
                        "config_type": 0,  # UNKNOWN: kraft's registry has no Kafka type
                        "documentation": (c.documentation or None) if documentation else None,
                    }
                    for c in res.configs
                ],
            }
            for res in answer.results
        )
    return {"results": _in_request_order(results, body.resources)}


# -- IncrementalAlterConfigs, AlterConfigs --------------------------------------------------------


async def _alter(
    api: KafkaBrokerApi,
    ctx: RequestContext,
    wanted: Sequence[AlterConfigsResource],
    validate_only: bool,
) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    for part, outcome in await forward_parts(
        api,
        ctx,
        wanted,
        lambda rs: IncrementalAlterConfigsRequest(resources=tuple(rs), validate_only=validate_only),
    ):
        if outcome.response is None:
            results.extend(
                _resource(int(r.resource_type), r.resource_name, outcome.code, outcome.message)
                for r in part
            )
            continue
        answer: IncrementalAlterConfigsResponse = outcome.response
        results.extend(
            _resource(int(r.resource_type), r.resource_name, r.error_code, r.error_message)
            for r in answer.responses
        )
    return results


def _checked_resources(
    resources: Sequence[Any],
) -> tuple[list[tuple[Any, ConfigResourceType]], list[dict[str, Any]]]:
    """The resources of a supported type named once, and the answers of the others."""
    duplicates = _duplicates([(int(r.resource_type), r.resource_name) for r in resources])
    good, refused = [], []
    for r in resources:
        rtype = resource_type(int(r.resource_type))
        if (int(r.resource_type), r.resource_name) in duplicates:
            refused.append(
                _resource(
                    r.resource_type, r.resource_name, ErrorCode.INVALID_REQUEST, "named twice"
                )
            )
        elif rtype is None:
            refused.append(
                _resource(
                    r.resource_type,
                    r.resource_name,
                    ErrorCode.INVALID_REQUEST,
                    _unsupported(r.resource_type),
                )
            )
        else:
            good.append((r, rtype))
    return good, refused


async def handle_incremental_alter_configs(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    body = request.body
    good, results = _checked_resources(body.resources)
    wanted = []
    for r, rtype in good:
        try:
            ops = tuple(
                AlterableConfig(name=c.name, op=AlterConfigOp(c.config_operation), value=c.value)
                for c in r.configs
            )
        except ValueError:
            results.append(
                _resource(r.resource_type, r.resource_name, ErrorCode.INVALID_REQUEST, "unknown op")
            )
            continue
        wanted.append(
            AlterConfigsResource(resource_type=rtype, resource_name=r.resource_name, configs=ops)
        )
    results.extend(await _alter(api, ctx, wanted, body.validate_only))
    return {"responses": _in_request_order(results, body.resources)}


_DYNAMIC: Final = frozenset(
    {
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    }
)


async def handle_alter_configs(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    """The legacy AlterConfigs: a resource's dynamic config becomes exactly the one given."""
    body = request.body
    good, results = _checked_resources(body.resources)
    nulls = [(r, t) for r, t in good if any(c.value is None for c in r.configs)]
    results.extend(
        _resource(r.resource_type, r.resource_name, ErrorCode.INVALID_CONFIG, "a null value")
        for r, _ in nulls
    )
    good = [g for g in good if g not in nulls]
    current: dict[tuple[int, str], set[str]] = {}
    for part, outcome in await forward_parts(
        api,
        ctx,
        [DescribeConfigsResource(resource_type=t, resource_name=r.resource_name) for r, t in good],
        lambda rs: DescribeConfigsRequest(resources=tuple(rs)),
    ):
        answer: DescribeConfigsResponse | None = outcome.response
        if answer is None or answer.error_code != ErrorCode.NONE:
            code = outcome.code if answer is None else answer.error_code
            message = outcome.message if answer is None else answer.error_message
            results.extend(
                _resource(int(r.resource_type), r.resource_name, code, message) for r in part
            )
            continue
        for res in answer.results:
            key = (int(res.resource_type), res.resource_name)
            if res.error_code != ErrorCode.NONE:
                results.append(_resource(*key, res.error_code, res.error_message))
            else:
                current[key] = {c.name for c in res.configs if c.source in _DYNAMIC}
    wanted = []
    for r, rtype in good:
        dynamic = current.get((int(r.resource_type), r.resource_name))
        if dynamic is None:
            continue  # answered above
        given = {c.name: c.value for c in r.configs}
        ops = (
            *(AlterableConfig(name=n, op=AlterConfigOp.SET, value=v) for n, v in given.items()),
            *(
                AlterableConfig(name=n, op=AlterConfigOp.DELETE)
                for n in sorted(dynamic - set(given))
            ),
        )
        wanted.append(
            AlterConfigsResource(resource_type=rtype, resource_name=r.resource_name, configs=ops)
        )
    results.extend(await _alter(api, ctx, wanted, body.validate_only))
    return {"responses": _in_request_order(results, body.resources)}


CONFIG_HANDLERS: Final[Mapping[int, ApiSpec]] = {
    32: ApiSpec("DescribeConfigs", 1, 4, handle_describe_configs),
    33: ApiSpec("AlterConfigs", 0, 2, handle_alter_configs),
    44: ApiSpec("IncrementalAlterConfigs", 0, 1, handle_incremental_alter_configs),
}

__all__ = ["CONFIG_HANDLERS"]
