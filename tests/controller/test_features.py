"""Feature levels (KIP-584): the active controller finalizes ``transaction.version`` once, at
its configured level, when the cluster has none (Kafka does it when the storage is formatted);
a finalized level is the cluster's and is kept; the image folds `FeatureLevelRecord` and its
snapshot keeps it. UpdateFeatures changes a level as Kafka's controller does: within every
registered broker's range, down only with a downgrade type, all or nothing."""

from __future__ import annotations

import pytest

from kraft.controller import ControllerConfig
from kraft.controller.feature_control import SAFE_DOWNGRADE, UNSAFE_DOWNGRADE
from kraft.controller.messages import (
    FeatureUpdate,
    RegisterBrokerRequest,
    UpdateFeaturesRequest,
    UpdateFeaturesResponse,
)
from kraft.metadata import BrokerFeature, FeatureLevelRecord, MetadataImage
from kraft.metadata.features import advertised_features, bootstrap_records, finalized_level
from storage.errors import ErrorCode
from tests.controller.harness import ControllerHarness


def test_the_first_tick_of_a_new_cluster_finalizes_transaction_version_2_once() -> None:
    h = ControllerHarness(finalized=False)
    assert h.tick(1) == (FeatureLevelRecord(name="transaction.version", feature_level=2),)
    assert h.image.features == {"transaction.version": 2}
    assert h.image.features_epoch == h.image.last_offset
    assert not any(isinstance(r, FeatureLevelRecord) for r in h.tick(10_000))


def test_the_configured_level_is_finalized_and_a_finalized_one_is_kept() -> None:
    h = ControllerHarness(config=ControllerConfig(transaction_version=1), finalized=False)
    h.tick(1)
    assert finalized_level(h.image.features, "transaction.version") == 1
    # A later controller configured for 2 keeps what the cluster finalized.
    later = ControllerHarness(h.image, epoch=2, config=ControllerConfig(transaction_version=2))
    later.tick(2)
    assert later.image.features == {"transaction.version": 1}
    assert bootstrap_records({"transaction.version": 0}, {"transaction.version": 2}) == []


def test_an_unfinalized_feature_reads_as_level_0_and_a_snapshot_keeps_the_levels() -> None:
    assert finalized_level(MetadataImage.empty().features, "transaction.version") == 0
    image = MetadataImage.empty().apply(
        FeatureLevelRecord(name="transaction.version", feature_level=2), 7
    )
    assert (image.features, image.features_epoch) == ({"transaction.version": 2}, 7)
    loaded = MetadataImage.from_snapshot(image.to_snapshot())
    assert loaded == image and loaded.features_epoch == 7


# -- UpdateFeatures (KIP-584, KIP-778; Kafka's FeatureControlManager) ---------------------------

TV = "transaction.version"


def _update(
    h: ControllerHarness, *updates: FeatureUpdate, validate_only: bool = False
) -> UpdateFeaturesResponse:
    request = UpdateFeaturesRequest(updates=updates, validate_only=validate_only)
    response: UpdateFeaturesResponse = h.run(h.core.handle_update_features_request, request)
    return response


def _registered(*ranges: tuple[int, tuple[BrokerFeature, ...]]) -> ControllerHarness:
    h = ControllerHarness()
    for broker_id, features in ranges:
        h.run(
            h.core.handle_register_broker_request,
            RegisterBrokerRequest(broker_id=broker_id, incarnation_id="i", features=features),
        )
    return h


def test_a_level_goes_down_only_with_a_downgrade_type_and_up_only_with_an_upgrade() -> None:
    h = _registered((1, advertised_features()), (2, advertised_features()))
    epoch = h.image.features_epoch
    refused = _update(h, FeatureUpdate(feature=TV, max_version_level=1))
    assert refused.error_code == ErrorCode.INVALID_UPDATE_VERSION
    assert "without setting the upgrade type" in refused.error_message
    assert (h.image.features, h.image.features_epoch) == ({TV: 2}, epoch)

    down = _update(h, FeatureUpdate(feature=TV, max_version_level=1, upgrade_type=SAFE_DOWNGRADE))
    assert down.error_code == ErrorCode.NONE
    assert h.image.features == {TV: 1} and h.image.features_epoch > epoch

    wrong_way = FeatureUpdate(feature=TV, max_version_level=2, upgrade_type=UNSAFE_DOWNGRADE)
    assert _update(h, wrong_way).error_code == ErrorCode.INVALID_UPDATE_VERSION
    assert _update(h, FeatureUpdate(feature=TV, max_version_level=2)).error_code == ErrorCode.NONE
    assert h.image.features == {TV: 2}
    # Level 0 stays finalized at 0: the configured level is not finalized again on a tick.
    off = FeatureUpdate(feature=TV, max_version_level=0, upgrade_type=UNSAFE_DOWNGRADE)
    assert _update(h, off).error_code == ErrorCode.NONE
    h.tick(10_000)
    assert h.image.features == {TV: 0}


@pytest.mark.parametrize(
    ("update", "reason"),
    [
        (FeatureUpdate(feature="no.such.feature", max_version_level=1), "does not support"),
        (FeatureUpdate(feature=TV, max_version_level=3), "only supports versions 0 to 2"),
        (FeatureUpdate(feature=TV, max_version_level=-1), "cannot be less than 0"),
        (FeatureUpdate(feature=TV, max_version_level=2, upgrade_type=0), "upgrade type 0"),
        (FeatureUpdate(feature=TV, max_version_level=2, upgrade_type=4), "upgrade type 4"),
    ],
)
def test_an_update_out_of_the_supported_range_is_refused(
    update: FeatureUpdate, reason: str
) -> None:
    h = _registered((1, advertised_features()))
    answer = _update(h, update)
    assert answer.error_code == ErrorCode.INVALID_UPDATE_VERSION
    assert reason in answer.error_message and update.feature in answer.error_message
    assert h.image.features == {TV: 2}


def test_every_registered_broker_must_support_the_level() -> None:
    older = (BrokerFeature(name=TV, min_supported_version=0, max_supported_version=1),)
    h = _registered((1, advertised_features()), (2, older), (3, ()))
    down = FeatureUpdate(feature=TV, max_version_level=1, upgrade_type=SAFE_DOWNGRADE)
    answer = _update(h, down)
    assert answer.error_code == ErrorCode.INVALID_UPDATE_VERSION
    assert "Broker 3 does not support this feature" in answer.error_message
    h = _registered((1, advertised_features()), (2, older))
    assert _update(h, down).error_code == ErrorCode.NONE
    answer = _update(h, FeatureUpdate(feature=TV, max_version_level=2))
    assert "Broker 2 only supports versions 0 to 1" in answer.error_message
    assert h.image.features == {TV: 1}


def test_validate_only_and_a_refused_update_write_nothing() -> None:
    h = _registered((1, advertised_features()))
    down = FeatureUpdate(feature=TV, max_version_level=1, upgrade_type=SAFE_DOWNGRADE)
    before = h.image.last_offset
    assert _update(h, down, validate_only=True).error_code == ErrorCode.NONE
    bad = FeatureUpdate(feature="no.such.feature", max_version_level=1)
    assert _update(h, down, bad).error_code == ErrorCode.INVALID_UPDATE_VERSION
    assert _update(h, down, down).error_code == ErrorCode.INVALID_REQUEST
    assert h.image.last_offset == before and h.image.features == {TV: 2}


def test_a_broker_registration_keeps_its_feature_ranges_through_a_snapshot() -> None:
    h = _registered((1, advertised_features()))
    assert h.image.brokers[1].features == advertised_features()
    assert MetadataImage.from_snapshot(h.image.to_snapshot()).brokers[1].features == (
        BrokerFeature(name=TV, min_supported_version=0, max_supported_version=2),
    )
