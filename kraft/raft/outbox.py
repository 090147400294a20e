"""`Outbox`: the messages `RaftNode` has to send with its next `Ready`, and their ids.

Messages wait here until `RaftNode.ready` takes them. Most go in ``messages``, which the
shell sends only after it has synced the `Ready` carrying them (a vote grant, a candidate's
vote request and a follower's fetch offset depend on that state). A leader's fetch responses
go in ``early_messages`` instead: Raft thesis §10.2.1 lets a leader replicate entries before
its own write is durable, because the high watermark counts its own log only once synced.
"""

from __future__ import annotations

from typing import final

from kraft.raft.messages import FetchResponse, RaftMessage
from kraft.raft.quorum_state import QuorumState
from kraft.raft.roles import Leader


@final
class Outbox:
    """Outgoing messages and the correlation id counter; reads the role, never changes it."""

    __slots__ = ("_next_correlation_id", "_quorum", "early_messages", "messages")

    def __init__(self, quorum: QuorumState, *, first_correlation_id: int) -> None:
        self._quorum = quorum
        self._next_correlation_id = first_correlation_id
        self.messages: list[RaftMessage] = []
        self.early_messages: list[RaftMessage] = []

    def __bool__(self) -> bool:
        return bool(self.messages or self.early_messages)

    def correlation_id(self) -> int:
        """A fresh id for a request (responses echo the request's)."""
        self._next_correlation_id += 1
        return self._next_correlation_id

    def send(self, msg: RaftMessage) -> None:
        if isinstance(msg, FetchResponse) and isinstance(self._quorum.role, Leader):
            self.early_messages.append(msg)
        else:
            self.messages.append(msg)

    def take(self) -> tuple[tuple[RaftMessage, ...], tuple[RaftMessage, ...]]:
        """Empty the outbox: ``(messages, early_messages)``."""
        taken = (tuple(self.messages), tuple(self.early_messages))
        self.messages = []
        self.early_messages = []
        return taken


__all__ = ["Outbox"]
