"""KIP-227's fetch sessions (`replication.core.fetch_session`): a full fetch makes a session, an
incremental one names only what changed and is answered only with news, a wrong epoch or id is
refused, epoch -1 closes, and a full cache evicts as KIP-227 says: a stale session, else the
least worth (consumers before followers, fewer partitions first) of those old enough, for a
session worth more."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from replication.core.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    ContextKind,
    FetchContext,
    FetchSessionCache,
    PartitionAnswer,
    PartitionKey,
    PartitionRequest,
    SessionError,
)

A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def req(offset: int) -> PartitionRequest:
    return PartitionRequest(fetch_offset=offset, partition_max_bytes=1024)


def ok(hw: int, records: bool = False, log_start: int = 0) -> PartitionAnswer:
    return PartitionAnswer(
        high_watermark=hw, last_stable_offset=hw, log_start_offset=log_start, has_records=records
    )


def serve(
    cache: FetchSessionCache, context: FetchContext, answers: dict[PartitionKey, PartitionAnswer]
) -> tuple[int, tuple[PartitionKey, ...]]:
    fetched = {key for key, _ in context.partitions}
    return cache.answered(context, {k: v for k, v in answers.items() if k in fetched}, now_ms=0)


def full(
    cache: FetchSessionCache, *keys: PartitionKey, now_ms: int = 0, follower: bool = False
) -> int:
    context = cache.new_context(
        session_id=0,
        epoch=INITIAL_EPOCH,
        uses_topic_ids=False,
        partitions=[(k, req(0)) for k in keys],
        now_ms=now_ms,
        privileged=follower,
    )
    assert context.kind is ContextKind.FULL
    session_id, answered = cache.answered(context, {k: ok(10) for k in keys}, now_ms=now_ms)
    assert answered == keys
    return session_id


def incremental(
    cache: FetchSessionCache,
    session_id: int,
    epoch: int,
    partitions: list[tuple[PartitionKey, PartitionRequest]] | None = None,
    forgotten: tuple[PartitionKey, ...] = (),
    *,
    topic_ids: bool = False,
    now_ms: int = 0,
) -> FetchContext:
    return cache.new_context(
        session_id=session_id,
        epoch=epoch,
        uses_topic_ids=topic_ids,
        partitions=partitions or [],
        forgotten=forgotten,
        now_ms=now_ms,
    )


def test_a_full_fetch_makes_a_session_and_incremental_ones_answer_only_news() -> None:
    cache = FetchSessionCache(10, random.Random(1))
    sid = full(cache, A0, A1, B0)
    assert sid != INVALID_SESSION_ID and len(cache) == 1 and cache.partitions_cached == 3
    # Nothing named: every partition is fetched at its cached offset; nothing changed.
    context = incremental(cache, sid, 1)
    assert context.kind is ContextKind.INCREMENTAL
    assert [k for k, _ in context.partitions] == [A0, A1, B0]
    assert serve(cache, context, {A0: ok(10), A1: ok(10), B0: ok(10)}) == (sid, ())
    # Records on a1, a new high watermark on b0, a new log start on a0: all three are news.
    context = incremental(cache, sid, 2)
    answers = {A0: ok(10, log_start=3), A1: ok(10, records=True), B0: ok(11)}
    assert serve(cache, context, answers) == (sid, (A0, A1, B0))
    # The client moved a1's position; the broker fetches a1 from there (answered ones went to
    # the back of the order, so the others are read first).
    context = incremental(cache, sid, 3, [(A1, req(7))])
    assert dict(context.partitions)[A1] == req(7)
    assert serve(cache, context, {A0: ok(10, log_start=3), A1: ok(10), B0: ok(11)}) == (sid, ())


def test_errors_are_always_sent_and_the_partition_again_once_the_error_is_gone() -> None:
    cache = FetchSessionCache(10, random.Random(1))
    sid = full(cache, A0)
    failed = PartitionAnswer(error=True)
    assert serve(cache, incremental(cache, sid, 1), {A0: failed}) == (sid, (A0,))
    assert serve(cache, incremental(cache, sid, 2), {A0: failed}) == (sid, (A0,))
    assert serve(cache, incremental(cache, sid, 3), {A0: ok(10)}) == (sid, (A0,))
    assert serve(cache, incremental(cache, sid, 4), {A0: ok(10)}) == (sid, ())


def test_add_and_forget_partitions_and_an_emptied_session_closes() -> None:
    cache = FetchSessionCache(10, random.Random(1))
    sid = full(cache, A0)
    context = incremental(cache, sid, 1, [(B0, req(5))], forgotten=(A0,))
    assert [k for k, _ in context.partitions] == [B0]
    assert cache.partitions_cached == 1
    # b0 is new to the session: its first answer is news even without records.
    assert serve(cache, context, {B0: ok(10)}) == (sid, (B0,))
    context = incremental(cache, sid, 2, forgotten=(B0,))
    assert context.kind is ContextKind.SESSIONLESS and cache.get(sid) is None
    assert cache.partitions_cached == 0
    assert serve(cache, context, {}) == (INVALID_SESSION_ID, ())


def test_wrong_epoch_unknown_id_and_mixed_topic_ids_are_refused() -> None:
    cache = FetchSessionCache(10, random.Random(1))
    sid = full(cache, A0)
    assert incremental(cache, sid, 2).error is SessionError.EPOCH
    assert incremental(cache, sid + 1, 1).error is SessionError.ID_NOT_FOUND
    assert incremental(cache, sid, 1, topic_ids=True).error is SessionError.TOPIC_ID
    # A refusal changes nothing: the expected epoch still works.
    context = incremental(cache, sid, 1)
    assert context.kind is ContextKind.INCREMENTAL
    assert cache.answered(incremental(cache, sid, 7), {}, now_ms=0) == (INVALID_SESSION_ID, ())
    # The same epoch twice (a resent request) is refused the second time.
    assert incremental(cache, sid, 1).error is SessionError.EPOCH
    assert cache.contexts[ContextKind.ERROR, False] == 4
    assert cache.contexts[ContextKind.ERROR, True] == 1


def test_epoch_minus_one_closes_the_session_and_is_served_sessionless() -> None:
    cache = FetchSessionCache(10, random.Random(1))
    sid = full(cache, A0)
    context = incremental(cache, sid, FINAL_EPOCH, [(A0, req(3))])
    assert context.kind is ContextKind.SESSIONLESS and len(cache) == 0
    assert serve(cache, context, {A0: ok(10)}) == (INVALID_SESSION_ID, (A0,))
    assert incremental(cache, sid, 1).error is SessionError.ID_NOT_FOUND


def test_a_full_fetch_naming_a_session_replaces_it() -> None:
    cache = FetchSessionCache(10, random.Random(1))
    sid = full(cache, A0)
    context = cache.new_context(
        session_id=sid,
        epoch=INITIAL_EPOCH,
        uses_topic_ids=True,
        partitions=[(B0, req(0))],
        now_ms=5,
    )
    assert cache.get(sid) is None
    new_sid, _ = cache.answered(context, {B0: ok(1)}, now_ms=5)
    session = cache.get(new_sid)
    assert session is not None and session.uses_topic_ids and list(session.partitions) == [B0]
    assert cache.partitions_cached == 1


EVICT_MS = 100
"""The tests' ``eviction_ms`` (Kafka's is 120 s)."""


def parts(n: int, topic: str = "t") -> tuple[PartitionKey, ...]:
    return tuple((topic, i) for i in range(n))


def test_a_full_cache_evicts_a_session_unused_for_longer_than_the_eviction_time() -> None:
    """KIP-227: an existing session may be evicted if it "has been inactive for more than
    min.incremental.fetch.session.eviction.ms", whatever its worth."""
    cache = FetchSessionCache(2, random.Random(1), eviction_ms=EVICT_MS)
    first = full(cache, *parts(5), now_ms=1, follower=True)
    second = full(cache, A1, now_ms=2)
    incremental(cache, second, 1, now_ms=60)  # second used since; first not
    third = full(cache, B0, now_ms=102)  # first unused for 101 ms > 100
    assert cache.get(first) is None and cache.get(second) and cache.get(third)
    assert cache.evictions == 1 and cache.partitions_cached == 2
    assert incremental(cache, first, 1).error is SessionError.ID_NOT_FOUND


def test_a_consumer_session_evicts_only_an_older_smaller_consumer_session() -> None:
    """KIP-227: a new session evicts one made more than the eviction time ago and caching
    fewer partitions, the least worth first (fewest partitions); a session made recently,
    or as big, stays, and the new fetch is answered without a session (id 0)."""
    cache = FetchSessionCache(3, random.Random(1), eviction_ms=EVICT_MS)
    small = full(cache, *parts(2, "s"), now_ms=0)
    big = full(cache, *parts(4, "b"), now_ms=0)
    young = full(cache, A0, now_ms=90)
    for sid in (small, big):  # all recently used: none is stale
        incremental(cache, sid, 1, now_ms=150)
    # Made 60 ms ago: the smallest, but too young; the others are bigger than two partitions.
    assert full(cache, *parts(2, "n"), now_ms=150) == INVALID_SESSION_ID
    assert cache.evictions == 0 and len(cache) == 3
    # Three partitions: worth more than `small` (old enough), the least worth of the old ones.
    third = full(cache, *parts(3, "n"), now_ms=151)
    assert third != INVALID_SESSION_ID and cache.get(small) is None
    assert cache.get(big) and cache.get(young) and cache.evictions == 1
    # Now every old session caches at least as many: a same-size session evicts nothing.
    assert full(cache, *parts(3, "m"), now_ms=152) == INVALID_SESSION_ID
    assert cache.partitions_cached == 4 + 1 + 3


def test_a_follower_session_evicts_a_young_consumer_session_but_not_a_young_followers() -> None:
    """KIP-227: a follower's (privileged) session may evict a consumer's even one made
    recently; a consumer's never evicts a follower's while fresher than the eviction time,
    however many partitions it caches, nor a follower's a young follower's."""
    cache = FetchSessionCache(2, random.Random(1), eviction_ms=EVICT_MS)
    consumer = full(cache, *parts(50), now_ms=0)
    leader_a = full(cache, A0, now_ms=1, follower=True)
    # A follower with one partition evicts the young fifty-partition consumer session.
    leader_b = full(cache, B0, now_ms=2, follower=True)
    assert cache.get(consumer) is None and cache.get(leader_a) and cache.get(leader_b)
    # A consumer of 1,000 partitions evicts neither follower session (made 2 ms ago) ...
    assert full(cache, *parts(1000, "c"), now_ms=3) == INVALID_SESSION_ID
    # ... nor does a third follower's.
    assert full(cache, *parts(9, "f"), now_ms=4, follower=True) == INVALID_SESSION_ID
    for sid in (leader_a, leader_b):
        incremental(cache, sid, 1, now_ms=150)
    # Old enough now: a bigger follower session evicts the smaller (lower id among equals).
    assert full(cache, A0, A1, now_ms=151, follower=True) != INVALID_SESSION_ID
    assert len(cache) == 2 and cache.evictions == 2
    survivor = leader_a if cache.get(leader_a) else leader_b
    session = cache.get(survivor)
    assert session is not None and session.privileged
    # A consumer's session, though bigger, never evicts a follower's (unless stale).
    assert full(cache, *parts(1000, "c"), now_ms=152) == INVALID_SESSION_ID


def test_no_slots_no_sessions_and_an_empty_full_fetch_makes_none() -> None:
    assert full(FetchSessionCache(0, random.Random(1)), A0) == INVALID_SESSION_ID
    assert full(FetchSessionCache(5, random.Random(1))) == INVALID_SESSION_ID


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(["full", "inc", "final", "bad-epoch"]),
            st.lists(st.sampled_from([A0, A1, B0]), max_size=3),
            st.lists(st.sampled_from([A0, A1, B0]), max_size=2),
        ),
        max_size=30,
    )
)
def test_the_cached_partition_count_matches_the_sessions(
    steps: list[tuple[str, list[PartitionKey], list[PartitionKey]]],
) -> None:
    """Whatever the requests, the counts a metric reads stay those of the sessions, and the
    epoch a session expects only grows by one per accepted incremental fetch."""
    cache = FetchSessionCache(3, random.Random(7))
    known: list[int] = []
    for now, (kind, named, forgotten) in enumerate(steps):
        session = cache.get(known[-1]) if known else None
        sid = session.id if session else 0
        epoch = {
            "full": INITIAL_EPOCH,
            "final": FINAL_EPOCH,
            "inc": session.epoch if session else 1,
            "bad-epoch": (session.epoch + 1) if session else 3,
        }[kind]
        context = incremental(
            cache, sid, epoch, [(k, req(now)) for k in named], tuple(forgotten), now_ms=now
        )
        new_sid, _ = serve(cache, context, {k: ok(now) for k in (A0, A1, B0)})
        if new_sid:
            known.append(new_sid)
        sessions = [s for s in (cache.get(i) for i in set(known)) if s is not None]
        assert len(sessions) == len(cache) <= 3
        assert cache.partitions_cached == sum(len(s.partitions) for s in sessions)
