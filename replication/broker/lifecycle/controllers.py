"""The broker's side of the controller channel: `ControllerDiscovery` keeps it pointed at the
voters, `ControllerRequests` sends the broker's own requests on it.

`ControllerRequests` (Kafka's ``AlterPartitionManager`` and the broker's other
``NodeToControllerChannelManager`` users): AlterPartition from the leader cores, the producer
id blocks of InitProducerId (KIP-730), internal topics, the quorum partitions' leader reports.
The blocking `ControllerClient` runs on threads of its own (never the event loop, and not the
registration and heartbeat thread, `replication.broker.lifecycle.broker_lifecycle`).

`ControllerDiscovery` follows the voter set.

KIP-853: a broker configured with ``controller.quorum.bootstrap.servers`` knows only where to
start. Its metadata observer (a `RaftServer` with ``dynamic_voters``) fetches the metadata log
and learns the voter set and each voter's endpoint from the latest VotersRecord, and the
leader from the Raft responses; the broker's `ControllerClient` (registration, heartbeats,
AlterPartition, forwarded admin requests, the quorum partitions' reports) must follow them,
including a voter that was not in its config, and stop dialling a voter that was removed.

`refresh` reads the observer's view (the voters with their endpoints and the leader id) and,
when it changed, hands the client the voters' addresses and the leader's (if known) as the
next target. The broker calls it on every leader change and before every registration and
heartbeat (at least every ``broker.heartbeat.interval.ms``), so a voter change reaches the
channel within one heartbeat of the observer reading it. A static ``controller.quorum.voters``
set never changes, and only the leader hint moves.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar, final

import structlog
from structlog.typing import FilteringBoundLogger

from kraft.controller.client import ControllerClient
from kraft.controller.messages import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterPartitionPartitionResult,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopic,
)
from kraft.types import NodeId
from replication.core import AlterPartitionSend
from storage.errors import ErrorCode, KraftError

if TYPE_CHECKING:
    from replication.broker.replicas.partition import PartitionReplica

T = TypeVar("T")

CONTROL_THREADS = 4
CONTROL_REQUEST_TIMEOUT_S = 5.0
INTERNAL_TOPIC_TIMEOUT_S = 10.0

_log: FilteringBoundLogger = structlog.get_logger("replication.broker.lifecycle.controllers")


@final
class ControllerDiscovery:
    """Pushes the observer's voter endpoints and leader to the controller channel.

    Args:
        voter_endpoints: the voter set in use with each voter's ``host:port`` ("" if unknown).
        leader_id: the metadata quorum's leader as the observer knows it (None: unknown).
        apply: ``(addresses, leader address or None)``: re-point the channel
            (`ControllerClient.set_addresses`).
    """

    def __init__(
        self,
        voter_endpoints: Callable[[], Mapping[int, str]],
        leader_id: Callable[[], int | None],
        apply: Callable[[Sequence[str], str | None], None],
        *,
        logger: FilteringBoundLogger | None = None,
    ) -> None:
        self._voter_endpoints = voter_endpoints
        self._leader_id = leader_id
        self._apply = apply
        self._log = logger or _log
        self._seen: tuple[tuple[tuple[int, str], ...], str | None] | None = None

    def refresh(self) -> bool:
        """Re-point the channel if the voters or the leader changed; True if it did."""
        voters = tuple(sorted((int(v), e) for v, e in self._voter_endpoints().items() if e))
        if not voters:
            return False  # not started, or no endpoint known yet: keep the bootstrap list
        leader = self._leader_id()
        leader_address = dict(voters).get(leader) if leader is not None else None
        seen = (voters, leader_address)
        if seen == self._seen:
            return False
        old = self._seen
        self._seen = seen
        self._apply([e for _, e in voters], leader_address)
        if old is None or old[0] != voters:
            self._log.info(
                "controller_endpoints_changed",
                voters={v: e for v, e in voters},
                leader_id=leader,
            )
        return True


@final
class ControllerRequests:
    """The broker's own requests to the active controller (see the module docstring).

    Args:
        client: the channel (it finds the active controller, follows NOT_CONTROLLER hints).
        node_id: this broker.
        broker_epoch: this broker's epoch (None before it registered).
        log: the broker's logger.
    """

    def __init__(
        self,
        client: ControllerClient,
        *,
        node_id: NodeId,
        broker_epoch: Callable[[], int | None],
        log: Any,
    ) -> None:
        self.client = client
        self._node_id = node_id
        self._broker_epoch = broker_epoch
        self._log = log
        self._executor = ThreadPoolExecutor(CONTROL_THREADS, thread_name_prefix="broker-control")
        self._tasks: set[asyncio.Task[None]] = set()

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking `ControllerClient` call on this channel's threads."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    def send_blocking(self, request: Any) -> Any:
        """`ControllerClient.send`, blocking (for callers on their own thread)."""
        return self.client.send(request, timeout=CONTROL_REQUEST_TIMEOUT_S)

    async def send(self, request: Any) -> Any:
        """`ControllerClient.send` off the event loop."""
        return await self.call(self.client.send, request, timeout=CONTROL_REQUEST_TIMEOUT_S)

    def send_alter_partition(self, replica: PartitionReplica, send: AlterPartitionSend) -> None:
        """A leader core's AlterPartition, in the background; its result goes back to the
        replica (dropped there if that leader role has ended meanwhile)."""
        generation = replica.generation  # the leader role that sent it
        epoch = self._broker_epoch()
        assert epoch is not None
        request = AlterPartitionRequest(
            broker_id=self._node_id,
            broker_epoch=epoch,
            topics=(AlterPartitionTopic(topic_id=replica.topic_id, partitions=(send.data,)),),
        )
        partition = send.data.partition

        async def run() -> None:
            try:
                response: AlterPartitionResponse = await self.send(request)
            except KraftError as e:
                result = AlterPartitionPartitionResult(partition=partition, error_code=e.code)
            else:
                result = _partition_result(response, partition)
            self._log.info(
                "alter_partition_sent",
                topic_partition=str(replica.topic_partition),
                isr=list(send.data.new_isr),
                error=result.error_code.name,
            )
            replica.handle_alter_partition_result(generation, send.alter_id, result)

        task = asyncio.create_task(run(), name=f"alter-partition-{replica.topic_partition}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def create_internal_topic(
        self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> None:
        """Create an internal topic (``__consumer_offsets``) as this broker in its current
        epoch (the controller refuses internal names otherwise).

        Raises:
            TopicAlreadyExistsError, KraftError: as `ControllerClient.create_topic`.
        """
        epoch = self._broker_epoch()
        await self.call(
            self.client.create_topic,
            name,
            partitions,
            replication_factor,
            configs=configs,
            timeout=INTERNAL_TOPIC_TIMEOUT_S,
            as_broker=(self._node_id, -1 if epoch is None else epoch),
        )

    async def allocate_producer_ids(self) -> AllocateProducerIdsResponse:
        """A block of producer ids for this broker (AllocateProducerIds, KIP-730)."""
        epoch = self._broker_epoch()
        request = AllocateProducerIdsRequest(
            broker_id=self._node_id, broker_epoch=-1 if epoch is None else epoch
        )
        response: AllocateProducerIdsResponse = await self.send(request)
        return response

    async def cancel_alter_partitions(self) -> None:
        """Cancel the AlterPartitions in flight (the broker stops: no result reaches a replica
        after this)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def close(self) -> None:
        """Cancel the AlterPartitions in flight, stop the threads, close the channel."""
        await self.cancel_alter_partitions()
        self._executor.shutdown(wait=False, cancel_futures=True)
        await asyncio.to_thread(self.client.close)


def _partition_result(
    response: AlterPartitionResponse, partition: int
) -> AlterPartitionPartitionResult:
    """The answer for ``partition`` in ``response`` (UNKNOWN_SERVER_ERROR if it has none)."""
    if response.error_code is not ErrorCode.NONE:
        return AlterPartitionPartitionResult(partition=partition, error_code=response.error_code)
    for topic in response.topics:
        for p in topic.partitions:
            if p.partition == partition:
                return p
    return AlterPartitionPartitionResult(
        partition=partition, error_code=ErrorCode.UNKNOWN_SERVER_ERROR
    )


__all__ = ["ControllerDiscovery", "ControllerRequests"]
