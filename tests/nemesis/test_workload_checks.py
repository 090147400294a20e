"""The metadata and consumer-group checkers of the nemesis catch each anomaly they are given
and pass clean histories; the delay and bandwidth faults are drawn and applied."""

from __future__ import annotations

import io
from typing import Any

from replication.nemesis.faults import (
    DELAYS_MS,
    RATES_BYTES_PER_S,
    parse_fault_kinds,
    plan_faults,
)
from replication.nemesis.groups import (
    GroupAssign,
    GroupCommit,
    GroupFinal,
    GroupLeave,
    GroupRevoke,
    check_groups,
)
from replication.nemesis.history import Ack, History, Poll, from_json
from replication.nemesis.metadata import MetaDone, MetaFinal, MetaOp, check_metadata

T = "nemesis"

# --- metadata ------------------------------------------------------------------------------------


def _meta(op: str, topic: str, ok: bool | None, value: str = "") -> list[Any]:
    """The invocation, and its outcome unless ``ok`` is None (still in flight at the end)."""
    ops: list[Any] = [MetaOp(time_ms=0, process="m0", op=op, topic=topic, value=value)]
    if ok is not None:
        ops.append(MetaDone(time_ms=1, process="m0", op=op, topic=topic, ok=ok, value=value))
    return ops


def _meta_final(*topics: str, **configs: str) -> MetaFinal:
    return MetaFinal(time_ms=9, topics=(T, *topics), configs=configs)


def test_a_clean_metadata_history_is_valid() -> None:
    ops = [
        *_meta("create", "meta-a", True),
        *_meta("create", "meta-b", True),
        *_meta("config", "meta-a", True, "1000"),
        *_meta("delete", "meta-b", True),
        *_meta("create", "meta-c", False),  # indeterminate: it may exist or not
        _meta_final("meta-a", **{"meta-a": "1000"}),
    ]
    report = check_metadata(ops)
    assert report.valid, report.as_dict()
    assert (report.ops, report.acknowledged, report.indeterminate) == (5, 4, 1)


def test_an_acknowledged_create_missing_at_the_end_is_lost() -> None:
    report = check_metadata([*_meta("create", "meta-a", True), _meta_final()])
    assert len(report.lost_creates) == 1 and not report.valid


def test_a_topic_whose_delete_was_attempted_may_be_gone() -> None:
    ops = [*_meta("create", "meta-a", True), *_meta("delete", "meta-a", False), _meta_final()]
    assert check_metadata(ops).valid


def test_an_acknowledged_delete_of_a_topic_still_there_is_a_resurrection() -> None:
    ops = [*_meta("create", "meta-a", True), *_meta("delete", "meta-a", True)]
    report = check_metadata([*ops, _meta_final("meta-a")])
    assert len(report.resurrected) == 1 and not report.valid


def test_a_config_change_acknowledged_then_lost_is_reported() -> None:
    ops = [*_meta("create", "meta-a", True), *_meta("config", "meta-a", True, "1000")]
    report = check_metadata([*ops, _meta_final("meta-a", **{"meta-a": "604800000"})])
    assert len(report.lost_configs) == 1 and not report.valid


def test_a_later_unacknowledged_config_change_may_have_won() -> None:
    ops = [
        *_meta("create", "meta-a", True),
        *_meta("config", "meta-a", True, "1000"),
        *_meta("config", "meta-a", False, "2000"),
    ]
    assert check_metadata([*ops, _meta_final("meta-a", **{"meta-a": "2000"})]).valid
    assert check_metadata([*ops, _meta_final("meta-a", **{"meta-a": "1000"})]).valid
    earlier = [*_meta("config", "meta-a", False, "500"), *ops]  # before the acknowledged one
    assert not check_metadata([*earlier, _meta_final("meta-a", **{"meta-a": "500"})]).valid


def test_a_workload_topic_nobody_created_is_a_phantom() -> None:
    report = check_metadata([*_meta("create", "meta-a", True), _meta_final("meta-a", "meta-x")])
    assert report.phantom_creates == ["meta-x: exists, never created"]


# --- consumer groups -----------------------------------------------------------------------------


def _assign(process: str, member: int, *partitions: int) -> GroupAssign:
    return GroupAssign(time_ms=0, process=process, member=member, topic=T, partitions=partitions)


def _revoke(process: str, member: int, *partitions: int, lost: bool = False) -> GroupRevoke:
    return GroupRevoke(
        time_ms=0, process=process, member=member, topic=T, partitions=partitions, lost=lost
    )


def _commit(process: str, partition: int, offset: int, ok: bool = True) -> GroupCommit:
    return GroupCommit(
        time_ms=0, process=process, member=1, topic=T, partition=partition, offset=offset, ok=ok
    )


def _acked(partition: int, offset: int) -> Ack:
    value = f"p0-{partition}-{offset}"
    return Ack(time_ms=0, process="p0", topic=T, partition=partition, value=value, offset=offset)


def _polled(process: str, partition: int, offset: int) -> Poll:
    value = f"p0-{partition}-{offset}"
    return Poll(
        time_ms=0, process=process, topic=T, partition=partition, offset=offset, value=value
    )


def test_a_clean_group_history_is_valid() -> None:
    ops: list[Any] = [
        _acked(0, 0),
        _acked(0, 1),
        _assign("g0", 1, 0, 1),
        _polled("g0", 0, 0),
        _commit("g0", 0, 1),
        _revoke("g0", 1, 1),
        _assign("g1", 1, 1),  # after g0 gave it up
        _polled("g0", 0, 1),
        _commit("g0", 0, 2),
        GroupLeave(time_ms=0, process="g0", member=1, clean=True),
        _assign("g1", 1, 0),
        GroupFinal(time_ms=9, topic=T, offsets={0: 2}),
    ]
    report = check_groups(ops, T)
    assert report.valid, report.as_dict()
    assert (report.assignments, report.commits_acknowledged, report.checked_records) == (3, 2, 2)


def test_a_partition_assigned_to_a_second_member_before_the_first_revoked_it() -> None:
    ops = [_assign("g0", 1, 0), _assign("g1", 1, 0), _revoke("g0", 1, 0)]
    report = check_groups(ops, T)
    assert len(report.double_owners) == 1 and not report.valid


def test_a_member_that_lost_its_partitions_was_a_zombie_not_a_double_owner() -> None:
    """on_lost: the coordinator fenced the member (its session expired) and moved its
    partitions on before it knew; Kafka allows that and forbids only the zombie's commits."""
    ops = [_assign("g0", 1, 0), _assign("g1", 1, 0), _revoke("g0", 1, 0, lost=True)]
    report = check_groups(ops, T)
    assert report.valid and len(report.zombie_overlaps) == 1


def test_a_member_that_left_uncleanly_was_a_zombie_too() -> None:
    ops = [
        _assign("g0", 1, 0),
        _assign("g1", 1, 0),
        GroupLeave(time_ms=0, process="g0", member=1, clean=False),
    ]
    assert check_groups(ops, T).valid


def test_the_same_slot_rejoining_is_a_new_member() -> None:
    ops = [_assign("g0", 1, 0), _assign("g0", 2, 0)]  # g0#1 never revoked: still its
    assert len(check_groups(ops, T).double_owners) == 1


def test_an_acknowledged_commit_below_an_earlier_one_is_a_regression() -> None:
    ops = [_commit("g0", 0, 10), _commit("g1", 0, 7, ok=False), _commit("g1", 0, 8)]
    report = check_groups(ops, T)
    assert report.commits_failed == 1 and len(report.commit_regressions) == 1


def test_a_final_committed_offset_below_an_acknowledged_commit_is_a_regression() -> None:
    ops = [_commit("g0", 0, 10), GroupFinal(time_ms=9, topic=T, offsets={0: 4})]
    assert len(check_groups(ops, T).commit_regressions) == 1


def test_a_committed_record_no_member_polled_was_never_processed() -> None:
    ops = [
        _acked(0, 0),
        _acked(0, 1),
        _acked(0, 2),
        _polled("g0", 0, 0),
        _polled("r0", 0, 1),  # an assign-mode reader's poll is not the group's processing
        GroupFinal(time_ms=9, topic=T, offsets={0: 2}),
    ]
    report = check_groups(ops, T)
    assert report.unprocessed == [
        "nemesis-0@1 ('p0-0-1') below the committed 2, never polled by a member"
    ]
    assert report.checked_records == 2  # offset 2 is at the committed offset: not judged


def test_metadata_and_group_operations_round_trip_through_json_lines() -> None:
    ops: list[Any] = [
        *_meta("config", "meta-a", True, "1000"),
        _meta_final("meta-a", **{"meta-a": "1000"}),
        _assign("g0", 1, 0, 3),
        _revoke("g0", 1, 3, lost=True),
        _commit("g0", 0, 5),
        GroupLeave(time_ms=0, process="g0", member=1, clean=False),
        GroupFinal(time_ms=9, topic=T, offsets={0: 5}),
    ]
    out = io.StringIO()
    history = History(out)
    for op in ops:
        history.record(op)
    assert [from_json(line) for line in out.getvalue().splitlines()] == ops


# --- delay and bandwidth faults ------------------------------------------------------------------


def test_delay_and_bandwidth_faults_are_drawn_with_their_amounts() -> None:
    kinds = parse_fault_kinds("delay,bandwidth")
    schedule = plan_faults(7, 300, kinds, controllers=[1, 2, 3], brokers=[101, 102, 103])
    delays = [f for f in schedule if f.kind == "delay"]
    throttles = [f for f in schedule if f.kind == "bandwidth"]
    assert delays and throttles
    assert all(f.delay_ms in DELAYS_MS and f.rate_bytes_per_s is None for f in delays)
    assert all(f.rate_bytes_per_s in RATES_BYTES_PER_S and not f.delay_ms for f in throttles)
    assert all(f.targets[0] in (101, 102, 103, "leader") for f in throttles)
    assert delays[0].label == f"delay:{delays[0].delay_ms}ms({delays[0].targets[0]})"
    assert plan_faults(7, 300, kinds, controllers=[1, 2, 3], brokers=[101, 102, 103]) == schedule


def test_the_fault_player_slows_the_links_of_the_target_and_heals_them() -> None:
    from replication.nemesis.faults import Fault
    from replication.nemesis.links import ProxyLinks
    from replication.nemesis.player import FaultPlayer

    calls: list[tuple[Any, ...]] = []

    class Network:
        def slow(
            self, node: object, *, delay_ms: int, jitter_ms: int, rate_bytes_per_s: int | None
        ) -> None:
            calls.append(("slow", node, delay_ms, rate_bytes_per_s))

        def heal(self) -> None:
            calls.append(("heal",))

    links = ProxyLinks(Network())  # type: ignore[arg-type]
    player = FaultPlayer(object(), History(), links, unclean=False)  # type: ignore[arg-type]
    fault = Fault(start_s=0, end_s=1, kind="bandwidth", targets=(102,), rate_bytes_per_s=16384)
    nodes = player.apply(fault)
    player.undo(fault, nodes)
    assert nodes == ["102", "by:proxy"]
    assert calls == [("slow", 102, 0, 16384), ("heal",)]


def test_the_timeline_has_a_shade_for_every_fault_kind() -> None:
    from replication.nemesis.faults import FAULT_KINDS
    from replication.nemesis.timeline import FAULT_COLORS

    assert set(FAULT_COLORS) == set(FAULT_KINDS)
    assert FAULT_COLORS["delay"] != FAULT_COLORS["bandwidth"]
