"""The group coordinator's state survives log compaction of ``__consumer_offsets``: its
records are keyed latest-wins, so replaying the compacted log (latest record per key at its
original offset, tombstones until ``delete.retention.ms`` after the pass that first kept
them (KIP-534), then gone) rebuilds the same groups as replaying everything."""

from __future__ import annotations

from pathlib import Path

import pytest

from replication.broker.coordinators.group_service import OFFSETS_TOPIC_CONFIGS
from replication.group import GroupConfig, GroupCoordinator
from storage.config import LogConfig
from storage.log import SegmentedLog
from storage.records import SimpleRecord, build_batch, iter_batches, record_tuples
from tests.group.helpers import Member, Shell, topics

DAY_MS = 86_400_000


def _replayed(config: GroupConfig, log: SegmentedLog) -> GroupCoordinator:
    """What the broker's shard load does (`GroupRuntime._load`): every keyed record in order."""
    coordinator = GroupCoordinator(config)
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        for pos, header in iter_batches(data):
            for _, _, key, value, _ in record_tuples(data, pos):
                if key is not None:
                    coordinator.replay(key, value)
            offset = header.next_offset
    return coordinator


def _tombstones(log: SegmentedLog, *, below: int) -> int:
    count, offset = 0, log.log_start_offset
    while offset < below:
        data = log.read(offset, 1 << 20)
        for pos, header in iter_batches(data):
            count += sum(r[3] is None for r in record_tuples(data, pos) if offset <= r[0] < below)
            offset = header.next_offset
    return count


@pytest.mark.parametrize("tombstones_expired", [False, True])
def test_replaying_the_compacted_offsets_log_restores_the_groups(
    tmp_path: Path, tombstones_expired: bool
) -> None:
    config = GroupConfig(session_timeout_ms=5_000)
    shell = Shell(config)
    shell.topics = topics(a=3, b=2)
    members = [Member(shell, f"m{i}", ["a", "b"], group=g) for i in range(3) for g in "gh"]
    for _ in range(4):
        for m in members:
            m.heartbeat()
    for n in range(30):  # many commits of the same partitions: what compaction removes
        shell.offset_commit("", -1, {("a", n % 3): n}, group="e")  # an empty group's (admin)
    for m in members:
        if m.group == "h":
            m.leave()  # tombstones for the members' records
    shell.commit(shell.coord.delete_groups(["h"], shell.now).records)  # and the group's
    members[0].leave()
    for m in members[1:]:
        if m.group == "g":
            m.heartbeat()
    assert shell.log, "the coordinator wrote records"

    props = {**OFFSETS_TOPIC_CONFIGS, "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0"}
    log_config = LogConfig.from_properties(props)
    assert log_config.compact
    written_ms = 1_000
    log = SegmentedLog.open(tmp_path, log_config, clock_ms=lambda: written_ms)
    for key, value in shell.log:
        log.append(build_batch([SimpleRecord(key=key, value=value)], timestamp_ms=written_ms))
    result = log.compact(written_ms, high_watermark=log.log_end_offset)
    assert result is not None and result.records_removed > 0
    stamped = _tombstones(log, below=result.end_offset)  # the pass stamped their horizon
    assert stamped > 0
    if tombstones_expired:  # a later pass past the delete horizon (the log dirty again)
        final = {key: value for key, value in shell.log}
        again = [(k, v) for k, v in final.items() if v is not None]  # replays to the same
        segments = len(log.segments)
        while len(log.segments) == segments:  # until the segment they fill rolls
            for key, value in again:
                log.append(build_batch([SimpleRecord(key=key, value=value)], timestamp_ms=1))
        later = log.compact(written_ms + 2 * DAY_MS, high_watermark=log.log_end_offset)
        assert later is not None and _tombstones(log, below=result.end_offset) == 0

    live = dict(shell.coord.groups())
    assert "h" not in live and live["g"].members and len(live["e"].offsets) == 3
    assert dict(_replayed(config, log).groups()) == live
    log.close()
