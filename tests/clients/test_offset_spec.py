"""``kraft topics offsets --time`` / `AdminClient.list_offsets` specs, as kafka-get-offsets."""

from __future__ import annotations

import pytest

from replication.clients.offsets import offset_spec
from replication.messages import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("earliest", EARLIEST_TIMESTAMP),
        ("LATEST", LATEST_TIMESTAMP),
        ("1700000000000", 1_700_000_000_000),
        (0, 0),
        (EARLIEST_TIMESTAMP, EARLIEST_TIMESTAMP),
    ],
)
def test_offset_specs_map_to_list_offsets_timestamps(spec: int | str, expected: int) -> None:
    assert offset_spec(spec) == expected


@pytest.mark.parametrize("spec", ["yesterday", "-5", -7, "1e9", "x" * 1000])
def test_a_bad_offset_spec_is_one_short_error(spec: int | str) -> None:
    with pytest.raises(ValueError) as info:
        offset_spec(spec)
    assert len(str(info.value)) < 120
