"""`GroupRuntime`, the shell around the group coordinators, driven without gRPC or processes:
a fake replica (a list of batches, a high watermark, a produce that commits when told) and a
fake coordinator (latest-wins records into a dict). What the runtime decides: when a shard
loads and is served, that a write answers only once its records commit, what an append
failure answers, when shards are dropped and reloaded, when timers run, and snapshots."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kraft.types import OFFSETS_TOPIC, TopicPartition
from replication.broker.coordinators.group_runtime import GroupRuntime, Record
from storage.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    ErrorCode,
    NotCoordinatorError,
)
from storage.records import (
    SimpleRecord,
    build_batch,
    read_header,
    set_base_offset,
)

NOW_MS = 1_000_000
TP = TopicPartition(OFFSETS_TOPIC, 0)


# -- fakes ---------------------------------------------------------------------------------------


class FakeLog:
    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.log_start_offset = 0
        self.log_end_offset = 0

    def advance_log_start_offset(self, offset: int) -> bool:
        if offset <= self.log_start_offset:
            return False
        self.log_start_offset = offset
        self.batches = [b for b in self.batches if read_header(b).next_offset > offset]
        return True


class FakeDriver:
    def __init__(self) -> None:
        self.is_leader = True
        self.generation = 1
        self.start_moves = 0

    def storage_guard(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def log_start_offset_moved(self) -> None:
        self.start_moves += 1


@dataclass
class Produced:
    error_code: ErrorCode
    error_message: str = ""
    base_offset: int = -1


class FakeReplica:
    """The parts of `PartitionReplica` the runtime uses. ``auto_commit``: an append commits at
    once (the followers caught up); otherwise it waits in `produce` until `commit`."""

    def __init__(self) -> None:
        self.log = FakeLog()
        self.driver = FakeDriver()
        self.offline: str | None = None
        self.high_watermark = 0
        self.changed = asyncio.Event()
        self.auto_commit = True
        self.produce_error = ErrorCode.NONE
        self._committed = asyncio.Event()

    def append(self, records: Iterable[Record], *, commit: bool = True) -> int:
        batch = build_batch([SimpleRecord(key=k, value=v) for k, v in records], timestamp_ms=0)
        return self._append_batch(batch, commit=commit)

    def _append_batch(self, data: bytes, *, commit: bool) -> int:
        batch = bytearray(data)
        base = self.log.log_end_offset
        set_base_offset(batch, base)
        self.log.batches.append(bytes(batch))
        self.log.log_end_offset = read_header(batch).next_offset
        if commit:
            self.commit()
        else:
            self._signal()
        return base

    def commit(self) -> None:
        self.high_watermark = self.log.log_end_offset
        self._committed.set()
        self._signal()

    def _signal(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    def read(self, offset: int, max_bytes: int, *, max_offset: int) -> bytes:
        out = b""
        for batch in self.log.batches:
            header = read_header(batch)
            if header.next_offset > offset and header.base_offset < max_offset:
                out += batch
        return out

    async def produce(self, acks: int, timeout_ms: int, batch: bytes) -> Produced:
        assert acks == -1  # the coordinator always writes with acks=all
        if self.produce_error is not ErrorCode.NONE:
            return Produced(self.produce_error, "injected")
        self._committed.clear()
        base = self._append_batch(batch, commit=self.auto_commit)
        await self._committed.wait()
        return Produced(ErrorCode.NONE, base_offset=base)


@dataclass
class Result:
    records: list[Record]
    response: Any


@dataclass
class KvCoordinator:
    """Latest-wins records into a dict, like the group coordinator's replay."""

    state: dict[bytes, bytes] = field(default_factory=dict)
    replayed: list[bytes] = field(default_factory=list)
    deadline_ms: int | None = None
    ticks: list[int] = field(default_factory=list)
    tick_records: list[Record] = field(default_factory=list)
    fail_tick: bool = False

    def replay(self, key: bytes, value: bytes | None) -> None:
        self.replayed.append(key)
        if value is None:
            self.state.pop(key, None)
        else:
            self.state[key] = value

    def tick(self, now_ms: int, topics: Any) -> list[Record]:
        if self.fail_tick:
            raise RuntimeError("a coordinator bug")
        self.ticks.append(now_ms)
        self.deadline_ms = None
        records, self.tick_records = self.tick_records, []
        return records

    def next_deadline_ms(self) -> int | None:
        return self.deadline_ms

    def snapshot_records(self) -> list[Record]:
        return sorted(self.state.items())


class Harness:
    def __init__(self, *, snapshot_interval_records: int = 1_000) -> None:
        self.replica = FakeReplica()
        self.replicas: dict[TopicPartition, Any] = {TP: self.replica}
        self.coordinators: list[KvCoordinator] = []
        self.topics: dict[str, Any] = {"orders": 3}
        self.now_ms = NOW_MS
        self.runtime = GroupRuntime(
            replicas=lambda: self.replicas,
            new_coordinator=self._new,
            topics=lambda: dict(self.topics),
            snapshot_interval_records=snapshot_interval_records,
            node_id=1,
            clock_ms=lambda: self.now_ms,
        )

    def _new(self) -> KvCoordinator:
        self.coordinators.append(KvCoordinator())
        return self.coordinators[-1]

    @property
    def coordinator(self) -> KvCoordinator:
        return self.coordinators[-1]

    async def loaded(self) -> KvCoordinator:
        """Poll until partition 0's shard is loaded (the load is a task of its own)."""
        for _ in range(200):
            await self.runtime.poll(self.now_ms)
            loaded = self.runtime.loaded_coordinators()
            if not self.runtime.loading_partitions() and loaded:
                coordinator: KvCoordinator = loaded[0]  # type: ignore[assignment]
                return coordinator
            await asyncio.sleep(0)
        raise AssertionError("the shard never loaded")

    async def write(self, *records: Record, response: str = "ok") -> str:
        def run(coordinator: Any, now_ms: int) -> Result:
            return Result(list(records), response)

        answer: str = await self.runtime.write(0, run)
        return answer


def run(test: Callable[[Harness], Awaitable[None]], **kwargs: Any) -> None:
    async def main() -> None:
        harness = Harness(**kwargs)
        try:
            await test(harness)
        finally:
            harness.runtime.close()

    asyncio.run(main())


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


# -- tests ---------------------------------------------------------------------------------------


def test_a_group_of_a_partition_not_led_here_gets_not_coordinator() -> None:
    async def test(h: Harness) -> None:
        h.replica.driver.is_leader = False
        await h.runtime.poll(NOW_MS)
        with pytest.raises(NotCoordinatorError):
            h.runtime.shard(0)
        assert h.runtime.loading_partitions() == []

    run(test)


def test_a_shard_loads_only_up_to_a_high_watermark_that_reached_the_log_end() -> None:
    """A new leader's tail above the high watermark may still be truncated: the shard answers
    COORDINATOR_LOAD_IN_PROGRESS until its followers caught up and the whole log commits."""

    async def test(h: Harness) -> None:
        h.replica.append([(b"a", b"1")])
        h.replica.append([(b"b", b"2")], commit=False)
        await h.runtime.poll(NOW_MS)
        await settle()
        assert h.runtime.loading_partitions() == [0]
        with pytest.raises(CoordinatorLoadInProgressError):
            h.runtime.shard(0)
        assert h.coordinator.replayed == [b"a"]  # the committed part only
        h.replica.commit()
        coordinator = await h.loaded()
        assert coordinator.state == {b"a": b"1", b"b": b"2"}
        assert h.runtime.shard(0).coordinator is coordinator

    run(test)


def test_a_write_answers_only_after_its_records_commit_and_then_replays_them() -> None:
    async def test(h: Harness) -> None:
        coordinator = await h.loaded()
        h.replica.auto_commit = False
        write = asyncio.create_task(h.write((b"k", b"v")))
        await settle()
        assert not write.done()
        assert h.replica.log.log_end_offset == 1  # appended ...
        assert coordinator.state == {}  # ... but not applied before it commits
        h.replica.commit()
        assert await write == "ok"
        assert coordinator.state == {b"k": b"v"}

    run(test)


def test_writes_to_one_shard_run_one_at_a_time_each_seeing_the_earlier_ones() -> None:
    async def test(h: Harness) -> None:
        await h.loaded()
        h.replica.auto_commit = False
        seen: list[dict[bytes, bytes]] = []

        def writer(key: bytes) -> Callable[[Any, int], Result]:
            def run(coordinator: Any, now_ms: int) -> Result:
                seen.append(dict(coordinator.state))
                return Result([(key, b"x")], key.decode())

            return run

        first = asyncio.create_task(h.runtime.write(0, writer(b"first")))
        second = asyncio.create_task(h.runtime.write(0, writer(b"second")))
        await settle()
        assert len(seen) == 1  # the second waits for the first's commit
        h.replica.commit()
        assert await first == "first"
        await settle()
        h.replica.commit()
        assert await second == "second"
        assert seen == [{}, {b"first": b"x"}]

    run(test)


@pytest.mark.parametrize(
    ("produce_error", "raised"),
    [
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, NotCoordinatorError),
        (ErrorCode.KAFKA_STORAGE_ERROR, NotCoordinatorError),
        (ErrorCode.NOT_ENOUGH_REPLICAS, CoordinatorNotAvailableError),
        (ErrorCode.REQUEST_TIMED_OUT, CoordinatorNotAvailableError),
    ],
)
def test_a_failed_append_answers_a_coordinator_error_and_the_shard_reloads_from_the_log(
    produce_error: ErrorCode, raised: type[Exception]
) -> None:
    """An append that failed may still commit later: the runtime drops the shard and the next
    poll replays exactly what the log holds."""

    async def test(h: Harness) -> None:
        first = await h.loaded()
        await h.write((b"kept", b"1"))
        h.replica.produce_error = produce_error
        with pytest.raises(raised):
            await h.write((b"lost", b"2"))
        with pytest.raises(NotCoordinatorError):
            h.runtime.shard(0)
        h.replica.produce_error = ErrorCode.NONE
        second = await h.loaded()
        assert second is not first
        assert second.state == {b"kept": b"1"}

    run(test)


def test_losing_leadership_drops_the_shard_and_a_new_leader_generation_reloads_it() -> None:
    async def test(h: Harness) -> None:
        first = await h.loaded()
        await h.write((b"k", b"1"))
        h.replica.driver.is_leader = False
        await h.runtime.poll(NOW_MS)
        with pytest.raises(NotCoordinatorError):
            h.runtime.shard(0)
        assert h.runtime.loaded_coordinators() == []
        h.replica.driver.is_leader = True
        h.replica.driver.generation += 1  # led again, in a new leader epoch
        second = await h.loaded()
        assert second is not first and second.state == {b"k": b"1"}
        h.replica.driver.generation += 1  # a new leader epoch, still here: reload too
        third = await h.loaded()
        assert third is not second and third.state == {b"k": b"1"}

    run(test)


def test_an_offline_replica_is_not_coordinated() -> None:
    async def test(h: Harness) -> None:
        await h.loaded()
        h.replica.offline = "log dir failed"
        await h.runtime.poll(NOW_MS)
        with pytest.raises(NotCoordinatorError):
            h.runtime.shard(0)

    run(test)


def test_timers_run_after_a_load_at_their_deadline_and_when_topics_change() -> None:
    async def test(h: Harness) -> None:
        coordinator = await h.loaded()
        await h.runtime.poll(NOW_MS)
        assert coordinator.ticks == [NOW_MS]  # once after the load: sessions start afresh
        coordinator.deadline_ms = NOW_MS + 500
        await h.runtime.poll(NOW_MS + 499)
        assert coordinator.ticks == [NOW_MS]  # not yet
        coordinator.tick_records = [(b"expired", b"member")]
        await h.runtime.poll(NOW_MS + 500)
        assert coordinator.ticks == [NOW_MS, NOW_MS + 500]
        assert coordinator.state == {b"expired": b"member"}  # a timer's records are written
        assert h.replica.high_watermark == h.replica.log.log_end_offset == 1
        await h.runtime.poll(NOW_MS + 600)
        assert len(coordinator.ticks) == 2
        h.topics["orders"] = 6  # a topic grew: the assignors must see it
        await h.runtime.poll(NOW_MS + 700)
        assert coordinator.ticks[-1] == NOW_MS + 700

    run(test)


def test_a_coordinator_that_fails_in_a_timer_is_dropped_and_reloaded_without_stopping() -> None:
    async def test(h: Harness) -> None:
        first = await h.loaded()
        first.fail_tick = True
        first.deadline_ms = NOW_MS
        await h.runtime.poll(NOW_MS)  # logs group_coordinator_failed, drops the shard
        with pytest.raises(NotCoordinatorError):
            h.runtime.shard(0)
        second = await h.loaded()
        assert second is not first

    run(test)


def test_a_snapshot_after_the_interval_moves_the_log_start_and_a_reload_sees_the_same_state() -> (
    None
):
    async def test(h: Harness) -> None:
        coordinator = await h.loaded()
        for i in range(5):
            await h.write((b"k%d" % (i % 2), b"%d" % i))
        # 5 records written, the interval is 4: the 4th write appended the 2 live keys as a
        # snapshot and moved the log start offset to it.
        assert h.replica.log.log_start_offset == 4
        assert h.replica.driver.start_moves == 1
        assert coordinator.state == {b"k0": b"4", b"k1": b"3"}
        h.replica.driver.generation += 1  # a new leader replays from the new log start
        reloaded = await h.loaded()
        assert reloaded is not coordinator
        assert reloaded.state == coordinator.state
        assert len(reloaded.replayed) == h.replica.log.log_end_offset - 4

    run(test, snapshot_interval_records=4)


def test_loading_partitions_lists_the_shards_still_replaying() -> None:
    async def test(h: Harness) -> None:
        h.replica.append([(b"a", b"1")], commit=False)
        await h.runtime.poll(NOW_MS)
        await settle()
        assert h.runtime.loading_partitions() == [0]
        assert h.runtime.loaded_coordinators() == []
        h.replica.commit()
        await h.loaded()
        assert h.runtime.loading_partitions() == []

    run(test)


# -- ListGroups while a partition loads (GroupService over the runtime, GroupAdmin) -------------


def _group_records() -> list[Record]:
    """The records of a group ``g`` with one member, as a coordinator wrote them."""
    from tests.group.helpers import Shell

    shell = Shell(orders=3)
    shell.hb("m1", 0, subscribe=["orders"])
    return list(shell.log)


def _service(h: Harness, tmp_path: Path) -> Any:
    from replication.broker.config import BrokerNodeConfig
    from replication.broker.coordinators.group_service import GroupService

    config = BrokerNodeConfig.from_properties(
        {
            "node.id": "101",
            "controller.quorum.voters": "1@127.0.0.1:1",
            "log.dirs": str(tmp_path),
            "listeners": "PLAINTEXT://127.0.0.1:1",
        }
    )
    server = SimpleNamespace(config=config, replicas=h.replicas, node_id=101, image=None)
    service = GroupService(server)  # type: ignore[arg-type]
    service.runtime = h.runtime
    return service


def test_list_groups_answers_load_in_progress_while_an_offsets_partition_loads(
    tmp_path: Path,
) -> None:
    """Kafka's GroupCoordinatorService fails the whole ListGroups with
    COORDINATOR_LOAD_IN_PROGRESS while a shard loads (its groups are not known yet); an
    answer without them would make ``kraft groups list`` miss groups right after a failover."""

    async def test(h: Harness) -> None:
        from replication.broker.coordinators.group_shard import GroupShard
        from replication.group import GroupConfig
        from replication.group.classic import ClassicGroupConfig
        from replication.messages import ListGroupsRequest
        from tests.group.helpers import topics

        h.runtime._new_coordinator = lambda: GroupShard(GroupConfig(), ClassicGroupConfig())
        h.topics = topics(orders=3)
        service = _service(h, tmp_path)
        h.replica.append(_group_records(), commit=False)  # a new leader, followers behind
        await h.runtime.poll(NOW_MS)
        await settle()
        loading = await service.list_groups(ListGroupsRequest())
        assert loading.error_code is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert loading.groups == ()
        h.replica.commit()
        for _ in range(200):
            if not h.runtime.loading_partitions():
                break
            await asyncio.sleep(0)
        listed = await service.list_groups(ListGroupsRequest())
        assert listed.error_code is ErrorCode.NONE
        assert [(g.group_id, g.group_state) for g in listed.groups] == [("g", "Stable")]

    run(test)


class ScriptedNetwork:
    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.calls = 0

    def call(self, address: str, method: str, request: Any, response_type: Any) -> Any:
        assert method == "ListGroups"
        self.calls += 1
        return self.answers.pop(0)


def _admin(network: ScriptedNetwork, timeout: float) -> Any:
    from replication.clients.group_admin import GroupAdmin

    broker = SimpleNamespace(
        broker_id=101, fenced=False, listeners=[SimpleNamespace(address="127.0.0.1:1")]
    )
    return GroupAdmin(network, timeout, lambda: [broker])  # type: ignore[arg-type, list-item]


def test_the_admin_asks_a_loading_broker_again_until_it_lists_its_groups() -> None:
    from replication.messages import ListedGroup, ListGroupsResponse

    loading = ListGroupsResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    done = ListGroupsResponse(groups=(ListedGroup(group_id="g", group_state="Stable"),))
    network = ScriptedNetwork([loading, loading, done])
    listed = _admin(network, timeout=10).list_groups()
    assert [(g.group_id, g.state, g.coordinator) for g in listed] == [("g", "Stable", 101)]
    assert network.calls == 3


def test_the_admin_gives_up_on_a_broker_still_loading_after_its_timeout() -> None:
    from replication.messages import ListGroupsResponse

    loading = ListGroupsResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    network = ScriptedNetwork([loading] * 100)
    with pytest.raises(CoordinatorLoadInProgressError):
        _admin(network, timeout=0.2).list_groups()


def test_the_coordinator_broker_reports_each_groups_committed_offset_and_lag(
    tmp_path: Path,
) -> None:
    async def test(h: Harness) -> None:
        from kraft.metrics.kafka import GROUP_LAG, GROUP_OFFSET
        from replication.broker.coordinators.group_shard import GroupShard
        from replication.group import GroupConfig
        from replication.group.classic import ClassicGroupConfig
        from tests.group.helpers import Shell, topics

        h.runtime._new_coordinator = lambda: GroupShard(GroupConfig(), ClassicGroupConfig())
        h.topics = topics(orders=3)
        service = _service(h, tmp_path)
        shell = Shell(orders=3)
        joined = shell.hb("m1", 0, subscribe=["orders"])
        shell.offset_commit("m1", joined.member_epoch, {("orders", 0): 4, ("orders", 2): 9})
        h.replica.append(shell.log)
        assert service.lag.metric_values() == {GROUP_OFFSET: {}, GROUP_LAG: {}}  # not loaded yet
        await h.loaded()
        orders_0 = FakeReplica()
        orders_0.high_watermark = 10
        h.replicas[TopicPartition("orders", 0)] = orders_0  # no replica of orders-2 here
        values = service.lag.metric_values()
        assert values[GROUP_OFFSET] == {("g", "orders", "0"): 4, ("g", "orders", "2"): 9}
        assert values[GROUP_LAG] == {("g", "orders", "0"): 6}

    run(test)
