"""A new, empty log writes no checkpoint it does not need: a broker creating thousands of
replicas paid two fsyncs per checkpoint on its event loop (profiled at 10,000 partitions: most
of a broker's time went to fsync, and its heartbeats came late enough to be fenced)."""

from __future__ import annotations

from pathlib import Path

import pytest

import storage.checkpoint
from storage.leader_epoch import LEADER_EPOCH_CHECKPOINT
from storage.log import SegmentedLog
from storage.log_loader import LOG_START_OFFSET_CHECKPOINT


def test_a_new_log_fsyncs_no_empty_checkpoint_and_reopens_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written: list[str] = []
    original = storage.checkpoint.write_atomically

    def recording(path: Path, *args: object, **kwargs: object) -> None:
        written.append(path.name)
        original(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(storage.checkpoint, "write_atomically", recording)
    log = SegmentedLog.open(tmp_path / "t-0")
    assert written == []
    assert not (tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT).exists()
    assert not (tmp_path / "t-0" / LOG_START_OFFSET_CHECKPOINT).exists()
    log.close()
    again = SegmentedLog.open(tmp_path / "t-0")
    assert again.log_start_offset == 0 and again.log_end_offset == 0
    assert again.leader_epoch_cache.entries == []
    # the first epoch is persisted as before
    assert again.assign_leader_epoch(3, 0)
    assert (tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT).exists()
    again.close()
