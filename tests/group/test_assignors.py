"""The server-side assignors: balanced, sticky (uniform), co-partitioned (range)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from replication.group.assignors import assign, range_assign, uniform_assign
from replication.group.state import partitions_of

TOPICS = {"a": ("A", 6), "b": ("B", 4)}


def loads(result: dict[str, tuple[tuple[str, tuple[int, ...]], ...]]) -> list[int]:
    return sorted(len(partitions_of(a)) for a in result.values())


def test_uniform_with_identical_subscriptions_gives_floor_or_ceil_to_everyone() -> None:
    subs = {f"m{i}": ("a", "b") for i in range(3)}
    result = uniform_assign(subs, TOPICS, {})
    assert loads(result) == [3, 3, 4]
    every = [tp for a in result.values() for tp in partitions_of(a)]
    assert len(every) == len(set(every)) == 10


def test_uniform_is_sticky_when_a_member_joins() -> None:
    subs = {"m0": ("a", "b"), "m1": ("a", "b")}
    before = uniform_assign(subs, TOPICS, {})
    after = uniform_assign({**subs, "m2": ("a", "b")}, TOPICS, before)
    moved = sum(len(partitions_of(before[m]) - partitions_of(after[m])) for m in ("m0", "m1"))
    assert moved == len(partitions_of(after["m2"])) == 3  # only what the newcomer needs


def test_uniform_gives_each_member_only_topics_it_subscribes_to() -> None:
    subs = {"m0": ("a",), "m1": ("a", "b"), "m2": ("b",)}
    result = uniform_assign(subs, TOPICS, {})
    assert {t for t, _ in partitions_of(result["m0"])} == {"A"}
    assert {t for t, _ in partitions_of(result["m2"])} == {"B"}
    assert max(loads(result)) - min(loads(result)) <= 1


def test_range_co_partitions_and_gives_the_first_members_the_extra() -> None:
    subs = {"m1": ("a", "b"), "m0": ("a", "b"), "m2": ("a",)}
    result = range_assign(subs, {"a": ("A", 7), "b": ("B", 4)})
    assert dict(result["m0"]) == {"A": (0, 1, 2), "B": (0, 1)}
    assert dict(result["m1"]) == {"A": (3, 4), "B": (2, 3)}
    assert dict(result["m2"]) == {"A": (5, 6)}


def test_a_member_subscribed_to_nothing_known_gets_an_empty_assignment() -> None:
    for name in ("uniform", "range"):
        assert assign(name, {"m": ("zzz",)}, TOPICS, {}) == {"m": ()}


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from([f"m{i}" for i in range(6)]),
        st.sets(st.sampled_from(["a", "b"]), min_size=1).map(lambda s: tuple(sorted(s))),
        min_size=1,
    ),
    st.sampled_from(["uniform", "range"]),
)
def test_every_subscribed_partition_goes_to_exactly_one_subscriber(
    subs: dict[str, tuple[str, ...]], name: str
) -> None:
    result = assign(name, subs, TOPICS, {})
    owners: dict[tuple[str, int], str] = {}
    for m, a in result.items():
        for tp in partitions_of(a):
            assert tp not in owners
            owners[tp] = m
            topic = "a" if tp[0] == "A" else "b"
            assert topic in subs[m]
    wanted = {t for s in subs.values() for t in s}
    assert len(owners) == sum(TOPICS[t][1] for t in wanted)
