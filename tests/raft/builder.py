"""`RaftNodeBuilder` (after Kafka's ``RaftClientTestContext.Builder``) and `RaftTestContext`.

The context drives one `RaftNode` by hand: it plays the shell (persists each `Ready` to a
`SimDisk`, syncs, collects the messages instead of sending them) and the peers (tests build
their requests and responses).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, TypeVar

import structlog

from kraft.raft import (
    BeginQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    HardState,
    RaftConfig,
    RaftMessage,
    RaftNode,
    Ready,
    UnsafeOptions,
    VoteRequest,
    VoteResponse,
)
from kraft.sim import SimDisk
from kraft.types import Epoch, NodeId, Offset
from storage.records import build_batch

M = TypeVar("M", bound=RaftMessage)

QUIET = structlog.wrap_logger(
    structlog.PrintLogger(), wrapper_class=structlog.make_filtering_bound_logger(50)
)


def batch(epoch: int, base_offset: int, count: int = 1, value: bytes = b"x") -> bytes:
    return build_batch(
        [value] * count, timestamp_ms=0, base_offset=base_offset, partition_leader_epoch=epoch
    )


@dataclass
class RaftTestContext:
    node: RaftNode
    disk: SimDisk
    config: RaftConfig
    now_ms: int = 0
    sent: list[RaftMessage] = field(default_factory=list)
    committed: list[bytes] = field(default_factory=list)
    readies: list[Ready] = field(default_factory=list)

    @property
    def id(self) -> NodeId:
        return self.node.node_id

    # --- driving ------------------------------------------------------------------------------

    def step(self, msg: RaftMessage) -> list[RaftMessage]:
        self.node.step(msg, self.now_ms)
        return self.drain()

    def tick(self, ms: int = 0) -> list[RaftMessage]:
        self.now_ms += ms
        self.node.tick(self.now_ms)
        return self.drain()

    def tick_until(self, predicate: Any, *, limit_ms: int = 10_000) -> list[RaftMessage]:
        out: list[RaftMessage] = []
        start = self.now_ms
        while not predicate():
            assert self.now_ms - start < limit_ms, "condition never became true"
            self.now_ms = max(self.now_ms + 1, self.node.next_deadline_ms())
            self.node.tick(self.now_ms)
            out += self.drain()
        return out

    def drain(self) -> list[RaftMessage]:
        """Run the Ready loop to quiescence; returns the messages 'sent'."""
        out: list[RaftMessage] = []
        while self.node.has_ready():
            rd = self.node.ready()
            self.readies.append(rd)
            self.disk.write_ready(rd)
            if rd.must_sync:
                self.disk.sync()
            out += rd.early_messages + rd.messages
            self.committed += rd.committed
            if rd.delete_log_before is not None:
                self.disk.delete_before(rd.delete_log_before)
            self.node.advance(rd)
        self.sent += out
        return out

    def restart(self, *, seed: int = 1, voters: frozenset[NodeId] | None = None) -> None:
        """Crash (losing unsynced writes) and start again from the disk (``voters``: the
        configured set, default the one in use)."""
        self.disk.crash()
        self.node = RaftNode(
            self.id,
            voters=self.node.voters if voters is None else voters,
            dynamic_voters=self.node.dynamic_voters,
            config=self.config,
            log=self.disk,
            persisted_state=self.disk.hard_state,
            rng=random.Random(seed),
            now_ms=self.now_ms,
            logger=QUIET,
        )

    # --- peers --------------------------------------------------------------------------------

    def vote_request(
        self,
        source: int,
        epoch: int,
        *,
        last_epoch: int = 0,
        end_offset: int = 0,
        pre_vote: bool = False,
    ) -> VoteRequest:
        return VoteRequest(
            source=NodeId(source),
            destination=self.id,
            epoch=Epoch(epoch),
            correlation_id=7,
            last_epoch=Epoch(last_epoch),
            last_epoch_end_offset=Offset(end_offset),
            pre_vote=pre_vote,
        )

    def vote_response(
        self,
        source: int,
        epoch: int,
        *,
        granted: bool = True,
        pre_vote: bool = False,
        leader: int | None = None,
    ) -> VoteResponse:
        return VoteResponse(
            source=NodeId(source),
            destination=self.id,
            epoch=Epoch(epoch),
            vote_granted=granted,
            pre_vote=pre_vote,
            leader_id=None if leader is None else NodeId(leader),
        )

    def fetch_request(
        self,
        source: int,
        *,
        epoch: int,
        offset: int,
        last_epoch: int,
        high_watermark: int = -1,
        max_wait_ms: int = 0,
    ) -> FetchRequest:
        return FetchRequest(
            source=NodeId(source),
            destination=self.id,
            epoch=Epoch(epoch),
            correlation_id=100 + source,
            fetch_offset=Offset(offset),
            last_fetched_epoch=Epoch(last_epoch),
            high_watermark=Offset(high_watermark),
            max_wait_ms=max_wait_ms,
        )

    def begin_quorum_epoch(self, leader: int, epoch: int) -> BeginQuorumEpochRequest:
        return BeginQuorumEpochRequest(
            source=NodeId(leader), destination=self.id, epoch=Epoch(epoch), leader_id=NodeId(leader)
        )

    def fetch_response_to(self, req: FetchRequest, **fields: Any) -> FetchResponse:
        fields.setdefault("leader_id", req.destination)
        return FetchResponse(
            source=req.destination,
            destination=self.id,
            epoch=req.epoch,
            correlation_id=req.correlation_id,
            **fields,
        )

    # --- elections ----------------------------------------------------------------------------

    def become_leader(self) -> None:
        """Win a pre-vote and a vote with every other voter's grant."""
        self.tick_until(lambda: self.node.role_name == "prospective")
        epoch = self.node.epoch
        for v in sorted(self.node.voters - {self.id}):
            self.step(self.vote_response(v, epoch, pre_vote=True))
            if self.node.role_name != "prospective":
                break
        for v in sorted(self.node.voters - {self.id}):
            if self.node.is_leader:
                break
            self.step(self.vote_response(v, self.node.epoch))
        assert self.node.is_leader

    @staticmethod
    def only(messages: list[RaftMessage], kind: type[M]) -> list[M]:
        return [m for m in messages if isinstance(m, kind)]


@dataclass
class RaftNodeBuilder:
    local_id: int = 1
    voters: frozenset[int] | set[int] = frozenset({1, 2, 3})
    seed: int = 0
    config: RaftConfig = field(default_factory=RaftConfig)
    _hard_state: HardState = field(default_factory=HardState)
    _batches: list[bytes] = field(default_factory=list)
    _unsafe: UnsafeOptions | None = None
    dynamic_voters: bool = False

    def with_config(self, **overrides: Any) -> RaftNodeBuilder:
        self.config = RaftConfig(**overrides)
        return self

    def with_elected_leader(self, *, epoch: int, leader: int) -> RaftNodeBuilder:
        voted = NodeId(leader) if leader == self.local_id else None
        self._hard_state = HardState(epoch=Epoch(epoch), voted_for=voted, leader_id=NodeId(leader))
        return self

    def with_unknown_leader(self, *, epoch: int) -> RaftNodeBuilder:
        self._hard_state = HardState(epoch=Epoch(epoch))
        return self

    def with_voted_candidate(self, *, epoch: int, candidate: int) -> RaftNodeBuilder:
        self._hard_state = HardState(epoch=Epoch(epoch), voted_for=NodeId(candidate))
        return self

    def with_log(self, *epochs: tuple[int, int]) -> RaftNodeBuilder:
        """Batches of one record each: ``(epoch, count)`` pairs, in log order."""
        offset = sum(1 for _ in self._batches)
        for epoch, count in epochs:
            for _ in range(count):
                self._batches.append(batch(epoch, offset))
                offset += 1
        return self

    def with_unsafe(self, unsafe: UnsafeOptions) -> RaftNodeBuilder:
        self._unsafe = unsafe
        return self

    def build(self) -> RaftTestContext:
        disk = SimDisk()
        disk.write_ready(Ready(hard_state=self._hard_state, entries=tuple(self._batches)))
        disk.sync()
        node = RaftNode(
            NodeId(self.local_id),
            voters=frozenset(NodeId(v) for v in self.voters),
            config=self.config,
            log=disk,
            persisted_state=disk.hard_state,
            rng=random.Random(self.seed),
            now_ms=0,
            logger=QUIET,
            unsafe=self._unsafe,
            dynamic_voters=self.dynamic_voters,
        )
        ctx = RaftTestContext(node=node, disk=disk, config=self.config)
        ctx.drain()
        return ctx
