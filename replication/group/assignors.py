"""Server-side assignors (KIP-848's ``group.consumer.assignors``): ``uniform`` and ``range``.

Both are pure functions of the members' subscriptions, the subscribed topics' partition
counts and the previous target assignment, and deterministic (ties break by member id), so a
replayed coordinator computes what the old one would have.

* ``uniform`` (Kafka's ``UniformAssignor``): balanced and sticky. Every member keeps what it
  had as long as the balance allows; the rest goes to the least loaded eligible member; then
  partitions move from the most to the least loaded eligible member until no eligible pair
  differs by more than one. With identical subscriptions every member ends with floor or
  ceil of partitions/members, as Kafka's ``OptimizedUniformAssignmentBuilder``.
* ``range`` (Kafka's server ``RangeAssignor``): per topic, the subscribed members sorted by id
  get contiguous ranges, the first ``n % k`` one partition more, so members subscribed to
  co-partitioned topics get the same partition numbers of each. It is sticky in the sense
  that a stable membership always maps to the same ranges.
"""

from __future__ import annotations

from collections.abc import Mapping

from .records import Assignment
from .state import canonical

TopicMeta = Mapping[str, tuple[str, int]]
"""Subscribed topic name -> (topic id, partition count)."""


def assign(
    name: str,
    subscriptions: Mapping[str, tuple[str, ...]],
    topics: TopicMeta,
    previous: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """The new target assignment of every member in ``subscriptions``."""
    if name == "range":
        return range_assign(subscriptions, topics)
    assert name == "uniform", name
    return uniform_assign(subscriptions, topics, previous)


def range_assign(
    subscriptions: Mapping[str, tuple[str, ...]], topics: TopicMeta
) -> dict[str, Assignment]:
    result: dict[str, dict[str, list[int]]] = {m: {} for m in subscriptions}
    for topic_name in sorted(topics):
        topic_id, count = topics[topic_name]
        members = sorted(m for m, subs in subscriptions.items() if topic_name in subs)
        if not members:
            continue
        quota, extra = divmod(count, len(members))
        start = 0
        for i, m in enumerate(members):
            n = quota + (1 if i < extra else 0)
            if n:
                result[m][topic_id] = list(range(start, start + n))
            start += n
    return {m: canonical(parts) for m, parts in result.items()}


def uniform_assign(
    subscriptions: Mapping[str, tuple[str, ...]],
    topics: TopicMeta,
    previous: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    eligible: dict[tuple[str, int], list[str]] = {}
    for topic_name in sorted(topics):
        topic_id, count = topics[topic_name]
        subscribers = sorted(m for m, subs in subscriptions.items() if topic_name in subs)
        if subscribers:
            for p in range(count):
                eligible[(topic_id, p)] = subscribers
    owner: dict[tuple[str, int], str] = {}
    load: dict[str, int] = {m: 0 for m in subscriptions}
    # 1. Stickiness: keep every previous partition that is still valid for its member.
    for m in sorted(previous):
        if m not in load:
            continue
        for topic_id, ps in previous[m]:
            for p in ps:
                tp = (topic_id, p)
                if tp in eligible and tp not in owner and m in eligible[tp]:
                    owner[tp] = m
                    load[m] += 1
    # 2. Free partitions to the least loaded eligible member; the most constrained first.
    free = sorted(
        (tp for tp in eligible if tp not in owner), key=lambda tp: (len(eligible[tp]), tp)
    )
    for tp in free:
        m = min(eligible[tp], key=lambda c: (load[c], c))
        owner[tp] = m
        load[m] += 1
    # 3. Balance: move a partition from a member to an eligible one with at least two less.
    by_member: dict[str, set[tuple[str, int]]] = {m: set() for m in load}
    for tp, m in owner.items():
        by_member[m].add(tp)
    moved = True
    while moved:
        moved = False
        for m in sorted(load, key=lambda c: (-load[c], c)):
            for tp in sorted(by_member[m]):
                target = min(eligible[tp], key=lambda c: (load[c], c))
                if load[target] + 1 < load[m]:
                    by_member[m].discard(tp)
                    by_member[target].add(tp)
                    load[m] -= 1
                    load[target] += 1
                    moved = True
            if moved:
                break
    result: dict[str, dict[str, list[int]]] = {m: {} for m in subscriptions}
    for m, tps in by_member.items():
        for topic_id, p in tps:
            result[m].setdefault(topic_id, []).append(p)
    return {m: canonical(parts) for m, parts in result.items()}
