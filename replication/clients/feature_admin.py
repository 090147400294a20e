"""The feature calls of `replication.clients.admin.AdminClient` (Kafka's ``Admin.describeFeatures``
and ``updateFeatures``, KIP-584): UpdateFeatures through a broker's forwarding of the controller
API; the finalized levels and every broker's supported ranges from DescribeCluster (Kafka's
admin reads them from one broker's ApiVersions)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kraft.controller.client import ControllerClient
from kraft.controller.feature_control import SAFE_DOWNGRADE, UNSAFE_DOWNGRADE, UPGRADE
from kraft.controller.messages import (
    DescribeClusterResponse,
    FeatureUpdate,
    UpdateFeaturesRequest,
    UpdateFeaturesResponse,
)
from storage.errors import ErrorCode, InvalidRequestError, error_for


@dataclass(frozen=True, slots=True)
class FeatureMetadata:
    """Kafka's ``FeatureMetadata``: the finalized levels (a level-0 feature is not finalized,
    as Kafka shows it), their epoch (-1: never finalized), and each feature's range that every
    registered broker supports."""

    finalized: Mapping[str, int]
    epoch: int
    supported: Mapping[str, tuple[int, int]]


def feature_metadata(cluster: DescribeClusterResponse) -> FeatureMetadata:
    """The features of a DescribeCluster answer."""
    ranges: dict[str, tuple[int, int]] = {}
    counts: dict[str, int] = {}
    for broker in cluster.brokers:
        for f in broker.features:
            low, high = ranges.get(f.name, (f.min_supported_version, f.max_supported_version))
            ranges[f.name] = (
                max(low, f.min_supported_version),
                min(high, f.max_supported_version),
            )
            counts[f.name] = counts.get(f.name, 0) + 1
    every = len(cluster.brokers)
    return FeatureMetadata(
        finalized={f.name: f.level for f in cluster.finalized_features if f.level > 0},
        epoch=cluster.finalized_features_epoch,
        supported={n: r for n, r in sorted(ranges.items()) if counts[n] == every},
    )


def update_features(
    client: ControllerClient,
    levels: Mapping[str, int],
    *,
    downgrade: bool,
    unsafe: bool,
    validate_only: bool,
    timeout: float | None,
) -> None:
    """Finalize ``levels`` (all or nothing), once committed.

    Raises:
        InvalidRequestError: no feature named (nothing is sent).
        InvalidUpdateVersionError: a level the cluster may not take (unknown feature, outside
            a supported range, down without ``downgrade`` or up with it).
        ClusterAuthorizationFailedError: the caller may not ALTER the cluster.
    """
    if not levels:
        raise InvalidRequestError("name at least one feature to update")
    kind = (UNSAFE_DOWNGRADE if unsafe else SAFE_DOWNGRADE) if downgrade else UPGRADE
    request = UpdateFeaturesRequest(
        updates=tuple(
            FeatureUpdate(feature=name, max_version_level=level, upgrade_type=kind)
            for name, level in sorted(levels.items())
        ),
        validate_only=validate_only,
    )
    response: UpdateFeaturesResponse = client.send(request, timeout=timeout)
    if response.error_code is not ErrorCode.NONE:
        raise error_for(response.error_code, response.error_message)


__all__ = ["FeatureMetadata", "feature_metadata", "update_features"]
