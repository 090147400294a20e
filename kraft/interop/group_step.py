"""The group step: committed offsets without membership, then a classic group of three members
with the range assignor (computed here, in the client, as every Kafka client does), one member
leaving, and the rebalance after it.

Member ids are random per system: answers are normalized to counts, "exactly one leader",
generation ids and the sizes of the assignments each member received (sorted), and the
partitions assigned, as a sorted list of lists.
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable
from typing import Any

from kraft.interop.normalize import error_name
from kraft.interop.steps import RETRIABLE, WAIT_S, Fields, Target
from kraft.interop.wire import Connection, NotServed

FIND_COORDINATOR, JOIN, HEARTBEAT, LEAVE, SYNC, COMMIT, OFFSET_FETCH = 10, 11, 12, 13, 14, 8, 9
PARTITIONS = 4


def subscription(topics: list[str]) -> bytes:
    """ConsumerProtocolSubscription v0: the topics, no user data."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)


def assignment(topic: str, partitions: list[int]) -> bytes:
    """ConsumerProtocolAssignment v0 of one topic, no user data."""
    out = struct.pack(">hi", 0, 1) + struct.pack(">h", len(topic)) + topic.encode()
    out += struct.pack(f">i{len(partitions)}i", len(partitions), *partitions)
    return out + struct.pack(">i", -1)


def assigned_partitions(data: bytes) -> list[int]:
    """The partitions of a ConsumerProtocolAssignment (every topic's, sorted)."""
    if not data:
        return []
    pos = 2
    (topics,) = struct.unpack_from(">i", data, pos)
    pos += 4
    out: list[int] = []
    for _ in range(topics):
        (name_len,) = struct.unpack_from(">h", data, pos)
        pos += 2 + name_len
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out += struct.unpack_from(f">{count}i", data, pos)
        pos += 4 * count
    return sorted(out)


def range_assign(members: list[str], partitions: int) -> dict[str, list[int]]:
    """The range assignor over one topic: members sorted by id, the first ``n % members`` get
    one more partition."""
    ordered = sorted(members)
    per, extra = divmod(partitions, len(ordered))
    out, start = {}, 0
    for i, member in enumerate(ordered):
        count = per + (1 if i < extra else 0)
        out[member] = list(range(start, start + count))
        start += count
    return out


def _retry(call: Callable[[], Any], code: Callable[[Any], Any]) -> Any:
    deadline = time.monotonic() + WAIT_S
    while True:
        answer = call()
        if error_name(code(answer)) not in RETRIABLE or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)


def _first_error(answer: Any) -> Any:
    """The first error code of an OffsetCommit or OffsetFetch answer (to retry on)."""
    for g in getattr(answer, "groups", ()):
        if error_name(g.error_code) != "NONE":
            return g.error_code
        answer = g
    for tp in answer.topics:
        for p in tp.partitions:
            return p.error_code
    return 0


def classic_group(t: Target, out: Fields) -> None:
    topic = t.ready_topic("group", partitions=PARTITIONS)
    group = t.topic("group")

    def coordinator_of(group_id: str) -> int:
        found = _retry(
            lambda: t.session.send(
                FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": [group_id]}
            ),
            lambda a: a.coordinators[0].error_code,
        ).coordinators[0]
        out.setdefault("find_coordinator.error", error_name(found.error_code))
        return int(found.node_id)

    coordinators = {group: coordinator_of(group)}

    def send(conn: Connection | None, api: int, body: dict[str, Any]) -> Any:
        if conn is None:
            group_id = body.get("group_id") or body["groups"][0]["group_id"]
            if group_id not in coordinators:
                coordinators[group_id] = coordinator_of(group_id)
            node = coordinators[group_id]
            return _retry(lambda: t.session.send(api, body, node=node), _first_error)
        return conn.send(api, t.session.version(api), body)

    # Offsets committed outside any membership (generation -1), as a manually assigned
    # consumer does; then read back, with a partition never committed.
    loose = f"{group}-loose"

    def commit(group_id: str, generation: int, member: str, offset: int) -> list[str]:
        body = {
            "group_id": group_id,
            "generation_id_or_member_epoch": generation,
            "member_id": member,
            "group_instance_id": None,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": p,
                            "committed_offset": offset + p,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "m",
                        }
                        for p in (0, 1)
                    ],
                }
            ],
        }
        answer = send(None, COMMIT, body)
        return [error_name(p.error_code) for tp in answer.topics for p in tp.partitions]

    def fetch_committed(group_id: str) -> list[Any]:
        body = {
            "groups": [
                {"group_id": group_id, "topics": [{"name": topic, "partition_indexes": [0, 1, 2]}]}
            ],
            "require_stable": False,
        }
        g = send(None, OFFSET_FETCH, body).groups[0]
        return [error_name(g.error_code)] + [
            [int(p.partition_index), int(p.committed_offset), p.metadata, error_name(p.error_code)]
            for tp in g.topics
            for p in sorted(tp.partitions, key=lambda p: int(p.partition_index))
        ]

    out["loose_commit.errors"] = commit(loose, -1, "", 10)
    out["loose_fetch"] = fetch_committed(loose)
    out["loose_commit_unknown_member.errors"] = commit(loose, 3, "nobody", 20)

    t.session.version(JOIN)
    t.session.version(SYNC)
    conns = [t.session.fresh_connection(coordinators[group]) for _ in range(3)]
    try:
        _three_members(t, out, group, topic, conns, send, commit, fetch_committed)
    finally:
        for conn in conns:
            conn.close()


def _join_all(
    t: Target, group: str, topic: str, conns: list[Connection], members: list[str]
) -> list[Any]:
    """Join every member concurrently (JoinGroup returns once all have joined); a member
    without an id first gets MEMBER_ID_REQUIRED with one, as Kafka's clients see."""
    answers: list[Any] = [None] * len(conns)
    errors: list[BaseException] = []

    def join(i: int) -> None:
        body = {
            "group_id": group,
            "session_timeout": 30_000,
            "rebalance_timeout": 30_000,
            "member_id": members[i],
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription([topic])}],
        }
        try:
            version = t.session.version(JOIN)
            answer = conns[i].send(JOIN, version, body)
            if error_name(answer.error_code) == "MEMBER_ID_REQUIRED":
                members[i] = str(answer.member_id)
                answer = conns[i].send(JOIN, version, body | {"member_id": members[i]})
            answers[i] = answer
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=join, args=(i,)) for i in range(len(conns))]
    for th in threads:
        th.start()
    for th in threads:
        th.join(WAIT_S * 2)
    if errors:
        raise errors[0]
    return answers


def _three_members(
    t: Target,
    out: Fields,
    group: str,
    topic: str,
    conns: list[Connection],
    send: Callable[..., Any],
    commit: Callable[[str, int, str, int], list[str]],
    fetch_committed: Callable[[str], list[Any]],
) -> None:
    members = ["", "", ""]
    joined = _join_all(t, group, topic, conns, members)
    _record_join(out, "join", joined)
    generation = int(joined[0].generation_id)
    assigned = _sync(t, out, "sync", group, generation, conns, joined, topic)
    out["assignment_sizes"] = sorted(len(a) for a in assigned)
    out["assigned_partitions"] = sorted(p for a in assigned for p in a)
    leader = next(a for a in joined if str(a.leader) == str(a.member_id))
    out["commit_in_generation.errors"] = commit(group, generation, str(leader.member_id), 100)
    out["commit_stale_generation.errors"] = commit(
        group, generation + 7, str(leader.member_id), 200
    )
    out["group_fetch"] = fetch_committed(group)

    left = send(
        conns[2],
        LEAVE,
        {"group_id": group, "members": [{"member_id": members[2], "group_instance_id": None}]},
    )
    out["leave.error"] = error_name(left.error_code)
    out["leave.members"] = [error_name(m.error_code) for m in left.members]
    beats = [
        send(
            conns[i],
            HEARTBEAT,
            {
                "group_id": group,
                "generation_id": generation,
                "member_id": members[i],
                "group_instance_id": None,
            },
        )
        for i in (0, 1)
    ]
    out["heartbeat_after_leave.errors"] = [error_name(b.error_code) for b in beats]
    rejoined = _join_all(t, group, topic, conns[:2], members[:2])
    _record_join(out, "rejoin", rejoined)
    out["rejoin.generation_delta"] = int(rejoined[0].generation_id) - generation
    regen = int(rejoined[0].generation_id)
    again = _sync(t, out, "resync", group, regen, conns[:2], rejoined, topic)
    out["resync.assignment_sizes"] = sorted(len(a) for a in again)


def _record_join(out: Fields, label: str, answers: list[Any]) -> None:
    out[f"{label}.errors"] = [error_name(a.error_code) for a in answers]
    out[f"{label}.same_generation"] = len({int(a.generation_id) for a in answers}) == 1
    out[f"{label}.protocol"] = sorted({str(a.protocol_name) for a in answers})
    out[f"{label}.leaders"] = sum(str(a.leader) == str(a.member_id) for a in answers)
    out[f"{label}.members_seen_by_leader"] = max(len(a.members) for a in answers)
    out[f"{label}.members_seen_by_followers"] = sorted(
        len(a.members) for a in answers if str(a.leader) != str(a.member_id)
    )


def _sync(
    t: Target,
    out: Fields,
    label: str,
    group: str,
    generation: int,
    conns: list[Connection],
    joined: list[Any],
    topic: str,
) -> list[list[int]]:
    """SyncGroup for every member concurrently; the leader sends the range assignment."""
    plan = range_assign([str(a.member_id) for a in joined], PARTITIONS)
    results: list[Any] = [None] * len(conns)
    errors: list[BaseException] = []

    def sync(i: int) -> None:
        is_leader = str(joined[i].leader) == str(joined[i].member_id)
        body = {
            "group_id": group,
            "generation_id": generation,
            "member_id": str(joined[i].member_id),
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [
                {"member_id": m, "assignment": assignment(topic, parts)}
                for m, parts in plan.items()
            ]
            if is_leader
            else [],
        }
        try:
            results[i] = conns[i].send(SYNC, t.session.version(SYNC), body)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=sync, args=(i,)) for i in range(len(conns))]
    for th in threads:
        th.start()
    for th in threads:
        th.join(WAIT_S * 2)
    if errors:
        raise errors[0]
    out[f"{label}.errors"] = [error_name(r.error_code) for r in results]
    got = [assigned_partitions(bytes(r.assignment)) for r in results]
    expected = [plan[str(a.member_id)] for a in joined]
    out[f"{label}.relayed_as_sent"] = got == expected
    return got


__all__ = ["NotServed", "classic_group"]
