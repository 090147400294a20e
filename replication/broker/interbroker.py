"""`InterBrokerClient`: this broker's gRPC calls to other brokers (Kafka's
``ReplicaFetcherManager`` and its ``BrokerBlockingSender``, plus the lag reads of the groups).

- Follower fetches: one `LeaderFetcher` per leader broker batches the fetches of every
  partition it leads into one long poll (`fetch_from_leader`, what each `PartitionReplica` is
  given), sent on one long-lived ``Broker.FetchStream`` call per leader (`FetchStreams`); a
  fetch of a partition this broker is being added to by a reassignment is throttled by
  ``follower.replication.throttled.rate``.
- ``Broker.ListOffsets`` to another broker (`list_latest_offsets`: the group lag metrics).

A leader is dialled at its first registered listener, the inter-broker one
(``inter.broker.listener.name``); one cached channel per address. A transport failure is a
`KraftError` (NETWORK_EXCEPTION, REQUEST_TIMED_OUT): the follower cores back off by themselves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import grpc

from kraft._generated import broker_pb2_grpc
from kraft.metadata import MetadataImage
from kraft.transport.channels import peer_channel
from kraft.types import TopicPartition
from replication.broker.config import BrokerNodeConfig
from replication.broker.coordinators.group_lag import list_latest_offsets
from replication.broker.replicas.fetch_stream import FetchStreams
from replication.broker.replicas.fetcher import LeaderFetcher
from replication.broker.replicas.throttle import ThrottleBucket
from replication.codec import decode, encode
from replication.core import FollowerFetchRequest, FollowerFetchResponse
from replication.messages import BrokerFetchRequest, BrokerFetchResponse
from storage.errors import LeaderNotAvailableError

NO_LISTENER_BACKOFF_S = 0.1
"""How long a fetch from a leader with no registered listener waits before it fails."""


class InterBrokerClient:
    """The gRPC client side of one broker towards the others (see the module docstring).

    Args:
        config: ``node.id``, TLS and the ``replica.fetch.*`` keys.
        image: the broker's metadata image (where each broker listens).
        follower_throttle: ``follower.replication.throttled.rate`` (`ThrottleBucket`).
        is_adding_replica: ``(tp, broker)`` is being added to ``tp`` by a reassignment.
    """

    def __init__(
        self,
        config: BrokerNodeConfig,
        *,
        image: Callable[[], MetadataImage],
        follower_throttle: ThrottleBucket,
        is_adding_replica: Callable[[TopicPartition, int], bool],
    ) -> None:
        self._config = config
        self._image = image
        self._follower_throttle = follower_throttle
        self._is_adding_replica = is_adding_replica
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, broker_pb2_grpc.BrokerStub] = {}
        self._fetchers: dict[int, LeaderFetcher] = {}
        self._fetch_streams = FetchStreams(self.broker_stub)

    def broker_stub(self, address: str) -> broker_pb2_grpc.BrokerStub:
        """A stub of the broker at ``address`` (one cached channel per address)."""
        stub = self._stubs.get(address)
        if stub is None:
            channel = peer_channel(address, self._config.tls)
            self._channels[address] = channel
            stub = self._stubs[address] = broker_pb2_grpc.BrokerStub(channel)
        return stub

    async def fetch_from_leader(self, request: FollowerFetchRequest) -> FollowerFetchResponse:
        """One partition's follower fetch, batched with the others led by the same broker."""
        fetcher = self._fetchers.get(request.leader_id)
        if fetcher is None:
            config, node_id = self._config, self._config.node_id
            fetcher = self._fetchers[request.leader_id] = LeaderFetcher(
                request.leader_id,
                replica_id=node_id,
                send=self.send_fetch,
                max_wait_ms=config.replica_fetch_wait_max_ms,
                max_bytes=config.replica_fetch_max_bytes,
                min_bytes=config.replica_fetch_min_bytes,
                response_max_bytes=config.replica_fetch_response_max_bytes,
                throttle=self._follower_throttle,
                is_throttled=lambda tp: self._is_adding_replica(tp, node_id),
            )
        return await fetcher.fetch(request)

    async def send_fetch(self, leader_id: int, request: BrokerFetchRequest) -> BrokerFetchResponse:
        """One fetch to broker ``leader_id``, on its ``Broker.FetchStream`` call
        (`replication.broker.replicas.fetch_stream`).

        Raises:
            LeaderNotAvailableError: the broker has no registered listener.
            RequestTimedOutError, NetworkError: the call failed.
        """
        registration = self._image().broker(leader_id)
        if registration is None or not registration.listeners:
            await asyncio.sleep(NO_LISTENER_BACKOFF_S)
            raise LeaderNotAvailableError(f"broker {leader_id} has no registered listener")
        address = registration.listeners[0].address
        timeout_s = self._config.replica_fetch_wait_max_ms / 1000 + 10
        reply = await self._fetch_streams.fetch(leader_id, address, encode(request), timeout_s)
        return decode(reply, BrokerFetchResponse)

    async def list_latest_offsets(
        self, leader_id: int, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """`replication.broker.host.GroupHost.list_latest_offsets`, over gRPC."""
        return await list_latest_offsets(self._image(), self.broker_stub, leader_id, partitions)

    async def close(self) -> None:
        for fetcher in self._fetchers.values():
            await fetcher.close()
        self._fetch_streams.close()
        for channel in self._channels.values():
            await channel.close()


__all__ = ["InterBrokerClient"]
