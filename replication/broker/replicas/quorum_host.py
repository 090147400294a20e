"""`QuorumHost`: the Raft groups of this broker's quorum-mode replicas (issue #12).

Theory of operation
-------------------
A topic created with ``replication.mode=quorum`` has one Raft group per partition, whose voters
are the partition's replicas (`kraft.controller.quorum_partitions`). On a broker:

- **One transport for every group.** A `GrpcRaftTransport` is served on the broker's own gRPC
  port (the ``Raft`` service next to ``Broker``), so the Raft messages of all the partition
  groups two brokers share travel on one stream per peer pair, each envelope naming its group
  (`quorum_group`: ``<topic id>:<partition>``). The metadata quorum is not on it: the broker
  observes that through its `RaftServer`, as before.
- **Peers from the metadata image.** A peer's address is its registered listener
  (`update_addresses`, after every metadata change); a broker that re-registers elsewhere gets
  a fresh channel.
- **Admission.** Each partition group admits messages from the partition's replicas only
  (`GrpcRaftTransport.register` with ``members``; `set_members` after a reassignment): the
  voter-only rule of `kraft.raft.admission` (issue 10), applied per group before the core.
- **Leader reports.** When a replica's group elects it (`DriverEvents.quorum_leader_elected`),
  `report_leader` sends the active controller an AlterPartition whose partition entry has
  ``elected_by_vote`` and the won epoch; the controller records leader and epoch in the metadata
  log, so Metadata and ``kraft topics describe`` show them. A report is retried with backoff
  while the replica still leads that epoch, on any answer but success, FENCED_LEADER_EPOCH (a
  newer leader is recorded) and INVALID_REQUEST (not a quorum partition): a replica may win
  before its broker is unfenced (INELIGIBLE_REPLICA), or while no controller is active.

`PartitionReplica` does the rest for one replica: it registers its group here, feeds inbound
messages to the driver (`PartitionDriver.handle_raft_message`), sends what the driver emits,
and drives the driver's timers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

import grpc
import structlog

from kraft.controller.messages import (
    AlterPartitionData,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopic,
)
from kraft.metadata import MetadataImage
from kraft.raft import RaftConfig
from kraft.raft.messages import RaftMessage
from kraft.raft_shell.grpc_transport import GrpcRaftTransport
from kraft.raft_shell.transport import Inbox
from kraft.security.tls import TlsConfig
from kraft.types import Epoch, NodeId, TopicPartition
from storage.errors import ErrorCode, KraftError

SendToController = Callable[[AlterPartitionRequest], Awaitable[AlterPartitionResponse]]

REPORT_BACKOFF_MS = 100
"""The first wait before a leader report is sent again; it doubles up to `REPORT_BACKOFF_MAX_MS`."""
REPORT_BACKOFF_MAX_MS = 2000

_FINAL = frozenset({ErrorCode.NONE, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_REQUEST})
"""Answers after which a leader report is not sent again."""

_log = structlog.get_logger("replication.broker.quorum")


class ReportingReplica(Protocol):
    """What `report_leader` needs of a replica: who it is and whether it still leads."""

    topic_partition: TopicPartition
    topic_id: str

    def leads_epoch(self, leader_epoch: int) -> bool: ...


class QuorumHost:
    """This broker's end of its quorum-mode partitions' Raft groups.

    Args:
        node_id: this broker.
        server: the broker's gRPC server (before it starts): the Raft service joins it.
        send_to_controller: sends an AlterPartition to the active controller (raises
            `KraftError` when it cannot).
        broker_epoch: this broker's registered epoch now (None before it registered).
        raft_config: every partition group's Raft timeouts (``quorum.partition.*``,
            `BrokerNodeConfig.partition_raft_config`). NB: slower than the metadata quorum's
            (150/250 ms) by default: a broker runs many groups, and on a loaded machine the
            metadata quorum's timeouts made partition groups re-elect every few hundred ms
            under a produce load (40 epochs in 30 s, idempotent batches then arriving out of
            order at each new leader). Kafka's KRaft defaults are 1 s / 2 s; Redpanda's
            per-partition election timeout is 1.5 s.
        tls: the broker's mTLS settings (None: plaintext), for dialling the other replicas.
    """

    def __init__(
        self,
        node_id: int,
        server: grpc.aio.Server,
        *,
        send_to_controller: SendToController,
        broker_epoch: Callable[[], int | None],
        raft_config: RaftConfig,
        tls: TlsConfig | None = None,
    ) -> None:
        self.node_id = node_id
        self.raft_config = raft_config
        self._log = _log.bind(node_id=node_id)
        self.transport = GrpcRaftTransport(node_id, {}, logger=self._log, tls=tls)
        self.transport.add_to_server(server)
        self._send_to_controller = send_to_controller
        self._broker_epoch = broker_epoch
        self._addresses: dict[int, str] = {}
        self._reports: dict[TopicPartition, tuple[int, asyncio.Task[None]]] = {}
        self._closed = False

    # --- groups ---------------------------------------------------------------------------

    def register(self, group: str, inbox: Inbox, members: frozenset[int]) -> None:
        self.transport.register(group, inbox, members=members)

    def set_members(self, group: str, members: frozenset[int]) -> None:
        self.transport.set_members(group, members)

    def unregister(self, group: str) -> None:
        self.transport.unregister(group)

    def send(self, group: str, message: RaftMessage) -> None:
        self.transport.send(group, message)

    def update_addresses(self, image: MetadataImage) -> None:
        """Every other broker's registered listener is where its groups' messages go."""
        for broker_id, registration in image.brokers.items():
            if broker_id == self.node_id or not registration.listeners:
                continue
            address = registration.listeners[0].address
            if self._addresses.get(broker_id) != address:
                self._addresses[broker_id] = address
                self.transport.set_address(broker_id, address)

    # --- leader reports -------------------------------------------------------------------

    def report_leader(self, replica: ReportingReplica, leader_epoch: int) -> None:
        """Tell the controller that ``replica`` won its group's vote for ``leader_epoch``
        (in the background; a report of an older epoch still under way is dropped)."""
        if self._closed:
            return
        tp = replica.topic_partition
        current = self._reports.get(tp)
        if current is not None:
            if current[0] >= leader_epoch and not current[1].done():
                return
            current[1].cancel()
        task = asyncio.create_task(
            self._report(replica, leader_epoch), name=f"quorum-leader-report-{tp}"
        )
        self._reports[tp] = (leader_epoch, task)
        task.add_done_callback(lambda t: self._forget_report(tp, t))

    def _forget_report(self, tp: TopicPartition, task: asyncio.Task[None]) -> None:
        entry = self._reports.get(tp)
        if entry is not None and entry[1] is task:
            del self._reports[tp]

    async def _report(self, replica: ReportingReplica, leader_epoch: int) -> None:
        tp = replica.topic_partition
        backoff_ms = REPORT_BACKOFF_MS
        attempts = 0
        while not self._closed and replica.leads_epoch(leader_epoch):
            attempts += 1
            code, message = await self._send_report(replica, leader_epoch)
            if code in _FINAL:
                log = self._log.info if code is ErrorCode.NONE else self._log.warning
                log(
                    "quorum_leader_reported",
                    topic_partition=str(tp),
                    leader_epoch=leader_epoch,
                    error=code.name,
                    message=message[:200],
                    attempts=attempts,
                )
                return
            if attempts == 1 or attempts % 20 == 0:
                self._log.info(
                    "quorum_leader_report_retried",
                    topic_partition=str(tp),
                    leader_epoch=leader_epoch,
                    error=code.name,
                    message=message[:200],
                    attempts=attempts,
                )
            await asyncio.sleep(backoff_ms / 1000)
            backoff_ms = min(2 * backoff_ms, REPORT_BACKOFF_MAX_MS)

    async def _send_report(
        self, replica: ReportingReplica, leader_epoch: int
    ) -> tuple[ErrorCode, str]:
        epoch = self._broker_epoch()
        if epoch is None:
            return ErrorCode.STALE_BROKER_EPOCH, "not registered yet"
        partition = replica.topic_partition.partition
        request = AlterPartitionRequest(
            broker_id=NodeId(self.node_id),
            broker_epoch=epoch,
            topics=(
                AlterPartitionTopic(
                    topic_id=replica.topic_id,
                    partitions=(
                        AlterPartitionData(
                            partition=partition,
                            leader_epoch=Epoch(leader_epoch),
                            new_isr_with_epochs=(),
                            partition_epoch=-1,
                            elected_by_vote=True,
                        ),
                    ),
                ),
            ),
        )
        try:
            response = await self._send_to_controller(request)
        except KraftError as e:
            return e.code, e.message
        if response.error_code is not ErrorCode.NONE:
            return response.error_code, response.error_message
        for topic in response.topics:
            for result in topic.partitions:
                if result.partition == partition:
                    return result.error_code, result.error_message
        return ErrorCode.UNKNOWN_SERVER_ERROR, "no answer for the partition"

    async def close(self) -> None:
        self._closed = True
        tasks = [task for _, task in self._reports.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.transport.close()


__all__ = ["QuorumHost", "ReportingReplica", "SendToController"]
