"""UpdateFeatures decisions (KIP-584, KIP-778; Kafka's FeatureControlManager), pure.

Each update names a feature, its new finalized level and how it may move (Kafka's
``UpgradeType``): 1 UPGRADE (the level stays or goes up), 2 SAFE_DOWNGRADE and 3
UNSAFE_DOWNGRADE (it stays or goes down). An update is refused with INVALID_UPDATE_VERSION
when:

- the upgrade type is none of these;
- the level is negative;
- the feature is not one this controller runs (`kraft.metadata.features.SUPPORTED_FEATURES`),
  or the level is outside its supported range;
- a registered broker, fenced or not, advertised a range without the level (a broker that
  advertised nothing of the feature supports level 0 only, as Kafka takes it);
- the level goes down under UPGRADE, or up under a downgrade.

The request is all or nothing: the first refusal answers it and nothing is written; else one
`FeatureLevelRecord` per update, in one atomic batch (none with ``validate_only``).

NB: Kafka also checks every controller's registration (KIP-919). kraft's controllers do not
register; the voters run the same code as the active one, which checks its own range.
Level 0 stays in kraft's image as the cluster's choice (Kafka removes the feature), so the
configured level (`kraft.controller.periodic`) is not finalized again; ApiVersions shows a
level-0 feature as not finalized, as Kafka does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from kraft.controller.messages import FeatureUpdate, UpdateFeaturesRequest, UpdateFeaturesResponse
from kraft.controller.result import ControllerResult
from kraft.metadata.features import SUPPORTED_FEATURES
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import FeatureLevelRecord
from storage.errors import ErrorCode

UPGRADE: Final = 1
SAFE_DOWNGRADE: Final = 2
UNSAFE_DOWNGRADE: Final = 3
UPGRADE_TYPES: Final = frozenset({UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE})

DISABLED: Final = (0, 0)
"""The range of a feature a node does not advertise (Kafka's ``QuorumFeatures.DISABLED``)."""


def _not_supported(level: int, who: str, supported: tuple[int, int]) -> str | None:
    low, high = supported
    if low <= level <= high:
        return None
    if high == 0:
        return f"{who} does not support this feature."
    return f"{who} only supports versions {low} to {high}."


def _advertised(image: MetadataImage, broker_id: int) -> dict[str, tuple[int, int]]:
    return {
        f.name: (f.min_supported_version, f.max_supported_version)
        for f in image.brokers[broker_id].features
    }


def _problem(
    image: MetadataImage,
    update: FeatureUpdate,
    local: Mapping[str, tuple[int, int]],
) -> str | None:
    """Why ``update`` is refused, or None."""
    name, level = update.feature, update.max_version_level
    if update.upgrade_type not in UPGRADE_TYPES:
        return f"The controller does not support upgrade type {update.upgrade_type}."
    if level < 0:
        return "A feature version cannot be less than 0."
    if name not in local:
        return "The active controller does not support this feature."
    nodes = (
        ("The active controller", local[name]),
        *(
            (f"Broker {broker_id}", _advertised(image, broker_id).get(name, DISABLED))
            for broker_id in sorted(image.brokers)
        ),
    )
    reason = next((r for who, rng in nodes if (r := _not_supported(level, who, rng))), None)
    if reason is not None:
        return reason
    current = image.features.get(name, 0)
    if level < current and update.upgrade_type == UPGRADE:
        return (
            f"Can't downgrade the version of this feature from {current} without setting the "
            "upgrade type to either safe or unsafe downgrade."
        )
    if level > current and update.upgrade_type != UPGRADE:
        return f"Can't downgrade to a newer version (the finalized level is {current})."
    return None


def handle_update_features(
    image: MetadataImage,
    request: UpdateFeaturesRequest,
    local: Mapping[str, tuple[int, int]] = SUPPORTED_FEATURES,
) -> ControllerResult[UpdateFeaturesResponse]:
    """The records of ``request`` on ``image`` (none if any update is refused or with
    ``validate_only``), and the answer. ``local``: the ranges this controller runs."""
    names = [u.feature for u in request.updates]
    if len(set(names)) != len(names):
        return ControllerResult(
            records=(),
            response=UpdateFeaturesResponse(
                error_code=ErrorCode.INVALID_REQUEST,
                error_message="The request updates a feature more than once.",
            ),
        )
    for update in request.updates:
        problem = _problem(image, update, local)
        if problem is not None:
            return ControllerResult(
                records=(),
                response=UpdateFeaturesResponse(
                    error_code=ErrorCode.INVALID_UPDATE_VERSION,
                    error_message=(
                        f"Invalid update version {update.max_version_level} for feature "
                        f"{update.feature}. {problem}"
                    ),
                ),
            )
    if request.validate_only:
        return ControllerResult(records=(), response=UpdateFeaturesResponse())
    return ControllerResult(
        records=tuple(
            FeatureLevelRecord(name=u.feature, feature_level=u.max_version_level)
            for u in request.updates
        ),
        response=UpdateFeaturesResponse(),
    )


__all__ = [
    "SAFE_DOWNGRADE",
    "UNSAFE_DOWNGRADE",
    "UPGRADE",
    "UPGRADE_TYPES",
    "handle_update_features",
]
