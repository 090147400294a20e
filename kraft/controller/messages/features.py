"""UpdateFeatures (KIP-584, KIP-778): request and response.

The controller decides it (`kraft.controller.feature_control`); the levels a cluster runs are
`kraft.metadata.features`'s. DescribeFeatures is no request of its own: a broker's ApiVersions
answer carries the finalized levels and their epoch.
"""

from __future__ import annotations

from dataclasses import dataclass

from storage.errors import ErrorCode


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureUpdate:
    """One feature's new finalized level. ``upgrade_type``: Kafka's numbers, 1 UPGRADE (the
    level may not go down), 2 SAFE_DOWNGRADE, 3 UNSAFE_DOWNGRADE (`feature_control`)."""

    feature: str
    max_version_level: int
    upgrade_type: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateFeaturesRequest:
    updates: tuple[FeatureUpdate, ...] = ()
    validate_only: bool = False
    """Check the updates and answer, writing nothing."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateFeaturesResponse:
    """All or nothing, as Kafka's controller answers: one error for the whole request (the
    first update refused), no record written unless every update is valid."""

    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


__all__ = ["FeatureUpdate", "UpdateFeaturesRequest", "UpdateFeaturesResponse"]
