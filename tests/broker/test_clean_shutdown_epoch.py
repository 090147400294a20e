"""KIP-966's clean-shutdown record of a broker (`replication.broker.lifecycle.clean_shutdown`): the
epoch of the last clean stop comes back once, and anything else reads as an unclean shutdown."""

from __future__ import annotations

from pathlib import Path

import pytest

from replication.broker.lifecycle.clean_shutdown import (
    CLEAN_SHUTDOWN_FILE,
    take_previous_broker_epoch,
    write_clean_shutdown,
)


def test_a_clean_shutdown_epoch_is_read_once_so_a_later_crash_is_unclean(tmp_path: Path) -> None:
    write_clean_shutdown(tmp_path, 42)
    assert take_previous_broker_epoch(tmp_path) == 42
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert take_previous_broker_epoch(tmp_path) is None  # this run crashed: no record


@pytest.mark.parametrize(
    "content",
    [b"", b"not json", b"[1]", b'{"version": 9, "broker_epoch": 4}', b'{"version": 0}',
     b'{"version": 0, "broker_epoch": true}', b'{"version": 0, "broker_epoch": -1}'],
)  # fmt: skip
def test_an_unreadable_record_is_an_unclean_shutdown_and_is_removed(
    tmp_path: Path, content: bytes
) -> None:
    (tmp_path / CLEAN_SHUTDOWN_FILE).write_bytes(content)
    assert take_previous_broker_epoch(tmp_path) is None
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
