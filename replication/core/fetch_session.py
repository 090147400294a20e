"""Incremental fetch sessions (KIP-227): `FetchSessionCache`, after Kafka's ``FetchSession``,
``FetchSessionCache`` and ``FetchManager``.

A consumer that fetches the same partitions again and again need not name them all every time:
its first, *full*, fetch (session epoch 0) creates a session on the broker that remembers each
partition's fetch position and what the broker last told it (high watermark, last stable offset,
log start offset); the answer carries the session's id. Its next fetches are *incremental*
(the id and the epoch the broker expects, 1, 2, ...): they name only the partitions whose fetch
position changed or that are new, and forget others (``forgotten_topics_data``); the broker
fetches every partition of the session and answers only those with news: records, a changed
high watermark, last stable offset or log start offset, an error, a preferred read replica.

How a request is taken (`FetchSessionCache.new_context`, Kafka's ``FetchManager.newContext``):

=================================  =============================================================
epoch 0 (full)                     any session named is closed; the partitions are fetched and,
                                   if a slot is free or one may be evicted (below; no slot at
                                   all with 0 slots), a session is made of them (`answered`
                                   gives its id, else 0). The whole answer.
epoch -1 (final)                   the session named, if any, is closed; a sessionless fetch of
                                   the request's partitions (id 0: a client without sessions).
epoch > 0, unknown id              FETCH_SESSION_ID_NOT_FOUND (`SessionError.ID_NOT_FOUND`).
epoch > 0, another epoch expected  INVALID_FETCH_SESSION_EPOCH (`SessionError.EPOCH`).
epoch > 0, ids and names mixed     FETCH_SESSION_TOPIC_ID_ERROR (`SessionError.TOPIC_ID`): a
                                   session made with topic ids (Fetch v13+, KIP-516) continues
                                   with them, one made with names with names.
epoch > 0                          the partitions named are added or updated, the forgotten ones
                                   removed; every partition of the session is fetched, and the
                                   answer holds those with news, which move to the back of the
                                   session's order (so ``max_bytes`` serves every partition in
                                   turn). A session left empty is closed: a sessionless answer.
=================================  =============================================================

A partition is keyed by ``(topic, partition)``, ``topic`` being the topic id (a session with
topic ids) or the name. The cache does no I/O and reads no clock: the caller passes ``now_ms``
(the sessions' last use, for eviction and for the record) and the generator session ids are
drawn from (Kafka draws them at random, so a client that talks to a restarted broker does not
find somebody else's session under its old id). The caller fetches between `new_context` and
`answered`; a session closed or evicted in between still answers that fetch, and the next
request with its id gets FETCH_SESSION_ID_NOT_FOUND.

*Eviction* (KIP-227, Kafka's ``FetchSessionCacheShard.tryEvict``). When every slot is taken, a
new session may take the slot of an existing one:

1. the least recently used session, if unused for more than ``eviction_ms`` (KIP-227's
   ``min.incremental.fetch.session.eviction.ms``, a constant of 120 s in Kafka): it is stale;
2. else the least valuable session the new one may evict, if the new one is worth more. Worth
   is ``(privileged, size)``: a follower's session (privileged) is worth more than any
   consumer's, then the one caching more partitions; among equals the lower id goes first. A
   consumer's new session may evict only sessions made more than ``eviction_ms`` ago; a
   follower's may also evict a younger consumer session. A session is never evicted by one
   worth the same or less.

Otherwise no session is made: the fetch is answered whole with session id 0, and the client
fetches without a session. (Kafka also splits its cache into 8 shards, each evicting among
its own sessions; one cache here.)
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final, Protocol, final


class SessionIds(Protocol):
    """Where session ids are drawn from: the caller's generator (a `random.Random`), so the
    core makes no randomness of its own."""

    def randint(self, a: int, b: int) -> int: ...


INVALID_SESSION_ID: Final = 0
"""The id of no session (a sessionless answer)."""
INITIAL_EPOCH: Final = 0
"""A full fetch that asks for a new session."""
FINAL_EPOCH: Final = -1
"""A full fetch that closes its session, or a client without sessions."""
EVICTION_MS: Final = 120_000
"""How long a session is safe from eviction by a consumer's (after it was made) and from
eviction as stale (after it was last used): Kafka's ``MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS``
(KIP-227's ``min.incremental.fetch.session.eviction.ms``)."""
_INT32_MAX: Final = 2**31 - 1

PartitionKey = tuple[str, int]
"""``(topic id or name, partition)``."""


class SessionError(enum.Enum):
    """Why a request is refused (the adapter answers Kafka's code)."""

    ID_NOT_FOUND = "FETCH_SESSION_ID_NOT_FOUND"
    EPOCH = "INVALID_FETCH_SESSION_EPOCH"
    TOPIC_ID = "FETCH_SESSION_TOPIC_ID_ERROR"


class ContextKind(enum.Enum):
    ERROR = "error"
    SESSIONLESS = "sessionless"
    FULL = "full"
    INCREMENTAL = "incremental"


@dataclass(frozen=True, slots=True)
class PartitionRequest:
    """What a consumer asks of one partition (a follower's fields are not cached: replicas
    fetch over gRPC, without sessions)."""

    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class PartitionAnswer:
    """What the broker answered for one partition: what a session compares."""

    error: bool = False
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    has_records: bool = False
    must_answer: bool = False
    """News of another kind (a preferred read replica, a diverging epoch)."""


@dataclass(slots=True)
class _Cached:
    request: PartitionRequest
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1

    def update(self, answer: PartitionAnswer) -> bool:
        """Remember ``answer``; whether it has news for the client (Kafka's
        ``CachedPartition.maybeUpdateResponseData``)."""
        news = answer.has_records or answer.must_answer
        if answer.error:
            # The error is always sent; forget the high watermark so the partition is sent
            # again once the error is gone.
            self.high_watermark = -1
            return True
        seen = (self.high_watermark, self.last_stable_offset, self.log_start_offset)
        now = (answer.high_watermark, answer.last_stable_offset, answer.log_start_offset)
        if seen != now:
            self.high_watermark, self.last_stable_offset, self.log_start_offset = now
            news = True
        return news


@final
class FetchSession:
    """One client's session: its partitions in fetch order, and the epoch it must send next."""

    def __init__(
        self, session_id: int, uses_topic_ids: bool, now_ms: int, privileged: bool = False
    ) -> None:
        self.id = session_id
        self.uses_topic_ids = uses_topic_ids
        self.privileged = privileged
        """A follower's session (KIP-227): worth more than any consumer's."""
        self.epoch = 1
        """The epoch of the next request."""
        self.created_ms = now_ms
        self.last_used_ms = now_ms
        self.partitions: OrderedDict[PartitionKey, _Cached] = OrderedDict()

    def fetch_list(self) -> tuple[tuple[PartitionKey, PartitionRequest], ...]:
        return tuple((key, cached.request) for key, cached in self.partitions.items())

    def worth(self) -> tuple[bool, int, int]:
        """Kafka's ``EvictableKey``: the least worth is evicted first."""
        return self.privileged, len(self.partitions), self.id


@dataclass(frozen=True, slots=True)
class FetchContext:
    """How to serve one Fetch: which partitions to fetch, then `FetchSessionCache.answered`."""

    kind: ContextKind
    partitions: tuple[tuple[PartitionKey, PartitionRequest], ...] = ()
    """What to fetch, in this order."""
    error: SessionError | None = None
    uses_topic_ids: bool = False
    session: FetchSession | None = field(default=None, repr=False)
    privileged: bool = False
    """A follower's fetch: the session it makes is privileged (KIP-227)."""


@final
class FetchSessionCache:
    """The broker's fetch sessions, at most ``max_slots``
    (``max.incremental.fetch.session.cache.slots``); ``eviction_ms``: see the module doc."""

    def __init__(self, max_slots: int, rng: SessionIds, eviction_ms: int = EVICTION_MS) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._rng = rng
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        """By id, least recently used first."""
        self.partitions_cached = 0
        """Partitions over every session (Kafka's ``NumIncrementalFetchPartitionsCached``)."""
        self.evictions = 0
        """Sessions evicted to make room (``IncrementalFetchSessionEvictionsPerSec``)."""
        self.contexts: dict[tuple[ContextKind, bool], int] = {}
        """Requests served, by kind and whether they named topics by id."""

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def new_context(
        self,
        *,
        session_id: int,
        epoch: int,
        uses_topic_ids: bool,
        partitions: Sequence[tuple[PartitionKey, PartitionRequest]],
        forgotten: Iterable[PartitionKey] = (),
        now_ms: int,
        privileged: bool = False,
    ) -> FetchContext:
        """How to serve a Fetch of ``partitions`` (what the request names, in its order);
        ``privileged``: a follower's fetch (KIP-227)."""
        context = self._context(session_id, epoch, uses_topic_ids, partitions, forgotten, now_ms)
        if privileged and context.kind is ContextKind.FULL:
            context = replace(context, privileged=True)
        counted = (context.kind, uses_topic_ids)
        self.contexts[counted] = self.contexts.get(counted, 0) + 1
        return context

    def _context(
        self,
        session_id: int,
        epoch: int,
        uses_topic_ids: bool,
        partitions: Sequence[tuple[PartitionKey, PartitionRequest]],
        forgotten: Iterable[PartitionKey],
        now_ms: int,
    ) -> FetchContext:
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self._remove(session_id)
            kind = ContextKind.FULL if epoch == INITIAL_EPOCH else ContextKind.SESSIONLESS
            return FetchContext(kind, tuple(dict(partitions).items()), None, uses_topic_ids)
        session = self._sessions.get(session_id)
        if session is None:
            return FetchContext(ContextKind.ERROR, error=SessionError.ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext(ContextKind.ERROR, error=SessionError.EPOCH)
        if session.uses_topic_ids != uses_topic_ids:
            return FetchContext(ContextKind.ERROR, error=SessionError.TOPIC_ID)
        before = len(session.partitions)
        for key, request in partitions:
            cached = session.partitions.get(key)
            if cached is None:
                session.partitions[key] = _Cached(request)
            else:
                cached.request = request
        for key in forgotten:
            session.partitions.pop(key, None)
        self.partitions_cached += len(session.partitions) - before
        if not session.partitions:
            self._remove(session_id)
            return FetchContext(ContextKind.SESSIONLESS, tuple(dict(partitions).items()))
        session.epoch = 1 if session.epoch == _INT32_MAX else session.epoch + 1
        session.last_used_ms = now_ms
        self._sessions.move_to_end(session_id)
        return FetchContext(
            ContextKind.INCREMENTAL, session.fetch_list(), None, uses_topic_ids, session
        )

    def answered(
        self,
        context: FetchContext,
        answers: Mapping[PartitionKey, PartitionAnswer],
        now_ms: int,
    ) -> tuple[int, tuple[PartitionKey, ...]]:
        """After the fetch of ``context.partitions``: the session id to answer with, and the
        partitions the answer holds, in order. A full fetch makes its session here."""
        match context.kind:
            case ContextKind.ERROR:
                return INVALID_SESSION_ID, ()
            case ContextKind.SESSIONLESS:
                return INVALID_SESSION_ID, tuple(key for key, _ in context.partitions)
            case ContextKind.FULL:
                keys = tuple(key for key, _ in context.partitions)
                made = self._create(context, answers, now_ms)
                return (INVALID_SESSION_ID if made is None else made.id), keys
        session = context.session
        assert session is not None
        news = []
        for key, _ in context.partitions:
            cached = session.partitions.get(key)
            answer = answers.get(key)
            if cached is None or answer is None:
                continue  # forgotten by a later request meanwhile, or not fetched
            if cached.update(answer):
                news.append(key)
        for key in news:  # answered ones go to the back: the others are read first next time
            session.partitions.move_to_end(key)
        return session.id, tuple(news)

    def _create(
        self,
        context: FetchContext,
        answers: Mapping[PartitionKey, PartitionAnswer],
        now_ms: int,
    ) -> FetchSession | None:
        if not context.partitions or self.max_slots <= 0:
            return None
        while len(self._sessions) >= self.max_slots:  # (more than once: the slots shrank)
            evicted = self._evictable(context.privileged, len(context.partitions), now_ms)
            if evicted is None:
                return None
            self._remove(evicted)
            self.evictions += 1
        session_id = INVALID_SESSION_ID
        while session_id == INVALID_SESSION_ID or session_id in self._sessions:
            session_id = self._rng.randint(1, _INT32_MAX)
        session = FetchSession(session_id, context.uses_topic_ids, now_ms, context.privileged)
        for key, request in context.partitions:
            cached = _Cached(request)
            answer = answers.get(key)
            if answer is not None:
                cached.update(answer)
            session.partitions[key] = cached
        self._sessions[session_id] = session
        self.partitions_cached += len(session.partitions)
        return session

    def _evictable(self, privileged: bool, size: int, now_ms: int) -> int | None:
        """The session a new one (a follower's if ``privileged``, caching ``size``
        partitions) may evict, or None (the module doc's rules)."""
        least_recent = next(iter(self._sessions.values()), None)
        if least_recent is None:
            return None
        if now_ms - least_recent.last_used_ms > self.eviction_ms:
            return least_recent.id  # stale
        candidates = [
            s
            for s in self._sessions.values()
            if now_ms - s.created_ms > self.eviction_ms or (privileged and not s.privileged)
        ]
        if not candidates:
            return None
        least = min(candidates, key=FetchSession.worth)
        # Kafka compares (privileged, size, 0) with the candidate's (privileged, size, id >= 1):
        # the new session must be worth strictly more.
        if (privileged, size) <= (least.privileged, len(least.partitions)):
            return None
        return least.id

    def close(self, session_id: int) -> None:
        """Forget session ``session_id`` (if there is one)."""
        self._remove(session_id)

    def _remove(self, session_id: int) -> None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            self.partitions_cached -= len(session.partitions)


__all__ = [
    "EVICTION_MS",
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "INVALID_SESSION_ID",
    "ContextKind",
    "FetchContext",
    "FetchSession",
    "FetchSessionCache",
    "PartitionAnswer",
    "PartitionKey",
    "PartitionRequest",
    "SessionError",
]
