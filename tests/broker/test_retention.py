"""Retention on the broker: the log config a replica gets, segments deleted below the high
watermark only, followers adopting the leader's log start offset, producer snapshots pruned
and truncated with the log."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from kraft.metadata.image import PartitionRegistration
from replication.broker.config import BrokerNodeConfig
from replication.broker.replicas.partition import PartitionReplica, follower_response
from replication.broker.replicas.retention import (
    resolve_log_config,
    retention_pass,
    topic_keys_of_dynamic_broker_defaults,
)
from replication.core import (
    BrokerStatus,
    FollowerFetchRequest,
    FollowerFetchResponse,
    ReplicationConfig,
)
from storage.config import LogConfig
from storage.errors import ErrorCode, OffsetOutOfRangeError
from tests.replication.harness import TP, batch

BROKERS = {1: BrokerStatus(broker_epoch=10), 2: BrokerStatus(broker_epoch=20)}
RETAINED = LogConfig(segment_bytes=400, retention_bytes=800)
"""Four 5-record batches a segment; keep about two segments."""
PID = 7


# --- config --------------------------------------------------------------------------------------


def test_topic_configs_override_cluster_defaults_which_override_broker_properties() -> None:
    broker = BrokerNodeConfig.from_properties(
        {
            "node.id": "101",
            "controller.quorum.voters": "1@127.0.0.1:9091",
            "listeners": "PLAINTEXT://127.0.0.1:9192",
            "log.dirs": "/tmp/b101",
            "log.retention.check.interval.ms": "200",
            "log.retention.bytes": "1000",
            "log.segment.bytes": "2000",
            "log.retention.ms": "60000",
        }
    )
    assert broker.log_retention_check_interval_ms == 200
    assert BrokerNodeConfig.from_properties(broker.to_properties()) == broker
    config = resolve_log_config(
        broker.log_defaults,
        topic_keys_of_dynamic_broker_defaults({"log.retention.ms": "5000", "num.io.threads": "8"}),
        {"retention.bytes": "3000", "min.insync.replicas": "2", "cleanup.policy": "delete"},
    )
    assert (config.retention_bytes, config.segment_bytes, config.retention_ms) == (
        3000,
        2000,
        5000,
    )


def test_a_log_config_value_the_log_rejects_is_skipped_not_the_whole_config() -> None:
    # The controller now rejects it, but metadata written before that check may hold one.
    config = resolve_log_config({"segment.bytes": "20", "retention.bytes": "4096"})
    assert config.segment_bytes == LogConfig().segment_bytes
    assert config.retention_bytes == 4096


# --- two replicas --------------------------------------------------------------------------------


class Pair:
    """A leader (1) and a follower (2), fetches wired straight through; ``paused`` stalls
    the follower (its fetches wait)."""

    def __init__(self, tmp_path: Path, config: LogConfig = RETAINED) -> None:
        self.paused = asyncio.Event()
        self.paused.set()
        self._ticker: asyncio.Future[None] | None = None
        self.replicas = {
            1: self._replica(tmp_path / "one", 1, config),
            2: self._replica(tmp_path / "two", 2, config),
        }

    def _replica(self, directory: Path, local_id: int, config: LogConfig) -> PartitionReplica:
        return PartitionReplica(
            topic_partition=TP,
            topic_id="tid",
            directory=directory,
            log_config=config,
            local_id=local_id,
            broker_epoch=BROKERS[local_id].broker_epoch,
            fetch_from_leader=self._fetch,
            send_alter_partition=lambda _replica, _send: None,
        )

    async def _fetch(self, request: FollowerFetchRequest) -> FollowerFetchResponse:
        await self.paused.wait()
        await asyncio.sleep(0.001)
        answer, records = self.replicas[request.leader_id].handle_follower_fetch(
            request.as_follower_fetch(),
            1 << 20,
        )
        return follower_response(
            request,
            error_code=answer.error_code,
            high_watermark=answer.high_watermark,
            log_start_offset=answer.log_start_offset,
            diverging_epoch=answer.diverging_epoch,
            records=records,
        )

    async def _tick_loop(self) -> None:
        while True:  # the broker's tick loop
            await asyncio.sleep(0.005)
            for replica in self.replicas.values():
                replica.tick()

    def apply(self, leader: int, leader_epoch: int) -> None:
        if self._ticker is None:
            self._ticker = asyncio.ensure_future(self._tick_loop())
        registration = PartitionRegistration(
            replicas=(1, 2), isr=(1, 2), leader=leader, leader_epoch=leader_epoch
        )
        for replica in self.replicas.values():
            replica.apply_registration(registration, BROKERS, ReplicationConfig())

    async def produce(self, leader: int, first_seq: int, batches: int) -> None:
        for i in range(batches):
            records = batch(
                b"v", producer_id=PID, producer_epoch=0, base_sequence=first_seq + 5 * i, count=5
            )
            done = await self.replicas[leader].produce(1, 5_000, records)
            assert done.error_code is ErrorCode.NONE, done
            await asyncio.sleep(0.001)

    def close(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
        self.paused.set()
        for replica in self.replicas.values():
            replica.stop()


async def _wait_for(predicate: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition never held"
        await asyncio.sleep(0.005)


def test_retention_deletes_old_segments_and_the_follower_adopts_the_log_start(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        pair = Pair(tmp_path)
        leader, follower = pair.replicas[1], pair.replicas[2]
        pair.apply(leader=1, leader_epoch=1)
        try:
            await pair.produce(1, 0, 24)
            end = leader.log.log_end_offset
            await _wait_for(lambda: leader.high_watermark == end == follower.high_watermark)
            assert await retention_pass([leader], now_ms=0) > 0
            start = leader.log.log_start_offset
            assert 0 < start <= leader.high_watermark
            assert leader.log.size_bytes >= RETAINED.retention_bytes
            with_offset_out_of_range = False
            try:
                leader.log.read(0, 1 << 20)
            except OffsetOutOfRangeError as e:
                with_offset_out_of_range = e.log_start_offset == start
            assert with_offset_out_of_range
            # The follower learns the new start from its next fetch response.
            await _wait_for(lambda: follower.log.log_start_offset == start)
            for replica in (leader, follower):
                assert all(o >= start for o in replica.producer_snapshot_offsets)
                assert replica.producer_snapshot_offsets, "the newer snapshots stay"
        finally:
            pair.close()

    asyncio.run(run())


def test_retention_never_deletes_a_segment_at_or_above_the_high_watermark(tmp_path: Path) -> None:
    """Kafka: the log start offset must not pass the high watermark, so records no consumer
    may read yet are never deleted by retention."""

    async def run() -> None:
        pair = Pair(tmp_path, LogConfig(segment_bytes=400, retention_bytes=0))
        leader, follower = pair.replicas[1], pair.replicas[2]
        pair.apply(leader=1, leader_epoch=1)
        try:
            await pair.produce(1, 0, 4)
            await _wait_for(lambda: leader.high_watermark == 20)
            pair.paused.clear()
            await asyncio.sleep(0.05)  # let a fetch in flight land before the check below
            high_watermark = leader.high_watermark
            await pair.produce(1, 20, 16)  # acks=1: appended, not replicated
            assert leader.high_watermark == high_watermark < leader.log.log_end_offset
            await retention_pass([leader, follower], now_ms=0)
            # Only the segments wholly below the high watermark went.
            first = leader.log.segments[0]
            assert 0 < leader.log.log_start_offset == first.base_offset <= high_watermark
            assert high_watermark < first.next_offset
            pair.paused.set()
            await _wait_for(lambda: leader.high_watermark == leader.log.log_end_offset)
            await retention_pass([leader], now_ms=0)
            assert leader.log.log_start_offset == leader.log.segments[0].base_offset > 0
            assert len(leader.log.segments) == 1
        finally:
            pair.close()

    asyncio.run(run())


def test_a_truncated_replica_drops_its_snapshots_above_the_point_and_reloads_its_state(
    tmp_path: Path,
) -> None:
    """KIP-101: the old leader's unreplicated tail is cut when it follows the new leader; its
    producer snapshots above the cut go with it, and its producer state equals the new
    leader's (reloaded from a snapshot at or below the cut)."""

    async def run() -> None:
        pair = Pair(tmp_path, LogConfig(segment_bytes=400))
        old, new = pair.replicas[1], pair.replicas[2]
        pair.apply(leader=1, leader_epoch=1)
        try:
            await pair.produce(1, 0, 12)
            await _wait_for(lambda: new.log.log_end_offset == old.log.log_end_offset == 60)
            pair.paused.clear()
            await asyncio.sleep(0.05)
            await pair.produce(1, 60, 12)  # only the old leader has these (acks=1)
            assert max(old.producer_snapshot_offsets) > 60
            assert new.log.log_end_offset == 60
            pair.apply(leader=2, leader_epoch=2)
            pair.paused.set()
            await pair.produce(2, 60, 2)  # the new leader's own epoch-2 batches
            await _wait_for(lambda: old.log.log_end_offset == new.log.log_end_offset == 70)
            assert old.log.read(0, 1 << 20) == new.log.read(0, 1 << 20)
            assert all(o <= 70 for o in old.producer_snapshot_offsets)
            assert old.producer_state.entries == new.producer_state.entries
        finally:
            pair.close()

    asyncio.run(run())


def _keyed(first_seq: int, count: int = 5) -> bytes:
    from storage.records import SimpleRecord, build_batch

    return build_batch(
        [SimpleRecord(key=b"k%d" % ((first_seq + i) % 4), value=b"v") for i in range(count)],
        timestamp_ms=0,
        producer_id=PID,
        producer_epoch=0,
        base_sequence=first_seq,
    )


def _records(replica: PartitionReplica) -> list[tuple[int, bytes | None]]:
    from storage.records import iter_batches, record_tuples

    out, offset = [], replica.log.log_start_offset
    while offset < replica.log.log_end_offset:
        data = replica.log.read(offset, 1 << 20)
        for pos, header in iter_batches(data):
            out += [(o, k) for o, _, k, _, _ in record_tuples(data, pos)]
            offset = header.next_offset
    return out


def test_compaction_runs_below_the_high_watermark_and_a_new_follower_copies_the_result(
    tmp_path: Path,
) -> None:
    """Each replica cleans its own log (as in Kafka); the cleaned leader log keeps every batch's
    offsets, so a follower fetching it from scratch appends it contiguously."""
    from replication.broker.replicas.retention import apply_compaction

    async def run() -> None:
        config = LogConfig.from_properties(
            {"cleanup.policy": "compact", "segment.bytes": "400", "min.cleanable.dirty.ratio": "0"}
        )
        pair = Pair(tmp_path, config)
        leader = pair.replicas[1]
        pair.apply(leader=1, leader_epoch=1)
        try:
            for i in range(12):
                done = await leader.produce(1, 5_000, _keyed(5 * i))
                assert done.error_code is ErrorCode.NONE, done
            await _wait_for(lambda: pair.replicas[2].high_watermark == 60)
            assert apply_compaction(pair.replicas.values(), now_ms=0) > 0
            compacted = _records(leader)
            assert len(compacted) < 60 and leader.log.log_end_offset == 60
            assert _records(pair.replicas[2]) == compacted
            pair.replicas[2].stop()  # a replacement follower starts empty
            pair.replicas[2] = pair._replica(tmp_path / "three", 2, config)
            pair.apply(leader=1, leader_epoch=1)
            await _wait_for(lambda: pair.replicas[2].log.log_end_offset == 60)
            assert _records(pair.replicas[2]) == compacted
            done = await leader.produce(1, 5_000, _keyed(60))  # the producer goes on
            assert done.error_code is ErrorCode.NONE, done
        finally:
            pair.close()

    asyncio.run(run())
