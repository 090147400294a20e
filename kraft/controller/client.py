"""`ControllerClient`: a blocking client of the controller quorum (admin and test use).

It finds the active controller by itself: it sends a request to the controller it last saw
active (or to the next bootstrap address), and on NOT_CONTROLLER follows the response's
``current_leader`` hint (or moves on to the next address when the answering node knows no
leader). Every *retriable* error (NOT_CONTROLLER, an unreachable node, a timed-out attempt) is
retried with exponential backoff under one deadline per call (tenacity); when the deadline
passes, the last error is raised as its typed exception (`storage.errors`), saying how long it
tried. Non-retriable errors (TOPIC_ALREADY_EXISTS, INVALID_REPLICATION_FACTOR, ...) are raised
at once.

NB: retrying a write whose response was lost may apply it twice, as in Kafka's admin client:
``create_topic`` can then raise `TopicAlreadyExistsError` for a topic this very call created.

Usage::

    with ControllerClient("127.0.0.1:9091,127.0.0.1:9092,127.0.0.1:9093") as client:
        client.create_topic("orders", num_partitions=3, replication_factor=1)
        client.describe_topic("orders").partitions[0].leader
        client.describe_quorum().leader_id

Thread-safe: one instance may be shared by threads (gRPC sync channels are thread-safe; the
leader cache is behind a lock).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Self, TypeVar

import grpc
from tenacity import RetryCallState, wait_exponential_jitter

from kraft._generated import controller_pb2_grpc
from kraft.controller.messages import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    CreatableTopic,
    CreatableTopicResult,
    CreateAclsRequest,
    CreateAclsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    RegisterBrokerRequest,
    RegisterBrokerResponse,
    TopicIdPartition,
    TopicMetadata,
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
    UpdateFeaturesRequest,
    UpdateFeaturesResponse,
)
from kraft.metadata.features import advertised_features
from kraft.metadata.records import Endpoint
from kraft.raft.messages import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    CurrentLeader,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
)
from kraft.security.tls import TlsConfig
from kraft.transport.channels import client_channel, map_grpc_errors, parse_bootstrap_servers
from kraft.transport.controller_codec import decode_response, encode
from kraft.transport.retry import StopRetrying, retry_retriable
from kraft.transport.unreachable import BootstrapRefusals
from kraft.types import NodeId, Offset
from storage.errors import (
    ErrorCode,
    NetworkError,
    NotControllerError,
    RequestTimedOutError,
    error_for,
)

R = TypeVar("R")

# request type -> (RPC name, response type)
_RPCS: dict[type, tuple[str, type]] = {
    RegisterBrokerRequest: ("BrokerRegistration", RegisterBrokerResponse),
    BrokerHeartbeatRequest: ("BrokerHeartbeat", BrokerHeartbeatResponse),
    UnregisterBrokerRequest: ("UnregisterBroker", UnregisterBrokerResponse),
    CreateTopicsRequest: ("CreateTopics", CreateTopicsResponse),
    DeleteTopicsRequest: ("DeleteTopics", DeleteTopicsResponse),
    CreatePartitionsRequest: ("CreatePartitions", CreatePartitionsResponse),
    AlterPartitionRequest: ("AlterPartition", AlterPartitionResponse),
    ElectLeadersRequest: ("ElectLeaders", ElectLeadersResponse),
    AlterPartitionReassignmentsRequest: (
        "AlterPartitionReassignments",
        AlterPartitionReassignmentsResponse,
    ),
    ListPartitionReassignmentsRequest: (
        "ListPartitionReassignments",
        ListPartitionReassignmentsResponse,
    ),
    IncrementalAlterConfigsRequest: ("IncrementalAlterConfigs", IncrementalAlterConfigsResponse),
    AllocateProducerIdsRequest: ("AllocateProducerIds", AllocateProducerIdsResponse),
    DescribeClusterRequest: ("DescribeCluster", DescribeClusterResponse),
    DescribeQuorumRequest: ("DescribeQuorum", DescribeQuorumResponse),
    AddRaftVoterRequest: ("AddRaftVoter", AddRaftVoterResponse),
    RemoveRaftVoterRequest: ("RemoveRaftVoter", RemoveRaftVoterResponse),
    DescribeConfigsRequest: ("DescribeConfigs", DescribeConfigsResponse),
    CreateAclsRequest: ("CreateAcls", CreateAclsResponse),
    DeleteAclsRequest: ("DeleteAcls", DeleteAclsResponse),
    DescribeAclsRequest: ("DescribeAcls", DescribeAclsResponse),
    UpdateFeaturesRequest: ("UpdateFeatures", UpdateFeaturesResponse),
}


def _response_errors(response: Any) -> Iterator[tuple[ErrorCode, str]]:
    """Every (error code, message) pair in a response: request level and per item."""
    code = getattr(response, "error_code", None)
    if isinstance(code, ErrorCode):
        yield code, getattr(response, "error_message", "")
    for value in _items(response):
        yield from _response_errors(value)


def _items(response: Any) -> Iterator[Any]:
    for name in getattr(response, "__dataclass_fields__", {}):
        value = getattr(response, name)
        if isinstance(value, tuple):
            yield from (v for v in value if hasattr(v, "__dataclass_fields__"))


_FAILED_MEMORY_S = 1.0
"""How long an address that failed (connection refused, timeout) is skipped and its name in
a NOT_CONTROLLER hint distrusted."""


class ControllerClient:
    """A thread-safe, blocking client of the controller quorum.

    Args:
        bootstrap: ``"host:port,host:port"`` of (some of) the controllers.
        timeout: seconds each call may take, redirects and retries included.
        request_timeout: seconds one attempt may wait for one controller.
        peer: what the bootstrap addresses are, for error messages: ``"controller"``, or
            ``"broker"`` when they are brokers that forward to the controller (AdminClient).
        fail_fast: give up at once with a `NetworkError` naming the addresses when none ever
            answered and every one refused connections for a second
            (`kraft.transport.unreachable`): what a client wants; a node keeps retrying.
    """

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        timeout: float = 15.0,
        request_timeout: float = 3.0,
        peer: str = "controller",
        tls: TlsConfig | None = None,
        fail_fast: bool = False,
    ) -> None:
        self.addresses = parse_bootstrap_servers(bootstrap, "bootstrap controllers")
        self._refusals = (
            BootstrapRefusals(self.addresses, peer=peer, setting="the bootstrap addresses")
            if fail_fast
            else None
        )
        self.peer = peer
        self.tls = tls
        """mTLS settings (`kraft.security.tls.client_tls`; a broker passes its node's)."""
        self.timeout = timeout
        self.request_timeout = request_timeout
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}
        self._stubs: dict[str, controller_pb2_grpc.ControllerStub] = {}
        self._leader: str | None = None
        self._next = 0
        self._failed: dict[str, float] = {}  # address -> when a call to it last failed

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            channels = list(self._channels.values())
            self._channels.clear()
            self._stubs.clear()
        for channel in channels:
            channel.close()

    def set_addresses(self, addresses: Sequence[str], *, leader: str | None = None) -> None:
        """Where the controllers are now (a broker's view of the voter set, KIP-853).

        Later calls go to ``leader`` if given (and it did not just fail), else to the last
        active controller while it is still listed, else round-robin over ``addresses``.
        """
        with self._lock:
            self.addresses = list(addresses) or self.addresses
            if leader is not None and not self._recently_failed(leader):
                self._leader = leader
            elif self._leader not in self.addresses:
                self._leader = None

    # -- topics --------------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        *,
        configs: Mapping[str, str] | None = None,
        assignments: Sequence[Sequence[int]] = (),
        timeout: float | None = None,
        as_broker: tuple[int, int] | None = None,
    ) -> CreatableTopicResult:
        """Create one topic; returns its result (topic id, partitions, replication factor).
        ``as_broker``: ``(broker id, broker epoch)`` of a broker creating an internal topic.

        Raises:
            TopicAlreadyExistsError, InvalidReplicationFactorError, InvalidTopicError, ...:
                the controller rejected it.
            NotControllerError, NetworkError, RequestTimedOutError: no active controller
                committed it within ``timeout`` (the outcome is then unknown).
        """
        topic = CreatableTopic(
            name=name,
            num_partitions=num_partitions,
            replication_factor=replication_factor,
            assignments=tuple(tuple(a) for a in assignments),
            configs=dict(configs or {}),
        )
        broker_id, broker_epoch = as_broker if as_broker is not None else (None, None)
        request = CreateTopicsRequest(
            topics=(topic,), broker_id=broker_id, broker_epoch=broker_epoch
        )
        response: CreateTopicsResponse = self.send(request, timeout=timeout)
        (result,) = response.topics
        _raise_for(result.error_code, result.error_message)
        return result

    def delete_topic(self, name: str, *, timeout: float | None = None) -> None:
        """Delete a topic by name.

        Raises:
            UnknownTopicOrPartitionError: no such topic.
        """
        response = self.send(DeleteTopicsRequest(topic_names=(name,)), timeout=timeout)
        for result in response.topics:
            _raise_for(result.error_code, result.error_message)

    def describe_topic(self, name: str, *, timeout: float | None = None) -> TopicMetadata:
        """Partitions of ``name`` (leader, leader epoch, replicas, ISR) from the active
        controller's committed image.

        Raises:
            UnknownTopicOrPartitionError: no such topic.
        """
        response = self.describe_cluster(topic_names=(name,), timeout=timeout)
        (topic,) = response.topics
        _raise_for(topic.error_code, topic.error_message)
        return topic

    def list_topics(self, *, timeout: float | None = None) -> list[str]:
        """The names of every topic, sorted."""
        return [t.name for t in self.describe_cluster(timeout=timeout).topics]

    # -- cluster -------------------------------------------------------------------------------

    def describe_cluster(
        self,
        *,
        topic_names: Sequence[str] | None = None,
        address: str | None = None,
        timeout: float | None = None,
    ) -> DescribeClusterResponse:
        """Brokers and topics. By default the active controller answers (read-your-writes);
        with ``address``, that controller answers from its own committed image (no redirect),
        which is how a test sees whether a follower has caught up."""
        request = DescribeClusterRequest(
            topic_names=None if topic_names is None else tuple(topic_names)
        )
        if address is not None:
            response: DescribeClusterResponse
            response, _ = self._attempt(address, request, timeout or self.request_timeout)
            _raise_for(response.error_code, response.error_message)
            return response
        answer: DescribeClusterResponse = self.send(request, timeout=timeout, require_active=True)
        return answer

    def describe_quorum(self, *, timeout: float | None = None) -> DescribeQuorumResponse:
        """KIP-595 DescribeQuorum from the active controller: leader, epoch, high watermark,
        and each voter's and observer's log end offset, lag and last fetch time."""
        response: DescribeQuorumResponse = self.send(DescribeQuorumRequest(), timeout=timeout)
        _raise_for(response.error_code, response.error_message)
        return response

    def add_raft_voter(self, voter_id: int, endpoint: str, *, timeout: float | None = None) -> None:
        """KIP-853 AddRaftVoter: make controller ``voter_id`` (running as an observer, at
        ``endpoint``) a voter; returns once the change has committed. Retriable refusals (not
        caught up yet, another change in progress) are retried within ``timeout``.

        Raises:
            DuplicateVoterError, InvalidRequestError: refused; RequestTimedOutError: not done
                within ``timeout``.
        """
        self._change_voters(AddRaftVoterRequest(voter_id=voter_id, endpoint=endpoint), timeout)

    def remove_raft_voter(self, voter_id: int, *, timeout: float | None = None) -> None:
        """KIP-853 RemoveRaftVoter; as `add_raft_voter` (VoterNotFoundError: not a voter)."""
        self._change_voters(RemoveRaftVoterRequest(voter_id=voter_id), timeout)

    def _change_voters(self, request: Any, timeout: float | None) -> None:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            remaining = deadline - time.monotonic()
            response = self.send(request, timeout=max(0.1, remaining))
            if response.error_code is ErrorCode.REQUEST_TIMED_OUT and remaining > 0.2:
                time.sleep(0.1)  # retriable: not caught up yet, or a change in progress
                continue
            _raise_for(response.error_code, response.error_message)
            return

    def active_controller(self, *, timeout: float | None = None) -> tuple[int, str]:
        """(node id, address) of the active controller."""
        leader_id = self.describe_quorum(timeout=timeout).leader_id
        with self._lock:
            address = self._leader
        assert address is not None
        return leader_id, address

    # -- brokers (used by tests until brokers exist) -------------------------------------------

    def register_broker(
        self,
        broker_id: int,
        *,
        incarnation_id: str | None = None,
        listeners: Sequence[Endpoint] = (),
        rack: str | None = None,
        previous_broker_epoch: int | None = None,
        timeout: float | None = None,
    ) -> int:
        """Register a broker (KIP-631); returns its broker epoch. ``previous_broker_epoch``:
        the epoch of its last clean shutdown (KIP-966), None after an unclean one. The broker
        advertises the feature ranges this code runs (KIP-584, `advertised_features`).

        Raises:
            DuplicateBrokerRegistrationError: another live incarnation holds the id.
        """
        request = RegisterBrokerRequest(
            broker_id=NodeId(broker_id),
            incarnation_id=incarnation_id or uuid.uuid4().hex,
            listeners=tuple(listeners),
            rack=rack,
            previous_broker_epoch=previous_broker_epoch,
            features=advertised_features(),
        )
        response: RegisterBrokerResponse = self.send(request, timeout=timeout)
        _raise_for(response.error_code, response.error_message)
        return response.broker_epoch

    def heartbeat(
        self,
        broker_id: int,
        broker_epoch: int,
        *,
        current_metadata_offset: int = -1,
        want_fence: bool = False,
        want_shutdown: bool = False,
        offline_replicas: tuple[TopicIdPartition, ...] = (),
        timeout: float | None = None,
    ) -> BrokerHeartbeatResponse:
        """One broker heartbeat (KIP-631); unfences a caught-up broker. ``offline_replicas``:
        every replica whose log this broker took offline (`kraft.controller.offline_replicas`).

        Raises:
            StaleBrokerEpochError, BrokerIdNotRegisteredError: the registration is gone.
        """
        request = BrokerHeartbeatRequest(
            broker_id=NodeId(broker_id),
            broker_epoch=broker_epoch,
            current_metadata_offset=Offset(current_metadata_offset),
            want_fence=want_fence,
            want_shutdown=want_shutdown,
            offline_replicas=offline_replicas,
        )
        response: BrokerHeartbeatResponse = self.send(request, timeout=timeout)
        _raise_for(response.error_code, response.error_message)
        return response

    # -- the generic path ------------------------------------------------------------------------

    def send(
        self, request: Any, *, timeout: float | None = None, require_active: bool = False
    ) -> Any:
        """Send any controller request to the active controller and return its response
        once no part of it says NOT_CONTROLLER (other per-item errors are left to the
        caller). ``require_active`` also redirects reads that any controller could answer.

        Raises:
            NotControllerError, NetworkError, RequestTimedOutError: still failing when
                ``timeout`` (default: the client's) ran out.
            InvalidRequestError: the controller could not decode the request.
        """
        deadline_s = self.timeout if timeout is None else timeout
        started = time.monotonic()
        attempts = 0

        def attempt() -> Any:
            nonlocal attempts
            attempts += 1
            remaining = max(0.05, deadline_s - (time.monotonic() - started))
            address = self._target()
            try:
                response, leader = self._attempt(
                    address, request, min(self.request_timeout, remaining)
                )
            except (NetworkError, RequestTimedOutError) as e:
                self._forget(address)
                if self._refusals is not None:
                    self._refusals.failed(address, e, time.monotonic())
                    unreachable = self._refusals.verdict(time.monotonic())
                    if unreachable is not None:
                        raise StopRetrying(unreachable) from None
                raise
            if self._refusals is not None:
                self._refusals.answered()
            not_controller = any(
                code is ErrorCode.NOT_CONTROLLER for code, _ in _response_errors(response)
            )
            if require_active and not not_controller:
                not_controller = getattr(response, "controller_id", -1) != getattr(
                    response, "node_id", -2
                )
            if not_controller:
                self._redirect(address, leader)
                raise NotControllerError(
                    f"{self.peer} {address} is not the active controller (active: "
                    f"{leader.leader_id if leader.leader_id >= 0 else 'unknown'})",
                    leader_id=leader.leader_id if leader.leader_id >= 0 else None,
                    leader_address=leader.leader_address,
                )
            with self._lock:
                self._leader = address
            return response

        backoff = wait_exponential_jitter(multiplier=0.02, max=0.2, jitter=0.02)

        def wait(state: RetryCallState) -> float:
            # A redirect to a live new leader is worth following at once; anything else
            # (no leader yet, a dead node) backs off exponentially, capped at 0.2 s.
            exc = state.outcome.exception() if state.outcome is not None else None
            if (
                isinstance(exc, NotControllerError)
                and exc.leader_address
                and not self._recently_failed(exc.leader_address)
            ):
                return 0.005
            return float(backoff(state))

        return retry_retriable(attempt, timeout_s=deadline_s, wait=wait)

    def _attempt(self, address: str, request: Any, timeout: float) -> tuple[Any, CurrentLeader]:
        method, response_cls = _RPCS[type(request)]
        stub = self._stub(address)
        with map_grpc_errors(address, self.peer, self.tls):
            reply = getattr(stub, method)(encode(request), timeout=timeout)
        return decode_response(reply, response_cls)

    def _target(self) -> str:
        with self._lock:
            if self._leader is not None:
                return self._leader
            # Round-robin, skipping addresses that just failed while others have not.
            for _ in range(len(self.addresses)):
                address = self.addresses[self._next % len(self.addresses)]
                self._next += 1
                if not self._recently_failed(address):
                    return address
            return address

    def _recently_failed(self, address: str) -> bool:
        failed_at = self._failed.get(address)
        return failed_at is not None and time.monotonic() - failed_at < _FAILED_MEMORY_S

    def _forget(self, address: str) -> None:
        with self._lock:
            self._failed[address] = time.monotonic()
            if self._leader == address:
                self._leader = None

    def _redirect(self, address: str, leader: CurrentLeader) -> None:
        with self._lock:
            # NB: right after a failover survivors still name the dead leader for a while;
            # a hint at an address that just failed is stale, so try the others instead.
            if (
                leader.leader_address
                and leader.leader_id >= 0
                and not self._recently_failed(leader.leader_address)
            ):
                self._leader = leader.leader_address
            elif self._leader == address or self._leader is None:
                self._leader = None

    def _stub(self, address: str) -> controller_pb2_grpc.ControllerStub:
        with self._lock:
            stub = self._stubs.get(address)
            if stub is None:
                channel = client_channel(address, self.tls)
                self._channels[address] = channel
                stub = self._stubs[address] = controller_pb2_grpc.ControllerStub(channel)
            return stub


def _raise_for(code: ErrorCode, message: str) -> None:
    if code is not ErrorCode.NONE:
        raise error_for(code, message)


__all__ = ["ControllerClient"]
