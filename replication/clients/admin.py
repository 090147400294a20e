"""`AdminClient`: topics and cluster inspection, through the brokers (Kafka's ``Admin``).

Admin requests use the ``Controller`` service of ``controller.proto`` on a *broker's* port; the
broker forwards them to the active controller (as Kafka brokers forward CreateTopics in KRaft
mode, KIP-590). So this client is `kraft.controller.client.ControllerClient` pointed at broker
addresses: its retry loop (tenacity, exponential backoff under one deadline per call), its
NOT_CONTROLLER handling and its typed errors are reused as they are. The one difference is
reads: a broker answering DescribeCluster is not a controller, so reads are not redirected to
"the active controller" here; the broker's forwarded answer comes from it.

Usage::

    with AdminClient("127.0.0.1:9092,127.0.0.1:9093") as admin:
        admin.create_topic("events", partitions=6, replication_factor=3,
                           config={"min.insync.replicas": "2"})
        admin.wait_for_leaders("events")
        for p in admin.describe_topic("events").partitions:
            print(p.partition, p.leader, p.leader_epoch, p.replicas, p.isr)

Thread-safe (the controller client is).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Self

from kraft.controller.client import ControllerClient
from kraft.controller.messages import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsEntry,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
    ElectionType,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ReassignablePartition,
    ReassignableTopic,
    TopicMetadata,
)
from kraft.logs import ensure_configured
from kraft.metadata.records import ConfigResourceType
from kraft.raft.messages import DescribeQuorumResponse
from kraft.security.acls import AclBinding, AclBindingFilter
from kraft.types import TopicPartition
from replication.clients import acl_admin, feature_admin
from replication.clients.config import ClientSecurity
from replication.clients.feature_admin import FeatureMetadata
from replication.clients.group_admin import (
    GroupAdmin,
    GroupDescription,
    GroupListing,
)
from replication.clients.network import BrokerNetwork
from replication.clients.offsets import ListedOffset, list_offsets, offset_spec
from replication.clients.txn_admin import AbortSpec, TransactionAdmin
from replication.messages import DescribedTransaction, ListedTransaction, ProducerDescription
from storage.errors import ErrorCode, KraftError, LeaderNotAvailableError, error_for


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionReassignment:
    """A reassignment in progress (Kafka's ``PartitionReassignment``): ``replicas`` holds the
    original and the target replicas together (target first)."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]

    @property
    def target_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing_replicas)


class AdminClient:
    """Create, delete and describe topics; describe the cluster and the controller quorum;
    list, describe, reset and delete consumer groups (`replication.clients.group_admin`).

    Args:
        bootstrap: ``"host:port,host:port"`` of (some of) the brokers.
        timeout: seconds each call may take, retries included (``default.api.timeout.ms``).
        request_timeout: seconds one attempt may wait (``request.timeout.ms``).
        security_protocol, ssl_cafile, ssl_certfile, ssl_keyfile: transport security, as
            kafka-python names it (`replication.clients.config.ClientSecurity`).
    """

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        timeout: float = 60.0,
        request_timeout: float = 30.0,
        security_protocol: str = "PLAINTEXT",
        ssl_cafile: str | None = None,
        ssl_certfile: str | None = None,
        ssl_keyfile: str | None = None,
    ) -> None:
        ensure_configured()  # no output unless the application configures logging
        self.tls = ClientSecurity(
            security_protocol=security_protocol,
            ssl_cafile=ssl_cafile or "",
            ssl_certfile=ssl_certfile or "",
            ssl_keyfile=ssl_keyfile or "",
        ).tls()
        self._client = ControllerClient(
            bootstrap,
            timeout=timeout,
            request_timeout=request_timeout,
            peer="broker",
            tls=self.tls,
            fail_fast=True,
        )
        self._timeout = timeout
        self._broker_network = BrokerNetwork(
            bootstrap, request_timeout_s=request_timeout, tls=self.tls
        )
        self._groups = GroupAdmin(
            self._broker_network, timeout, lambda: self.describe_cluster().brokers
        )
        self._transactions = TransactionAdmin(
            self._broker_network,
            timeout,
            lambda: [
                b.listeners[0].address
                for b in self.describe_cluster().brokers
                if not b.fenced and b.listeners
            ],
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()
        self._broker_network.close()

    # -- topics --------------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        config: Mapping[str, str] | None = None,
        *,
        assignments: Sequence[Sequence[int]] = (),
        timeout: float | None = None,
    ) -> CreatableTopicResult:
        """Create a topic (-1: the cluster's ``num.partitions`` /
        ``default.replication.factor``), with topic configs such as ``min.insync.replicas``.

        Raises:
            TopicAlreadyExistsError, InvalidReplicationFactorError, InvalidConfigError, ...
        """
        return self._client.create_topic(
            name,
            partitions,
            replication_factor,
            configs=config,
            assignments=assignments,
            timeout=timeout,
        )

    def delete_topic(self, name: str, *, timeout: float | None = None) -> None:
        """Raises: UnknownTopicOrPartitionError: no such topic."""
        self._client.delete_topic(name, timeout=timeout)

    def create_partitions(self, name: str, count: int, *, timeout: float | None = None) -> None:
        """Grow ``name`` to ``count`` partitions (keyed records then move: as in Kafka).

        Raises:
            InvalidPartitionsError: ``count`` is not more than the current count.
        """
        request = CreatePartitionsRequest(topics=(CreatePartitionsTopic(name=name, count=count),))
        response: CreatePartitionsResponse = self._client.send(request, timeout=timeout)
        for result in response.results:
            if result.error_code is not ErrorCode.NONE:
                raise error_for(result.error_code, result.error_message)

    def alter_topic_config(
        self,
        name: str,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: Sequence[str] = (),
        *,
        timeout: float | None = None,
    ) -> None:
        """KIP-339 IncrementalAlterConfigs on one topic: SET ``set_configs``, DELETE (back to
        the default) ``delete_configs``; all of them or none.

        Raises:
            UnknownTopicOrPartitionError: no such topic.
            InvalidConfigError: an unknown key or a bad value.
            InvalidRequestError: a key named twice.
        """
        self._alter_configs(
            ConfigResourceType.TOPIC, name, set_configs, delete_configs, timeout=timeout
        )

    def _alter_configs(
        self,
        resource_type: ConfigResourceType,
        name: str,
        set_configs: Mapping[str, str] | None,
        delete_configs: Sequence[str],
        *,
        timeout: float | None,
    ) -> None:
        ops = [
            AlterableConfig(name=k, op=AlterConfigOp.SET, value=v)
            for k, v in (set_configs or {}).items()
        ]
        ops += [AlterableConfig(name=k, op=AlterConfigOp.DELETE) for k in delete_configs]
        request = IncrementalAlterConfigsRequest(
            resources=(
                AlterConfigsResource(
                    resource_type=resource_type, resource_name=name, configs=tuple(ops)
                ),
            )
        )
        response: IncrementalAlterConfigsResponse = self._client.send(request, timeout=timeout)
        for result in response.responses:
            if result.error_code is not ErrorCode.NONE:
                kind = "topic" if resource_type is ConfigResourceType.TOPIC else "broker"
                raise error_for(result.error_code, result.error_message or f"{kind} {name}")

    def describe_configs(
        self,
        resource_type: str,
        name: str,
        *,
        include_synonyms: bool = False,
        timeout: float | None = None,
    ) -> tuple[DescribeConfigsEntry, ...]:
        """Kafka's DescribeConfigs (kafka-configs.sh --describe): every key of a ``"topic"``
        or a ``"broker"`` (a broker id, or ``""`` for the cluster-wide default) with its
        effective value and its `ConfigSource` (and, with ``include_synonyms``, every layer
        that has a value, most specific first).

        Raises:
            ValueError: ``resource_type`` is neither topic nor broker.
            UnknownTopicOrPartitionError: no such topic.
            InvalidRequestError: a broker resource that is not a broker id.
        """
        kinds = {"topic": ConfigResourceType.TOPIC, "broker": ConfigResourceType.BROKER}
        kind = kinds.get(resource_type)
        if kind is None:
            raise ValueError(f"resource type must be topic or broker, got {resource_type[:40]!r}")
        request = DescribeConfigsRequest(
            resources=(DescribeConfigsResource(resource_type=kind, resource_name=name),),
            include_synonyms=include_synonyms,
        )
        response: DescribeConfigsResponse = self._client.send(
            request, timeout=timeout, require_active=True
        )
        if response.error_code is not ErrorCode.NONE:
            raise error_for(response.error_code, response.error_message)
        (result,) = response.results
        if result.error_code is not ErrorCode.NONE:
            raise error_for(result.error_code, result.error_message or f"{resource_type} {name}")
        return result.configs

    def alter_broker_config(
        self,
        broker: str,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: Sequence[str] = (),
        *,
        timeout: float | None = None,
    ) -> None:
        """KIP-339 IncrementalAlterConfigs on a broker resource (a broker id, or ``""`` for
        the cluster-wide default): the dynamic broker keys such as ``log.retention.ms``.

        Raises:
            InvalidConfigError: an unknown key or a bad value.
            InvalidRequestError: a key named twice, or a resource that is not a broker id.
        """
        self._alter_configs(
            ConfigResourceType.BROKER, broker, set_configs, delete_configs, timeout=timeout
        )

    def describe_topic(self, name: str, *, timeout: float | None = None) -> TopicMetadata:
        """The partitions of ``name``: partition, leader, leader_epoch, replicas, isr.

        Raises:
            UnknownTopicOrPartitionError: no such topic.
        """
        (topic,) = self.describe_cluster(topic_names=(name,), timeout=timeout).topics
        if topic.error_code is not ErrorCode.NONE:
            raise error_for(topic.error_code, topic.error_message or f"topic {name}")
        return topic

    def list_topics(self, *, timeout: float | None = None) -> list[str]:
        """Every topic's name, sorted."""
        return sorted(t.name for t in self.describe_cluster(timeout=timeout).topics)

    def wait_for_leaders(self, name: str, *, timeout: float = 30.0) -> TopicMetadata:
        """Block until every partition of ``name`` has a leader; returns the description.

        Raises:
            LeaderNotAvailableError: some partition still had none after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            topic = self.describe_topic(name, timeout=timeout)
            if topic.partitions and all(p.leader >= 0 for p in topic.partitions):
                return topic
            if time.monotonic() >= deadline:
                raise LeaderNotAvailableError(f"topic {name} has partitions without a leader")
            time.sleep(0.05)

    def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, KraftError | None]:
        """KIP-455 AlterPartitionReassignments (Kafka's ``Admin.alterPartitionReassignments``,
        kafka-reassign-partitions.sh --execute / --cancel): move each partition to its target
        replicas (the first one is the preferred leader), or cancel its reassignment (None).

        The controller adds the new replicas, waits until they have caught up and joined the
        ISR, then removes the old ones (moving leadership off a removed leader); follow it
        with `list_partition_reassignments`. A new target for a partition already being
        reassigned replaces the old one.

        Returns:
            Each partition's outcome: None when the reassignment started (or completed at
            once, or was cancelled), else the error: `UnknownTopicOrPartitionError`,
            `InvalidReplicaAssignmentError` (empty or duplicate target, unregistered broker,
            a cancel that would shrink the ISR below min.insync.replicas),
            `InvalidReplicationFactorError` (fewer replicas than min.insync.replicas),
            `NoReassignmentInProgressError` (cancel) or `InvalidRequestError` (a
            quorum-mode topic: its replicas are a Raft group's voters).

        Raises:
            KraftError: the request as a whole failed (e.g. POLICY_VIOLATION: too many
                partitions in one request).
        """
        by_topic: dict[str, list[ReassignablePartition]] = {}
        for tp, replicas in reassignments.items():
            by_topic.setdefault(tp.topic, []).append(
                ReassignablePartition(
                    partition_index=tp.partition,
                    replicas=None if replicas is None else tuple(int(r) for r in replicas),
                )
            )
        request = AlterPartitionReassignmentsRequest(
            topics=tuple(
                ReassignableTopic(name=name, partitions=tuple(ps)) for name, ps in by_topic.items()
            )
        )
        response: AlterPartitionReassignmentsResponse = self._client.send(request, timeout=timeout)
        if response.error_code is not ErrorCode.NONE:
            raise error_for(response.error_code, response.error_message)
        out: dict[TopicPartition, KraftError | None] = {}
        for topic in response.responses:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                out[tp] = (
                    None
                    if p.error_code is ErrorCode.NONE
                    else error_for(p.error_code, p.error_message or str(tp))
                )
        return out

    def list_partition_reassignments(
        self, partitions: Sequence[TopicPartition] | None = None, *, timeout: float | None = None
    ) -> dict[TopicPartition, PartitionReassignment]:
        """KIP-455 ListPartitionReassignments (Kafka's ``Admin.listPartitionReassignments``):
        the reassignments in progress, of ``partitions`` or of every partition (None). A
        partition that is not being reassigned is not in the answer."""
        request = ListPartitionReassignmentsRequest(
            partitions=None if partitions is None else tuple(partitions)
        )
        response: ListPartitionReassignmentsResponse = self._client.send(request, timeout=timeout)
        if response.error_code is not ErrorCode.NONE:
            raise error_for(response.error_code, response.error_message)
        return {
            TopicPartition(topic.name, p.partition_index): PartitionReassignment(
                replicas=p.replicas,
                adding_replicas=p.adding_replicas,
                removing_replicas=p.removing_replicas,
            )
            for topic in response.topics
            for p in topic.partitions
        }

    def elect_leaders(
        self,
        partitions: Sequence[TopicPartition] | None = None,
        election_type: str = "preferred",
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, KraftError | None]:
        """KIP-460 ElectLeaders (Kafka's ``Admin.electLeaders``, kafka-leader-election.sh):
        move leadership to the preferred replica (``"preferred"``), or elect an out-of-sync
        replica of an offline partition (``"unclean"``).

        Args:
            partitions: the partitions, or None for every partition of the cluster (then only
                partitions that were elected or failed are in the answer, as in Kafka).
            election_type: ``"preferred"`` or ``"unclean"``.

        Returns:
            Each partition's outcome: None when a leader was elected, else the error, such as
            `ElectionNotNeededError` (the leader already is the one asked for),
            `PreferredLeaderNotAvailableError`, `EligibleLeadersNotAvailableError` or
            `UnknownTopicOrPartitionError`.

        Raises:
            ValueError: an unknown ``election_type``.
            KraftError: the request as a whole failed (e.g. POLICY_VIOLATION: too many
                partitions in one request).
        """
        try:
            kind = ElectionType[election_type.upper()]
        except KeyError:
            raise ValueError(
                f"election type must be preferred or unclean, got {election_type[:40]!r}"
            ) from None
        request = ElectLeadersRequest(
            election_type=kind, partitions=None if partitions is None else tuple(partitions)
        )
        response: ElectLeadersResponse = self._client.send(request, timeout=timeout)
        if response.error_code is not ErrorCode.NONE:
            raise error_for(response.error_code, response.error_message)
        out: dict[TopicPartition, KraftError | None] = {}
        for topic in response.replica_election_results:
            for p in topic.partition_results:
                tp = TopicPartition(topic.topic, p.partition)
                out[tp] = (
                    None
                    if p.error_code is ErrorCode.NONE
                    else error_for(p.error_code, p.error_message or str(tp))
                )
        return out

    def list_offsets(
        self,
        partitions: Mapping[TopicPartition, int | str],
        *,
        read_committed: bool = False,
        timeout: float | None = None,
    ) -> dict[TopicPartition, ListedOffset | KraftError]:
        """Kafka's ``Admin.listOffsets`` (kafka-get-offsets.sh): for each partition,
        ``"earliest"`` (the log start offset), ``"latest"`` (the log end offset, or with
        ``read_committed`` the last stable offset) or a timestamp in ms (the first offset whose
        record's timestamp is at or after it; offset -1 when there is none).

        Returns:
            Each partition's `ListedOffset`, or the error it got (e.g.
            `UnknownTopicOrPartitionError`, `LeaderNotAvailableError`).

        Raises:
            ValueError: a spec that is neither ``earliest``, ``latest`` nor a timestamp >= 0.
        """
        queries = {tp: offset_spec(spec) for tp, spec in partitions.items()}
        cluster = self.describe_cluster(
            topic_names=sorted({tp.topic for tp in queries}), timeout=timeout
        )
        return list_offsets(
            cluster,
            queries,
            isolation_level=1 if read_committed else 0,
            timeout=timeout or self._client.timeout,
            tls=self.tls,
        )

    # -- consumer groups (`GroupAdmin`) --------------------------------------------------------

    def list_groups(self) -> list[GroupListing]:
        """Every consumer group, from every broker's loaded coordinators."""
        return self._groups.list_groups()

    def describe_group(self, group_id: str) -> GroupDescription:
        """State, members and their assignments, and the coordinator.

        Raises:
            GroupIdNotFoundError: no such group.
        """
        return self._groups.describe_group(group_id)

    def list_group_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        """Every committed offset of the group (the next offset to read)."""
        return self._groups.list_group_offsets(group_id)

    def alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` for an empty group (an admin commit, as ``reset-offsets``).

        Raises:
            UnknownMemberIdError / NonEmptyGroupError: the group has members.
        """
        self._groups.alter_group_offsets(group_id, offsets)

    def delete_group(self, group_id: str) -> None:
        """Delete an empty group and its committed offsets.

        Raises:
            GroupIdNotFoundError: no such group. NonEmptyGroupError: it has members.
        """
        self._groups.delete_group(group_id)

    # -- transactions (`replication.clients.txn_admin`, KIP-664) --------------------------------

    def list_transactions(
        self,
        *,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        min_duration_ms: int = -1,
    ) -> list[ListedTransaction]:
        """Every transactional id the coordinators know (filtered by Kafka's state names,
        producer ids, and how long an ongoing transaction has run)."""
        return self._transactions.list_transactions(
            states=states, producer_ids=producer_ids, duration_filter_ms=min_duration_ms
        )

    def describe_transaction(self, transactional_id: str) -> DescribedTransaction:
        """Its state, producer id and epoch, timeout, start time and partitions.

        Raises:
            TransactionalIdNotFoundError: no such transactional id.
        """
        return self._transactions.describe_transaction(transactional_id)

    def abort_transaction(self, spec: AbortSpec) -> None:
        """Write an abort marker for a hanging transaction (needs CLUSTER_ACTION)."""
        self._transactions.abort_transaction(spec)

    def describe_producers(self, partition: TopicPartition) -> list[ProducerDescription]:
        """The partition's active producers, from its leader (KIP-664)."""
        return self._transactions.describe_producers(partition)

    # -- ACLs (`replication.clients.acl_admin`) ------------------------------------------------

    def create_acls(self, bindings: Sequence[AclBinding], *, timeout: float | None = None) -> None:
        """Kafka's ``Admin.createAcls``: store ``bindings`` in the metadata log.

        Raises:
            InvalidRequestError: a malformed binding. ClusterAuthorizationFailedError: the
                caller may not ALTER the cluster.
        """
        acl_admin.create_acls(self._client, bindings, timeout=timeout)

    def describe_acls(
        self, acl_filter: AclBindingFilter | None = None, *, timeout: float | None = None
    ) -> tuple[AclBinding, ...]:
        """Kafka's ``Admin.describeAcls``: the ACLs the filter matches (None: every one)."""
        return acl_admin.describe_acls(
            self._client, acl_filter or AclBindingFilter(), timeout=timeout
        )

    def delete_acls(
        self, filters: Sequence[AclBindingFilter], *, timeout: float | None = None
    ) -> tuple[AclBinding, ...]:
        """Kafka's ``Admin.deleteAcls``: remove what the filters match; returns it."""
        return acl_admin.delete_acls(self._client, filters, timeout=timeout)

    # -- cluster -------------------------------------------------------------------------------

    def describe_cluster(
        self, *, topic_names: Sequence[str] | None = None, timeout: float | None = None
    ) -> DescribeClusterResponse:
        """Brokers (id, listeners, rack, fenced) and topics, from the active controller's
        committed image as the answering broker forwards it."""
        request = DescribeClusterRequest(
            topic_names=None if topic_names is None else tuple(topic_names)
        )
        response: DescribeClusterResponse = self._client.send(request, timeout=timeout)
        if response.error_code is not ErrorCode.NONE:
            raise error_for(response.error_code, response.error_message)
        return response

    def describe_features(self, *, timeout: float | None = None) -> FeatureMetadata:
        """Kafka's ``Admin.describeFeatures`` (KIP-584): the finalized levels, their epoch and
        the ranges every registered broker supports, from the active controller."""
        return feature_admin.feature_metadata(
            self.describe_cluster(topic_names=(), timeout=timeout)
        )

    def update_features(
        self,
        levels: Mapping[str, int],
        *,
        downgrade: bool = False,
        unsafe: bool = False,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> None:
        """Kafka's ``Admin.updateFeatures`` (KIP-584, KIP-778): finalize each feature at its
        level, all or nothing, once committed. A lower level needs ``downgrade`` (``unsafe``:
        Kafka's UNSAFE_DOWNGRADE), a higher one must not have it; ``validate_only`` checks.

        Raises:
            InvalidUpdateVersionError: the cluster may not take a level.
            ClusterAuthorizationFailedError: the caller may not ALTER the cluster.
        """
        feature_admin.update_features(
            self._client,
            levels,
            downgrade=downgrade,
            unsafe=unsafe,
            validate_only=validate_only,
            timeout=timeout,
        )

    def describe_quorum(self, *, timeout: float | None = None) -> DescribeQuorumResponse:
        """KIP-595 DescribeQuorum: leader, epoch, high watermark, voters' and observers' log
        end offsets and lag."""
        return self._client.describe_quorum(timeout=timeout)


__all__ = ["AdminClient", "PartitionReassignment"]
