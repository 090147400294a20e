"""Two steps of answers per item: the group APIs answering each group on its own, and KIP-951's
leader hints in Produce.

``group_items``: a group known only by offsets committed outside any membership (Kafka 4.x's
"simple" classic group), as DescribeGroups, ListGroups and ConsumerGroupDescribe show it;
FindCoordinator of several keys; ConsumerGroupDescribe and DeleteGroups of groups that each
get their own error (not found, another coordinator's, the empty id, named twice). Groups are
labelled by role, never by name.

``leader_hints``: a Produce v11 to a broker that follows the partition: NOT_LEADER_OR_FOLLOWER
with ``current_leader`` and the leader's endpoint (KIP-951), normalized to "names the leader".

These send fixed versions both systems serve (not the session's one version per API).
"""

from __future__ import annotations

import time
from typing import Any

from kraft.interop.normalize import error_name
from kraft.interop.steps import RETRIABLE, WAIT_S, Fields, Target, find_coordinator
from kraft.interop.wire import NotServed
from storage.records import build_batch

PRODUCE, COMMIT, FIND, DESCRIBE, LIST, DELETE, CG_DESCRIBE = 0, 8, 10, 15, 16, 42, 69
VERSIONS = {PRODUCE: 11, FIND: 4, DESCRIBE: 5, LIST: 5, DELETE: 2, CG_DESCRIBE: 0}
CANDIDATES = 64
"""Groups tried to find one of the same coordinator and one of another."""


def _send(t: Target, node: int | None, api: int, body: dict[str, Any]) -> Any:
    version = VERSIONS[api]
    lo, hi = t.session.served.get(api, (1, 0))
    if not lo <= version <= hi:
        raise NotServed(api)
    return t.session.connection(node).send(api, version, body)


def _coordinator(t: Target, group: str) -> int:
    return find_coordinator(t, group, 0)[1]


def group_items(t: Target, out: Fields) -> None:
    topic = t.ready_topic("items")
    simple = t.topic("items-simple")
    node = _coordinator(t, simple)
    commit = {
        "group_id": simple,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 3,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    }
    deadline = time.monotonic() + WAIT_S
    while True:  # a coordinator still loading its partition answers NOT_COORDINATOR meanwhile
        committed = t.session.send(COMMIT, commit, node=node)
        errors = [error_name(p.error_code) for x in committed.topics for p in x.partitions]
        if not RETRIABLE.intersection(errors) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
        node = _coordinator(t, simple)
    out["commit.errors"] = errors
    (described,) = _send(t, node, DESCRIBE, {"groups": [simple]}).groups
    out["simple.describe_groups"] = [
        error_name(described.error_code),
        described.group_state,
        described.protocol_type,
        described.protocol_data,
        len(described.members),
    ]
    listed = _send(t, node, LIST, {"states_filter": [], "types_filter": []}).groups
    out["simple.list_groups"] = [
        [g.group_state, g.group_type, g.protocol_type] for g in listed if g.group_id == simple
    ]
    found = _send(t, node, FIND, {"key_type": 0, "coordinator_keys": ["", simple]}).coordinators
    out["find_coordinator.errors"] = [error_name(c.error_code) for c in found]

    candidates = [t.topic(f"items-other-{i}") for i in range(CANDIDATES)]
    same = next(g for g in candidates if _coordinator(t, g) == node)
    other = next(g for g in candidates if _coordinator(t, g) != node)
    roles = {simple: "simple", same: "unknown", other: "elsewhere", "": "empty"}
    groups = _send(t, node, CG_DESCRIBE, {"group_ids": [simple, same, other, ""]}).groups
    out["consumer_group_describe"] = sorted(
        [roles[g.group_id], error_name(g.error_code), g.group_state, int(g.group_epoch)]
        for g in groups
    )
    deleted = _send(t, node, DELETE, {"groups_names": [simple, other, simple]}).results
    out["delete_groups"] = sorted([roles[r.group_id], error_name(r.error_code)] for r in deleted)


def leader_hints(t: Target, out: Fields) -> None:
    topic = t.ready_topic("hints")
    leader = t.session.leader(topic)
    follower = min(n for n in t.session.brokers if n != leader)
    batch = build_batch([b"hint"], timestamp_ms=1)
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    }
    answer = _send(t, follower, PRODUCE, body)
    (part,) = answer.responses[0].partition_responses
    out["produce_to_follower.error"] = error_name(part.error_code)
    hint = part.current_leader
    out["produce_to_follower.current_leader_is_leader"] = (
        hint is not None and int(hint.leader_id) == leader and int(hint.leader_epoch) >= 0
    )
    out["produce_to_follower.node_endpoints"] = [
        [int(e.node_id) == leader, f"{e.host}:{e.port}" == t.session.brokers[leader]]
        for e in answer.node_endpoints
    ]


__all__ = ["group_items", "leader_hints"]
