from __future__ import annotations

import pytest

from replication.group.records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    OFFSET_COMMIT,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    CurrentMemberAssignmentValue,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitValue,
    RecordKey,
    TargetAssignmentMemberValue,
    TargetAssignmentMetadataValue,
    decode,
    record,
)
from storage.errors import CorruptRecordError

CASES = [
    (
        RecordKey(OFFSET_COMMIT, "g", topic="t", partition=3),
        OffsetCommitValue(offset=10, leader_epoch=2, metadata="m\u00e9", commit_timestamp_ms=5),
    ),
    (
        RecordKey(GROUP_METADATA, "g"),
        GroupMetadataValue(epoch=4, subscription_metadata=(("t", "id-t", 3),)),
    ),
    (
        RecordKey(MEMBER_METADATA, "g", "m1"),
        MemberMetadataValue(
            client_id="c",
            client_host="/h",
            subscribed_topic_names=("a", "b"),
            rebalance_timeout_ms=1000,
            server_assignor=None,
        ),
    ),
    (RecordKey(TARGET_ASSIGNMENT_METADATA, "g"), TargetAssignmentMetadataValue(assignment_epoch=3)),
    (
        RecordKey(TARGET_ASSIGNMENT_MEMBER, "g", "m1"),
        TargetAssignmentMemberValue(partitions=(("id-t", (0, 2)),)),
    ),
    (
        RecordKey(CURRENT_MEMBER_ASSIGNMENT, "g", "m1"),
        CurrentMemberAssignmentValue(
            member_epoch=3,
            previous_member_epoch=2,
            state="unrevoked_partitions",
            assigned_partitions=(("id-t", (0,)),),
            partitions_pending_revocation=(("id-t", (1,)),),
        ),
    ),
]


@pytest.mark.parametrize(("key", "value"), CASES)
def test_every_record_kind_round_trips(key: RecordKey, value: object) -> None:
    k, v = record(key, value)  # type: ignore[arg-type]
    assert decode(k, v) == (key, value)
    assert decode(k, None) == (key, None)


def test_the_same_fact_always_has_byte_identical_keys_so_compaction_is_well_defined() -> None:
    a, _ = record(CASES[0][0], CASES[0][1])  # type: ignore[arg-type]
    b, _ = record(RecordKey(OFFSET_COMMIT, "g", topic="t", partition=3), None)
    assert a == b
    assert (
        record(RecordKey(MEMBER_METADATA, "g", "m1"), None)[0]
        != (record(RecordKey(CURRENT_MEMBER_ASSIGNMENT, "g", "m1"), None)[0])
    )


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (b"", None),
        (b'\x00\x63["g"]', None),  # unknown type
        (b'\x00\x01["g"]', None),  # offset commit key without topic/partition
        (b'\x00\x03["g"]', b"\x00\x07{}"),  # unknown value version
        (b'\x00\x03["g"]', b'\x00\x00{"epoch":"x"}'),
        (
            b'\x00\x08["g","m"]',
            b'\x00\x00{"member_epoch":1,"previous_member_epoch":0,"state":"bogus",'
            b'"assigned_partitions":[],"partitions_pending_revocation":[]}',
        ),
        (b"\x00\x03\xff\xfe", None),
    ],
)
def test_undecodable_records_raise_corrupt_record_not_a_crash(
    key: bytes, value: bytes | None
) -> None:
    with pytest.raises(CorruptRecordError):
        decode(key, value)
