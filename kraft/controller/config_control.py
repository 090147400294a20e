"""Config decisions: IncrementalAlterConfigs (KIP-339) for topics and brokers.

Each resource is validated as a whole and either all of its changes become ``ConfigRecord``s or
none do, with one error per resource (as Kafka's ``ConfigurationControlManager``):

- a resource named twice in the request -> INVALID_REQUEST
- a topic that does not exist -> UNKNOWN_TOPIC_OR_PARTITION
- a broker resource name that is neither ``""`` (cluster default) nor a broker id
  -> INVALID_REQUEST
- a key named twice for one resource -> INVALID_REQUEST
- an unknown key, a bad value, a value kraft does not support yet (``cleanup.policy=compact``,
  ...: `storage.config_registry`), SET without a value, APPEND/SUBTRACT on a non-list key, a
  topic's ``min.insync.replicas`` above its replication factor, a change of a topic's
  ``replication.mode`` (chosen at creation), ``min.insync.replicas`` on a quorum topic (it does
  not apply: a majority commits) -> INVALID_CONFIG

A request changing more than 10,000 keys is refused whole, POLICY_VIOLATION for every resource
(`kraft.controller.limits`); a value longer than `CONFIG_VALUE_MAX_CHARS` is INVALID_CONFIG.

APPEND and SUBTRACT work on the current value of a LIST key (its dynamic value or its default).

A change of ``min.insync.replicas`` (a topic's, or the cluster default) clears the eligible
leader replicas of the partitions it applies to, in the same batch (KIP-966, as Kafka does:
`kraft.controller.eligible_leaders.clear_elr_on_min_isr_change`).
"""

from __future__ import annotations

from collections.abc import Mapping

from kraft.controller.eligible_leaders import clear_elr_on_min_isr_change
from kraft.controller.limits import reject_incremental_alter_configs
from kraft.controller.messages import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    AlterConfigsResourceResult,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kraft.controller.result import ControllerResult
from kraft.metadata.configs import (
    CONFIG_VALUE_MAX_CHARS,
    MIN_INSYNC_REPLICAS,
    REPLICATION_MODE,
    ConfigType,
    check_min_insync_replicas,
    check_quorum_topic_config,
    check_replication_mode_change,
    config_defs,
    quoted,
    split_list,
    validate_config,
)
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import ConfigRecord, ConfigResourceType, MetadataRecord
from storage.errors import ErrorCode


def handle_incremental_alter_configs(
    image: MetadataImage, request: IncrementalAlterConfigsRequest
) -> ControllerResult[IncrementalAlterConfigsResponse]:
    """Apply SET/DELETE/APPEND/SUBTRACT operations, one result per resource."""
    rejection = reject_incremental_alter_configs(request)
    if rejection is not None:
        return ControllerResult(records=(), response=rejection)
    seen: dict[tuple[ConfigResourceType, str], int] = {}
    for resource in request.resources:
        key = (resource.resource_type, resource.resource_name)
        seen[key] = seen.get(key, 0) + 1
    records: list[MetadataRecord] = []
    results: list[AlterConfigsResourceResult] = []
    for resource in request.resources:
        if seen[(resource.resource_type, resource.resource_name)] > 1:
            outcome: list[ConfigRecord] | tuple[ErrorCode, str] = (
                ErrorCode.INVALID_REQUEST,
                "resource appears more than once in the request",
            )
        else:
            outcome = _alter_resource(image, resource)
        if isinstance(outcome, tuple):
            code, message = outcome
            results.append(
                AlterConfigsResourceResult(
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                    error_code=code,
                    error_message=message,
                )
            )
            continue
        if not request.validate_only:
            records.extend(outcome)
        results.append(
            AlterConfigsResourceResult(
                resource_type=resource.resource_type, resource_name=resource.resource_name
            )
        )
    records.extend(clear_elr_on_min_isr_change(image, _min_isr_changed(image, records)))
    return ControllerResult(
        records=tuple(records), response=IncrementalAlterConfigsResponse(responses=tuple(results))
    )


def _min_isr_changed(image: MetadataImage, records: list[MetadataRecord]) -> set[str]:
    """The topics whose effective ``min.insync.replicas`` these config records may change."""
    topics: set[str] = set()
    for r in records:
        if isinstance(r, ConfigRecord) and r.name == MIN_INSYNC_REPLICAS:
            if r.resource_type is ConfigResourceType.TOPIC:
                topics.add(r.resource_name)
            elif r.resource_name == "":  # the cluster default applies to every topic
                topics.update(image.topic_ids_by_name)
    return topics


def _alter_resource(
    image: MetadataImage, resource: AlterConfigsResource
) -> list[ConfigRecord] | tuple[ErrorCode, str]:
    rtype, name = resource.resource_type, resource.resource_name
    if rtype is ConfigResourceType.TOPIC:
        if image.topic(name) is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {quoted(name)}"
        current: Mapping[str, str] = image.topic_configs(name)
    else:
        if name != "" and not name.isdigit():
            return ErrorCode.INVALID_REQUEST, f"broker resource {quoted(name)} is not a broker id"
        defaults = {key: d.default or "" for key, d in config_defs(rtype).items()}
        current = {**defaults, **image.dynamic_configs(rtype, name)}
    dynamic = image.dynamic_configs(rtype, name)
    names = [c.name for c in resource.configs]
    if len(set(names)) != len(names):
        return ErrorCode.INVALID_REQUEST, "a config key appears more than once"
    records: list[ConfigRecord] = []
    for change in resource.configs:
        outcome = _new_value(rtype, change, current)
        if isinstance(outcome, tuple):
            return outcome
        if rtype is ConfigResourceType.TOPIC:
            mode = current[REPLICATION_MODE]
            problem = check_quorum_topic_config(change.name, outcome, mode)
            if problem is None and change.name == REPLICATION_MODE:
                default = config_defs(rtype)[REPLICATION_MODE].default or ""
                problem = check_replication_mode_change(mode, outcome or default)
            if problem is not None:
                return ErrorCode.INVALID_CONFIG, problem
        if rtype is ConfigResourceType.TOPIC and change.name == MIN_INSYNC_REPLICAS:
            replication_factor = _replication_factor(image, name)
            problem = (
                check_min_insync_replicas(outcome, replication_factor)
                if replication_factor is not None
                else None
            )
            if problem is not None:
                return ErrorCode.INVALID_CONFIG, problem
        if outcome is None and change.name not in dynamic:
            continue  # deleting a key that is not set changes nothing
        records.append(
            ConfigRecord(resource_type=rtype, resource_name=name, name=change.name, value=outcome)
        )
    return records


def _replication_factor(image: MetadataImage, topic: str) -> int | None:
    """The smallest replica count among ``topic``'s partitions (they agree unless a
    reassignment is under way), None when it has none."""
    topic_image = image.topic(topic)
    if topic_image is None or not topic_image.partitions:
        return None
    return min(len(p.replicas) for p in topic_image.partitions.values())


def _new_value(
    rtype: ConfigResourceType, change: AlterableConfig, current: Mapping[str, str]
) -> str | tuple[ErrorCode, str] | None:
    """The new dynamic value (``None`` = delete), or an error."""
    definition = config_defs(rtype).get(change.name)
    if definition is None:
        return (
            ErrorCode.INVALID_CONFIG,
            f"unknown {rtype.name.lower()} config {quoted(change.name)}",
        )
    if change.value is not None and len(change.value) > CONFIG_VALUE_MAX_CHARS:
        # Before APPEND/SUBTRACT split it: a long value is refused without any work.
        return ErrorCode.INVALID_CONFIG, (
            f"{change.name}: a value of {len(change.value)} characters is longer than "
            f"{CONFIG_VALUE_MAX_CHARS}"
        )
    match change.op:
        case AlterConfigOp.DELETE:
            return None
        case AlterConfigOp.SET:
            value = change.value
        case AlterConfigOp.APPEND | AlterConfigOp.SUBTRACT:
            if definition.type is not ConfigType.LIST:
                return ErrorCode.INVALID_CONFIG, f"{change.name} is not a list config"
            if change.value is None:
                return ErrorCode.INVALID_CONFIG, f"{change.op.name} of {change.name} needs a value"
            items = split_list(current.get(change.name, definition.default or ""))
            operand = split_list(change.value)
            if change.op is AlterConfigOp.APPEND:
                items.extend(item for item in operand if item not in items)
            else:
                items = [item for item in items if item not in operand]
            value = ",".join(items)
    if value is None:
        return ErrorCode.INVALID_CONFIG, f"SET of {change.name} needs a value"
    problem = validate_config(rtype, change.name, value)
    if problem is not None:
        return ErrorCode.INVALID_CONFIG, problem
    return value


__all__ = ["handle_incremental_alter_configs"]
