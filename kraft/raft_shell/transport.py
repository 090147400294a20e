"""The seam between a Raft driver and the network: `Transport`, and `InMemoryNetwork`.

A transport carries the messages of many Raft groups between nodes. A driver registers its
group with an `Inbox` (the transport delivers that group's inbound messages to it) and sends
with the group's name; the transport routes every inbound message to the inbox registered
for its group and drops messages of groups nobody here hosts. The metadata quorum is the
group `METADATA_GROUP`. A transport never retries a lost message: the core's timeouts do.

`GrpcRaftTransport` (``kraft.raft_shell.grpc_transport``) is the real one: one gRPC stream
per peer pair for all groups. `InMemoryNetwork` hands out transports for nodes in one event
loop, for tests: delivery is asynchronous (``call_soon``), in order, and a node can be cut
off from the others.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Protocol

from kraft.raft.messages import RaftMessage
from kraft.transport.codec import METADATA_GROUP
from kraft.types import NodeId


class Inbox(Protocol):
    """Where a transport delivers one group's inbound messages (a driver)."""

    def deliver(self, msg: RaftMessage) -> None: ...

    def peer_lost(self, peer: NodeId) -> None:
        """``peer``'s host closed our connection to it: its process exited (not a network
        that drops packets, which closes nothing)."""


class Transport(Protocol):
    """Sends Raft messages to peers and delivers inbound ones, per group."""

    def register(self, group: str, inbox: Inbox) -> None:
        """Deliver ``group``'s inbound messages to ``inbox`` from now on.

        Raises:
            ValueError: another inbox holds ``group``.
        """

    def unregister(self, group: str) -> None:
        """Stop delivering ``group``'s messages (they are dropped from now on)."""

    def send(self, group: str, msg: RaftMessage) -> None:
        """Send ``msg`` of ``group`` to ``msg.destination``; best effort, never blocks."""


class InMemoryNetwork:
    """Transports for nodes in one event loop: what tests run drivers over."""

    def __init__(self) -> None:
        self._nodes: dict[NodeId, InMemoryTransport] = {}
        self._isolated: set[NodeId] = set()
        self.delivered: Counter[str] = Counter()
        """Messages delivered, per group."""

    def transport(self, node_id: int) -> InMemoryTransport:
        """The transport of node ``node_id`` (one per node, made on first use)."""
        nid = NodeId(node_id)
        transport = self._nodes.get(nid)
        if transport is None:
            transport = self._nodes[nid] = InMemoryTransport(self, nid)
        return transport

    def isolate(self, node_id: int) -> None:
        """Drop every message to or from ``node_id`` until `heal`."""
        self._isolated.add(NodeId(node_id))

    def heal(self, node_id: int | None = None) -> None:
        """Reconnect ``node_id`` (every node if None)."""
        if node_id is None:
            self._isolated.clear()
        else:
            self._isolated.discard(NodeId(node_id))

    def _carry(self, source: NodeId, group: str, msg: RaftMessage) -> None:
        target = self._nodes.get(msg.destination)
        if target is None or source in self._isolated or msg.destination in self._isolated:
            return
        asyncio.get_running_loop().call_soon(self._arrive, source, target, group, msg)

    def _arrive(
        self, source: NodeId, target: InMemoryTransport, group: str, msg: RaftMessage
    ) -> None:
        if source in self._isolated or target.node_id in self._isolated:
            return  # cut off while in flight
        inbox = target.inboxes.get(group)
        if inbox is not None:
            self.delivered[group] += 1
            inbox.deliver(msg)


class InMemoryTransport:
    """One node's `Transport` on an `InMemoryNetwork`."""

    def __init__(self, network: InMemoryNetwork, node_id: NodeId) -> None:
        self._network = network
        self.node_id = node_id
        self.inboxes: dict[str, Inbox] = {}

    def register(self, group: str, inbox: Inbox) -> None:
        if group in self.inboxes:
            raise ValueError(f"group {group[:60]!r} is already registered on node {self.node_id}")
        self.inboxes[group] = inbox

    def unregister(self, group: str) -> None:
        self.inboxes.pop(group, None)

    def send(self, group: str, msg: RaftMessage) -> None:
        self._network._carry(self.node_id, group, msg)


__all__ = ["METADATA_GROUP", "InMemoryNetwork", "InMemoryTransport", "Inbox", "Transport"]
