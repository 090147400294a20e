"""The DescribeQuorum view of a node (Kafka's ``kafka-metadata-quorum describe``)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from kraft.raft import Leader, RaftNode


@dataclass(frozen=True, slots=True)
class VoterStatus:
    node_id: int
    log_end_offset: int
    lag: int
    last_fetch_ms_ago: int | None
    is_voter: bool


@dataclass(frozen=True, slots=True)
class QuorumStatus:
    node_id: int
    leader_id: int | None
    epoch: int
    high_watermark: int
    log_end_offset: int
    role: str
    replicas: tuple[VoterStatus, ...]


def describe_quorum(node: RaftNode, voters: Collection[int], now_ms: int) -> QuorumStatus:
    """The quorum as ``node`` sees it; per-replica progress (the leader first) only on the
    leader, as in Kafka's DescribeQuorum."""
    role = node.role
    replicas: list[VoterStatus] = []
    log_end_offset = int(node.log_end_offset)
    if isinstance(role, Leader):
        replicas.append(
            VoterStatus(
                node_id=node.node_id,
                log_end_offset=log_end_offset,
                lag=0,
                last_fetch_ms_ago=0,
                is_voter=node.node_id in voters,  # KIP-853: a leader being removed is not
            )
        )
        for replica_id, state in sorted(role.replicas.items()):
            if replica_id == node.node_id:
                continue
            end = state.end_offset
            replicas.append(
                VoterStatus(
                    node_id=replica_id,
                    log_end_offset=end,
                    lag=max(0, log_end_offset - max(end, 0)),
                    last_fetch_ms_ago=None
                    if state.last_fetch_ms < 0
                    else now_ms - state.last_fetch_ms,
                    is_voter=replica_id in voters,
                )
            )
    return QuorumStatus(
        node_id=node.node_id,
        leader_id=node.leader_id,
        epoch=int(node.epoch),
        high_watermark=int(node.high_watermark),
        log_end_offset=log_end_offset,
        role=node.role_name,
        replicas=tuple(replicas),
    )


__all__ = ["QuorumStatus", "VoterStatus", "describe_quorum"]
