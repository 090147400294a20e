"""The KIP-848 step: a consumer group of the new protocol, driven by ConsumerGroupHeartbeat as a
Kafka 4 consumer drives it: one member joins and gets every partition; a second joins and the
coordinator moves half to it (the first revokes, then the second gets them); a heartbeat with
a wrong epoch and one from an unknown member; ConsumerGroupDescribe; OffsetCommit with the
member epoch; the second member leaves and the first gets everything back; the group empties.
Then a new group whose one member subscribes to no topic: it joins and leaves.

Member ids are chosen by the client (ConsumerGroupHeartbeat v1, KIP-1082); answers keep
errors, epochs, assignment sizes and the group's state, never ids.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from kraft.interop.normalize import error_name
from kraft.interop.steps import RETRIABLE, WAIT_S, Fields, Target, find_coordinator, wait_for

COMMIT, HEARTBEAT, DESCRIBE = 8, 68, 69
PARTITIONS = 4


class _Member:
    """One member's view: its id, epoch and the partitions it owns."""

    def __init__(self, t: Target, group: str, topic: str, node: int) -> None:
        self.t, self.group, self.topic, self.node = t, group, topic, node
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.owned: list[int] = []
        self.topic_id: Any = None

    def heartbeat(self, *, epoch: int | None = None, member_id: str | None = None) -> Any:
        joining = self.epoch == 0 and epoch is None
        body = {
            "group_id": self.group,
            "member_id": member_id or self.member_id,
            "member_epoch": self.epoch if epoch is None else epoch,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout": 30_000 if joining else -1,
            "subscribed_topic_names": [self.topic] if joining else None,
            "server_assignor": None,
            "topic_partitions": (
                []
                if joining or self.topic_id is None
                else [{"topic_id": self.topic_id, "partitions": self.owned}]
            ),
        }
        answer = self.t.session.send(HEARTBEAT, body, node=self.node)
        if epoch is None and member_id is None and error_name(answer.error_code) == "NONE":
            self.epoch = int(answer.member_epoch)
            if answer.assignment is not None:
                owned: list[int] = []
                for tp in answer.assignment.topic_partitions:
                    self.topic_id = tp.topic_id
                    owned += [int(p) for p in tp.partitions]
                self.owned = sorted(owned)
        return answer


COORDINATOR_ERRORS = RETRIABLE | {"COORDINATOR_LOAD_IN_PROGRESS"}


def _join(member: _Member, retried: list[str]) -> Any:
    """The first heartbeat (epoch 0), again while the coordinator is not ready (a Kafka
    consumer retries NOT_COORDINATOR and COORDINATOR_LOAD_IN_PROGRESS); the errors retried
    are added to ``retried``."""
    deadline = time.monotonic() + WAIT_S
    while True:
        answer = member.heartbeat()
        code = error_name(answer.error_code)
        if code not in COORDINATOR_ERRORS or time.monotonic() > deadline:
            return answer
        retried.append(code)
        time.sleep(0.2)


def _settle(members: list[_Member], sizes: list[int]) -> list[str]:
    """Heartbeat every member (owning what it was last given) until the assignment sizes are
    ``sizes`` and stay so for a round; the errors of the last round."""
    deadline = time.monotonic() + WAIT_S
    stable = 0
    errors: list[str] = []
    while stable < 2:
        if time.monotonic() > deadline:
            raise TimeoutError(f"assignment not {sizes}: {[m.owned for m in members]}")
        before = [list(m.owned) for m in members]
        errors = [error_name(m.heartbeat().error_code) for m in members]
        settled = sorted(len(m.owned) for m in members) == sizes
        stable = stable + 1 if settled and before == [m.owned for m in members] else 0
        time.sleep(0.1)
    return errors


def _describe(t: Target, group: str, node: int, out: Fields, label: str) -> None:
    answer = t.session.send(
        DESCRIBE, {"group_ids": [group], "include_authorized_operations": False}, node=node
    )
    g = answer.groups[0]
    out[f"{label}.error"] = error_name(g.error_code)
    out[f"{label}.state"] = str(g.group_state)
    out[f"{label}.assignor"] = str(g.assignor_name)
    out[f"{label}.epochs_equal"] = int(g.group_epoch) == int(g.assignment_epoch)
    out[f"{label}.group_epoch"] = int(g.group_epoch)
    out[f"{label}.members"] = len(g.members)
    out[f"{label}.assigned_sizes"] = sorted(
        sum(len(tp.partitions) for tp in m.assignment.topic_partitions) for m in g.members
    )
    out[f"{label}.subscribed_to_the_topic"] = sum(
        list(map(str, m.subscribed_topic_names)) == [t.topic("cg")] for m in g.members
    )


COMMIT_V9 = 9
"""OffsetCommit v9: the first a member of a KIP-848 group may send (KIP-848)."""


def _commit(
    t: Target, group: str, node: int, member: _Member, epoch: int, version: int | None = None
) -> list[str]:
    body = {
        "group_id": group,
        "generation_id_or_member_epoch": epoch,
        "member_id": member.member_id,
        "group_instance_id": None,
        "topics": [
            {
                "name": member.topic,
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": 5,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                    for p in member.owned[:1]
                ],
            }
        ],
    }
    if version is None:
        answer = t.session.send(COMMIT, body, node=node)
    else:
        low, high = t.session.served.get(COMMIT, (0, -1))
        if not low <= version <= high:
            return ["NOT_SERVED"]
        answer = t.session.connection(node).send(COMMIT, version, body)
    return [error_name(p.error_code) for tp in answer.topics for p in tp.partitions]


def _known_to(t: Target, topic: str, node: int) -> bool:
    """Whether broker ``node``'s metadata has every partition of ``topic``."""
    body = {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
    answer = t.session.send(3, body, node=node)
    return any(
        error_name(tm.error_code) == "NONE" and len(tm.partitions) == PARTITIONS
        for tm in answer.topics
    )


def consumer_group(t: Target, out: Fields) -> None:
    topic = t.ready_topic("cg", partitions=PARTITIONS)
    group = t.topic("cg")
    code, node = find_coordinator(t, group, 0)
    out["find_coordinator.error"] = code
    # The coordinator must know the topic before the first member subscribes to it: else
    # the group's epoch moves once more when it learns of it (on Kafka, whose brokers learn
    # metadata apart from each other), a timing of the harness.
    wait_for(lambda: _known_to(t, topic, node), f"{topic} in broker {node}'s metadata")
    t.session.version(HEARTBEAT)
    a, b = _Member(t, group, topic, node), _Member(t, group, topic, node)
    retried: list[str] = []
    joined = _join(a, retried)
    out["join.error"] = error_name(joined.error_code)
    out["join.member_epoch"] = int(joined.member_epoch)
    out["join.heartbeat_interval_ms"] = _ms(joined.heartbeat_interval)
    out["join.member_id_echoed"] = str(joined.member_id) == a.member_id
    out["one_member.errors"] = _settle([a], [PARTITIONS])
    out["one_member.epoch"] = a.epoch
    b_joined = _join(b, [])
    out["second_join.error"] = error_name(b_joined.error_code)
    out["second_join.member_epoch"] = int(b_joined.member_epoch)
    out["two_members.errors"] = _settle([a, b], [PARTITIONS // 2, PARTITIONS // 2])
    out["two_members.epochs"] = sorted([a.epoch, b.epoch])
    out["two_members.partitions"] = sorted([*a.owned, *b.owned])
    _describe(t, group, node, out, "describe_two")
    out["future_epoch.error"] = error_name(a.heartbeat(epoch=a.epoch + 5).error_code)
    unknown = a.heartbeat(epoch=1, member_id=str(uuid.uuid4()))
    out["unknown_member.error"] = error_name(unknown.error_code)
    out["commit_v8.errors"] = _commit(t, group, node, b, b.epoch)
    out["commit_v9_member_epoch.errors"] = _commit(t, group, node, b, b.epoch, COMMIT_V9)
    out["commit_v9_stale_epoch.errors"] = _commit(t, group, node, b, b.epoch - 1, COMMIT_V9)
    left = b.heartbeat(epoch=-1)
    out["leave.error"] = error_name(left.error_code)
    out["leave.member_epoch"] = int(left.member_epoch)
    out["after_leave.errors"] = _settle([a], [PARTITIONS])
    out["after_leave.epoch"] = a.epoch
    _describe(t, group, node, out, "describe_one")
    a.heartbeat(epoch=-1)
    _describe(t, group, node, out, "describe_empty")
    _subscribed_to_nothing(t, out)


def _subscribed_to_nothing(t: Target, out: Fields) -> None:
    """A new group whose one member subscribes to no topic: Kafka 4.4 moves no epoch (the
    group starts at 1, in memory), then the leave moves both epochs to 2."""
    group = t.topic("cg-none")
    _code, node = find_coordinator(t, group, 0)
    member = _Member(t, group, "", node)  # no topic: its leave is all it sends
    answer = t.session.send(
        HEARTBEAT,
        {
            "group_id": group,
            "member_id": member.member_id,
            "member_epoch": 0,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout": 30_000,
            "subscribed_topic_names": [],
            "server_assignor": None,
            "topic_partitions": [],
        },
        node=node,
    )
    out["no_topics.join"] = [error_name(answer.error_code), int(answer.member_epoch)]
    left = member.heartbeat(epoch=-1)
    out["no_topics.leave"] = [error_name(left.error_code), int(left.member_epoch)]
    described = t.session.send(
        DESCRIBE, {"group_ids": [group], "include_authorized_operations": False}, node=node
    ).groups[0]
    out["no_topics.after_leave"] = [
        str(described.group_state),
        int(described.group_epoch),
        int(described.assignment_epoch),
    ]


def _ms(value: Any) -> int:
    seconds = getattr(value, "total_seconds", None)
    return round(seconds() * 1000) if seconds is not None else int(value)


__all__ = ["consumer_group"]
