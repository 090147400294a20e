"""Feature levels (KIP-584): the active controller finalizes ``transaction.version`` once, at
its configured level, when the cluster has none (Kafka does it when the storage is formatted);
a finalized level is the cluster's and is kept; the image folds `FeatureLevelRecord` and its
snapshot keeps it."""

from __future__ import annotations

from kraft.controller import ControllerConfig
from kraft.metadata import FeatureLevelRecord, MetadataImage
from kraft.metadata.features import bootstrap_records, finalized_level
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
