"""A minimal shell for the pure group coordinator: every write's records are committed
(appended to an in-memory log) and replayed at once, as the broker does after acks=all."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from replication.group import (
    GroupConfig,
    GroupCoordinator,
    HeartbeatRequest,
    HeartbeatResponse,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    Record,
    TopicInfo,
    TopicPartitions,
)


def topics(**counts: int) -> dict[str, TopicInfo]:
    return {n: TopicInfo(topic_id=f"id-{n}", name=n, partitions=c) for n, c in counts.items()}


def owned(assignment: Sequence[TopicPartitions] | None) -> set[tuple[str, int]]:
    return {(tp.topic_id, p) for tp in assignment or () for p in tp.partitions}


def as_tps(parts: set[tuple[str, int]]) -> tuple[TopicPartitions, ...]:
    by: dict[str, list[int]] = {}
    for t, p in sorted(parts):
        by.setdefault(t, []).append(p)
    return tuple(TopicPartitions(topic_id=t, partitions=tuple(ps)) for t, ps in by.items())


class Shell:
    def __init__(self, config: GroupConfig | None = None, **topic_counts: int) -> None:
        self.config = config or GroupConfig()
        self.coord = GroupCoordinator(self.config)
        self.log: list[Record] = []
        self.topics: Mapping[str, TopicInfo] = topics(**topic_counts)
        self.now = 1_000

    def commit(self, records: list[Record]) -> None:
        for key, value in records:
            self.log.append((key, value))
            self.coord.replay(key, value)

    def hb(
        self,
        member_id: str,
        epoch: int,
        *,
        group: str = "g",
        subscribe: Sequence[str] | None = None,
        owned_parts: set[tuple[str, int]] | None = None,
        assignor: str | None = None,
        rebalance_timeout_ms: int = -1,
    ) -> HeartbeatResponse:
        req = HeartbeatRequest(
            group_id=group,
            member_id=member_id,
            member_epoch=epoch,
            rebalance_timeout_ms=rebalance_timeout_ms,
            subscribed_topic_names=tuple(subscribe) if subscribe is not None else None,
            server_assignor=assignor,
            topic_partitions=None if owned_parts is None else as_tps(owned_parts),
            client_id=f"client-{member_id}",
            client_host="/127.0.0.1",
        )
        result = self.coord.heartbeat(req, self.topics, self.now)
        self.commit(result.records)
        return result.response

    def offset_commit(
        self,
        member_id: str,
        epoch: int,
        offsets: Mapping[tuple[str, int], int],
        group: str = "g",
        *,
        before_v9: bool = False,
    ) -> OffsetCommitResponse:
        req = OffsetCommitRequest(
            group_id=group,
            member_id=member_id,
            member_epoch=epoch,
            before_v9=before_v9,
            partitions=tuple(
                OffsetCommitPartition(topic=t, partition=p, offset=o)
                for (t, p), o in sorted(offsets.items())
            ),
        )
        result = self.coord.commit_offsets(req, self.now)
        self.commit(result.records)
        return result.response

    def tick(self, advance_ms: int = 0) -> list[Record]:
        self.now += advance_ms
        records = self.coord.tick(self.now, self.topics)
        self.commit(records)
        return records

    def replayed(self) -> GroupCoordinator:
        """A fresh coordinator rebuilt from the log alone (a failover)."""
        fresh = GroupCoordinator(self.config)
        for key, value in self.log:
            fresh.replay(key, value)
        return fresh


class Member:
    """A well-behaved KIP-848 member: it owns exactly what its last response assigned, and
    reports it on every heartbeat."""

    def __init__(
        self, shell: Shell, member_id: str, subscribe: Sequence[str], group: str = "g", **kw: object
    ) -> None:
        self.group = group
        self.shell = shell
        self.member_id = member_id
        self.subscribe = list(subscribe)
        self.epoch = 0
        self.owned: set[tuple[str, int]] = set()
        self.kw = kw
        self.last: HeartbeatResponse | None = None

    def heartbeat(self) -> HeartbeatResponse:
        r = self.shell.hb(
            self.member_id,
            self.epoch,
            group=self.group,
            subscribe=self.subscribe,
            owned_parts=self.owned,
            **self.kw,  # type: ignore[arg-type]
        )
        self.last = r
        if r.error_code == 0:
            self.epoch = r.member_epoch
            if r.assignment is not None:
                self.owned = owned(r.assignment)
        return r

    def leave(self) -> HeartbeatResponse:
        r = self.shell.hb(self.member_id, -1, group=self.group)
        self.owned = set()
        return r
