"""`kraft interop diff`, a short part of its sequence, in the suite: kraft's wire answers must
agree with Apache Kafka's on the steps where they should (produce and fetch at the edges,
produce refusals, ListOffsets by time, the idempotent producer, Metadata's shapes, fetch
sessions, the group APIs per group, KIP-951's leader hints in Produce), so a regression in
what kraft answers on its Kafka listener fails here.

Kafka is the suite's one shared cluster (``kafka_peer``, tests/kafka_peer.py); kraft is a
LocalCluster (1 controller, 3 brokers) of this module.
"""

from __future__ import annotations

import pytest

from kraft.cluster.local import LocalCluster
from kraft.interop.diff import ACCEPTED, Accepted, compare, exit_code
from kraft.interop.run import run_diff
from kraft.interop.steps import BASE_TS
from kraft.interop.wire import common_versions
from kraft.peer import KafkaCluster

AGREEING_STEPS = [
    "metadata_shapes",
    "produce_fetch_edges",
    "produce_refusals",
    "list_offsets_by_time",
    "idempotent_producer",
    "fetch_sessions",
    "group_items",
    "leader_hints",
]


@pytest.mark.kafka
@pytest.mark.process
def test_kraft_answers_as_kafka_on_the_wire_edges(
    kraft_cluster: LocalCluster, kafka_peer: KafkaCluster
) -> None:
    results, meta = run_diff(
        kraft_cluster.kafka_bootstrap,
        kafka_peer.bootstrap,
        kraft_admin=kraft_cluster.bootstrap,
        steps=AGREEING_STEPS,
    )
    for step in AGREEING_STEPS:
        kraft, kafka = results[step]["kraft"], results[step]["kafka"]
        assert "failed" not in kraft and "failed" not in kafka, (step, kraft, kafka)
        assert "not_served" not in kraft, (step, kraft)
    # The steps exercise what they claim (a field that could never differ proves nothing).
    edges = results["produce_fetch_edges"]["kafka"]
    assert edges["too_large.error"] == "MESSAGE_TOO_LARGE"
    assert edges["fetch_past_end.error"] == "OFFSET_OUT_OF_RANGE"
    refusals = results["produce_refusals"]["kafka"]
    assert refusals["client_base_offset_ignored"] == ["INVALID_RECORD", -1]
    times = results["list_offsets_by_time"]["kafka"]
    assert times["between"] == ["NONE", 2, BASE_TS + 20]  # the found record's timestamp
    idem = results["idempotent_producer"]["kafka"]
    assert idem["duplicate.base_offset"] == idem["first.base_offset"] == 0
    assert idem["out_of_sequence.error"] == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    sessions = results["fetch_sessions"]["kafka"]  # KIP-227, poll after poll
    assert sessions["full.session_id_set"] and sessions["incremental_nothing_new.partitions"] == []
    assert sessions["incremental_new_records.partitions"] == [["a", "NONE", 2, ["one-0", "one-1"]]]
    assert sessions["wrong_epoch.error"] == "INVALID_FETCH_SESSION_EPOCH"
    assert sessions["unknown_session.error"] == "FETCH_SESSION_ID_NOT_FOUND"
    items = results["group_items"]["kafka"]  # each group its own answer; the simple group
    assert items["simple.describe_groups"] == ["NONE", "Empty", "", "", 0]
    assert items["simple.list_groups"] == [["Empty", "classic", ""]]
    assert ["empty", "INVALID_GROUP_ID", "", 0] in items["consumer_group_describe"]
    assert items["delete_groups"] == [["elsewhere", "NOT_COORDINATOR"], ["simple", "NONE"]]
    hints = results["leader_hints"]["kafka"]  # KIP-951 in Produce v10+
    assert hints["produce_to_follower.error"] == "NOT_LEADER_OR_FOLLOWER"
    assert hints["produce_to_follower.node_endpoints"] == [[True, True]]
    differences = [d for d in compare(results) if d.status != "accepted"]
    assert not differences, "\n".join(
        f"{d.step} {d.field}: kraft {d.kraft} kafka {d.kafka}" for d in differences
    )
    assert meta["versions"]["Fetch"] == 12


def test_differences_are_classified_accepted_not_served_or_differing() -> None:
    results = {
        "s": {
            "kraft": {"a": 1, "b": "X", "not_served": "DescribeConfigs not served"},
            "kafka": {"a": 1, "b": "Y", "c": 3},
        },
        "t": {"kraft": {"x": [1, 2]}, "kafka": {"x": [1, 3]}},
    }
    accepted = {("s", "b"): Accepted("X", "Y", "why"), ("t", "x"): Accepted([1, 2], [1, 4], "")}
    found = {(d.step, d.field): d.status for d in compare(results, accepted)}
    assert found == {
        ("s", "b"): "accepted",
        ("s", "c"): "not served",
        ("s", "not_served"): "not served",
        ("t", "x"): "differs",  # accepted only with exactly the recorded answers
    }
    assert exit_code(compare(results, accepted)) == 1
    assert exit_code(compare({"s": results["s"] | {"kraft": {"a": 1}, "kafka": {"a": 1}}})) == 0


def test_the_accepted_table_is_documented() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "kafka-compatibility.md").read_text()
    section = doc.split("## Differences found by kraft interop diff", 1)[1]
    for step, field in ACCEPTED:
        assert f"`{step}`" in section and f"`{field}`" in section, (step, field)


def test_both_systems_get_one_version_per_api() -> None:
    kraft = {1: (4, 12), 3: (0, 12), 19: (2, 7)}
    kafka = {1: (4, 17), 3: (0, 13), 19: (2, 7), 32: (1, 4)}
    assert common_versions(kraft, kafka) == {1: 12, 3: 12, 19: 7, 32: 4}


def test_a_read_committed_consumer_drops_the_aborted_transactions_batches() -> None:
    import struct

    from kraft.interop.txn_step import consumer_view
    from storage.control import ControlType, build_marker_batch
    from storage.records import build_batch

    def data(offset: int, *vals: str) -> bytes:
        return build_batch(
            [v.encode() for v in vals],
            timestamp_ms=BASE_TS,
            base_offset=offset,
            producer_id=7,
            producer_epoch=0,
            base_sequence=offset,
            is_transactional=True,
        )

    def marker(offset: int, commit: bool) -> bytes:
        batch = bytearray(
            build_marker_batch(
                commit=commit, producer_id=7, producer_epoch=0, coordinator_epoch=0, timestamp_ms=0
            )
        )
        struct.pack_into(">q", batch, 0, offset)  # the base offset is outside the CRC
        return bytes(batch)

    log = b"".join([data(0, "c0", "c1"), marker(2, True), data(3, "a0"), marker(4, False)])
    log += data(5, "d0")
    committed = consumer_view(log, [3])
    assert committed["kept"] == ["c0", "c1", "d0"]
    assert committed["markers"] == [[2, ControlType.COMMIT], [4, ControlType.ABORT]]
    assert committed["data_batches_returned"] == 3
    assert consumer_view(log, [])["kept"] == ["c0", "c1", "a0", "d0"]
