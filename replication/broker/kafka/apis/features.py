"""The Kafka adapter's UpdateFeatures (KIP-584, KIP-778): ``kafka-features.sh upgrade``,
``downgrade`` and ``disable`` on a running cluster, forwarded to the active controller.

The controller decides (`kraft.controller.feature_control`) and answers once the new levels are
committed; the brokers then advertise them in ApiVersions, which is what DescribeFeatures reads
(``kafka-features.sh describe``). Versions:

- v0: ``allow_downgrade`` per update (true: a safe downgrade, else an upgrade);
- v1: ``upgrade_type`` per update (1 upgrade, 2 safe, 3 unsafe downgrade) and
  ``validate_only``;
- v2: the answer has no per-feature results, only the request's error.

The request is all or nothing (one error for all), as Kafka's controller answers it; v0 and v1
list each feature with NONE on success. ``timeout_ms`` is not used: a forwarded request has the
broker's own bound (`replication.broker.api.broker_api.FORWARD_TIMEOUT_S`). Authorization: ALTER
on the CLUSTER, refused whole with CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kraft.controller.feature_control import SAFE_DOWNGRADE, UPGRADE
from kraft.controller.messages import FeatureUpdate, UpdateFeaturesRequest, UpdateFeaturesResponse
from replication.broker.api import RequestContext
from replication.broker.kafka.api import ApiSpec, KafkaBrokerApi, Response
from replication.broker.kafka.apis.forwarding import error, forward
from replication.broker.kafka.frames import Request
from storage.errors import ErrorCode


def _update(u: Any, api_version: int) -> FeatureUpdate:
    if api_version == 0:
        upgrade_type = SAFE_DOWNGRADE if u.allow_downgrade else UPGRADE
    else:
        upgrade_type = int(u.upgrade_type)
    return FeatureUpdate(
        feature=u.feature, max_version_level=int(u.max_version_level), upgrade_type=upgrade_type
    )


async def handle_update_features(
    api: KafkaBrokerApi, request: Request, ctx: RequestContext
) -> Response:
    body = request.body
    updates = tuple(_update(u, request.api_version) for u in body.feature_updates)
    outcome = await forward(
        api,
        UpdateFeaturesRequest(
            updates=updates, validate_only=bool(getattr(body, "validate_only", False))
        ),
        ctx,
    )
    answer: UpdateFeaturesResponse | None = outcome.response
    code = outcome.code if answer is None else answer.error_code
    message = outcome.message if answer is None else answer.error_message
    results = (
        [{"feature": u.feature, **error(ErrorCode.NONE, None)} for u in updates]
        if code == ErrorCode.NONE
        else []
    )
    return {**error(code, message), "results": results}


FEATURE_HANDLERS: Final[Mapping[int, ApiSpec]] = {
    57: ApiSpec("UpdateFeatures", 0, 2, handle_update_features),
}
"""API key -> its `ApiSpec`: UpdateFeatures' row of the listener's table."""

__all__ = ["FEATURE_HANDLERS"]
