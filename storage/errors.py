"""Every error a kraft client or peer can see: Kafka's error codes, one exception class each.

`ErrorCode` mirrors ``proto/kraft/v1/errors.proto`` value for value (a test checks both
directions); numbers and names are Kafka's own (``org.apache.kafka.common.protocol.Errors``),
so a Kafka user recognises them. Codes kraft adds are numbered from 1000.

NB: this module lives in ``storage`` rather than ``kraft`` because ``storage`` is the root of the
dependency graph (``storage <- kraft <- replication <- spark``) and raises these errors itself.
The `kraft` package names the most used ones (``from kraft import KraftError, ErrorCode``).

Operating errors carry a code; broken invariants are programmer errors and use ``assert`` or
`InvariantViolation` (which has no code and must never cross the wire).
"""

from __future__ import annotations

import enum
from typing import ClassVar, final


class ErrorCode(enum.IntEnum):
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    SECURITY_DISABLED = 54
    KAFKA_STORAGE_ERROR = 56
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    FENCED_MEMBER_EPOCH = 110
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    # kraft's own codes (no Kafka equivalent).
    LOG_CLOSED = 1000
    INVALID_OFFSET = 1001
    SSL_AUTHENTICATION_FAILED = 1002


class KraftError(Exception):
    """Base of every operating error; ``code`` goes on the wire, ``retriable`` drives retries."""

    code: ClassVar[ErrorCode] = ErrorCode.UNKNOWN_SERVER_ERROR
    retriable: ClassVar[bool] = False

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.__class__.__doc__ or self.code.name)
        self.message = message or (self.__class__.__doc__ or self.code.name).strip()

    def __reduce__(self) -> tuple[object, ...]:
        # Keep errors picklable across Spark and multiprocessing boundaries.
        return (self.__class__, (self.message,))


class InvariantViolation(AssertionError):
    """A broken internal invariant: a programmer error, never sent to a peer."""


@final
class UnknownServerError(KraftError):
    """An unexpected server error (Kafka error -1)."""

    code = ErrorCode.UNKNOWN_SERVER_ERROR


@final
class OffsetOutOfRangeError(KraftError):
    """The requested offset is outside the log's range (Kafka error 1)."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE

    def __init__(
        self, message: str = "", *, log_start_offset: int = -1, log_end_offset: int = -1
    ) -> None:
        if not message and log_start_offset >= 0:
            message = (
                f"offset out of range: valid offsets are [{log_start_offset}, {log_end_offset})"
            )
        super().__init__(message)
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset

    def __reduce__(self) -> tuple[object, ...]:
        return (
            _rebuild_offset_out_of_range,
            (self.message, self.log_start_offset, self.log_end_offset),
        )


def _rebuild_offset_out_of_range(message: str, start: int, end: int) -> OffsetOutOfRangeError:
    return OffsetOutOfRangeError(message, log_start_offset=start, log_end_offset=end)


@final
class CorruptRecordError(KraftError):
    """A record batch failed its CRC or header checks (Kafka error 2, CORRUPT_MESSAGE).

    A consumer that meets one sets ``topic``, ``partition`` and ``offset`` (where consumption
    of the partition stopped) and ``next_offset`` (the offset after the bad batch, or -1 when
    its header is unreadable): ``seek(tp, next_offset)`` skips it.
    """

    code = ErrorCode.CORRUPT_MESSAGE
    retriable = True

    def __init__(
        self,
        message: str = "",
        *,
        topic: str = "",
        partition: int = -1,
        offset: int = -1,
        next_offset: int = -1,
    ) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.next_offset = next_offset

    def __reduce__(self) -> tuple[object, ...]:
        return (
            _rebuild_corrupt_record,
            (self.message, self.topic, self.partition, self.offset, self.next_offset),
        )


def _rebuild_corrupt_record(
    message: str, topic: str, partition: int, offset: int, next_offset: int
) -> CorruptRecordError:
    return CorruptRecordError(
        message, topic=topic, partition=partition, offset=offset, next_offset=next_offset
    )


@final
class UnknownTopicOrPartitionError(KraftError):
    """This server does not host the topic-partition (Kafka error 3)."""

    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    retriable = True


@final
class LeaderNotAvailableError(KraftError):
    """The partition has no leader right now, e.g. during an election (Kafka error 5)."""

    code = ErrorCode.LEADER_NOT_AVAILABLE
    retriable = True


@final
class NotLeaderOrFollowerError(KraftError):
    """This replica is not the partition leader (Kafka error 6)."""

    code = ErrorCode.NOT_LEADER_OR_FOLLOWER
    retriable = True


@final
class RequestTimedOutError(KraftError):
    """The request did not complete within its timeout (Kafka error 7)."""

    code = ErrorCode.REQUEST_TIMED_OUT
    retriable = True


@final
class BrokerNotAvailableError(KraftError):
    """The broker is not available (Kafka error 8)."""

    code = ErrorCode.BROKER_NOT_AVAILABLE
    retriable = True


@final
class ReplicaNotAvailableError(KraftError):
    """The replica is not available for the requested partition (Kafka error 9)."""

    code = ErrorCode.REPLICA_NOT_AVAILABLE
    retriable = True


@final
class RecordTooLargeError(KraftError):
    """A batch is larger than ``max.message.bytes`` or ``segment.bytes`` (Kafka error 10)."""

    code = ErrorCode.MESSAGE_TOO_LARGE


@final
class NetworkError(KraftError):
    """The connection to the server failed or was cut (Kafka error 13)."""

    code = ErrorCode.NETWORK_EXCEPTION
    retriable = True


@final
class CoordinatorLoadInProgressError(KraftError):
    """The group coordinator is still loading its offsets (Kafka error 14)."""

    code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    retriable = True


@final
class CoordinatorNotAvailableError(KraftError):
    """The group coordinator is not available (Kafka error 15)."""

    code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    retriable = True


@final
class NotCoordinatorError(KraftError):
    """This broker is not the coordinator of the group (Kafka error 16)."""

    code = ErrorCode.NOT_COORDINATOR
    retriable = True


@final
class InvalidTopicError(KraftError):
    """The topic name is invalid (Kafka error 17)."""

    code = ErrorCode.INVALID_TOPIC_EXCEPTION


@final
class RecordListTooLargeError(KraftError):
    """The request's record list is larger than the server accepts (Kafka error 18)."""

    code = ErrorCode.RECORD_LIST_TOO_LARGE


@final
class NotEnoughReplicasError(KraftError):
    """The ISR is smaller than ``min.insync.replicas``; nothing was appended (Kafka error 19)."""

    code = ErrorCode.NOT_ENOUGH_REPLICAS
    retriable = True


@final
class NotEnoughReplicasAfterAppendError(KraftError):
    """Appended, but the ISR shrank below ``min.insync.replicas`` before it was
    replicated (Kafka error 20)."""

    code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    retriable = True


@final
class InvalidRequiredAcksError(KraftError):
    """``acks`` must be 0, 1 or -1/all (Kafka error 21)."""

    code = ErrorCode.INVALID_REQUIRED_ACKS


@final
class IllegalGenerationError(KraftError):
    """The group generation is stale (Kafka error 22)."""

    code = ErrorCode.ILLEGAL_GENERATION


@final
class InconsistentGroupProtocolError(KraftError):
    """The member's protocols do not match the group's (Kafka error 23)."""

    code = ErrorCode.INCONSISTENT_GROUP_PROTOCOL


@final
class InvalidGroupIdError(KraftError):
    """The group id is invalid (Kafka error 24)."""

    code = ErrorCode.INVALID_GROUP_ID


@final
class UnknownMemberIdError(KraftError):
    """The coordinator does not know this member (Kafka error 25)."""

    code = ErrorCode.UNKNOWN_MEMBER_ID


@final
class InvalidSessionTimeoutError(KraftError):
    """The session timeout is outside the allowed range (Kafka error 26)."""

    code = ErrorCode.INVALID_SESSION_TIMEOUT


@final
class RebalanceInProgressError(KraftError):
    """The group is rebalancing; rejoin (Kafka error 27)."""

    code = ErrorCode.REBALANCE_IN_PROGRESS


@final
class TopicAuthorizationFailedError(KraftError):
    """The principal may not access this topic (Kafka error 29)."""

    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED


@final
class GroupAuthorizationFailedError(KraftError):
    """The principal may not access this group (Kafka error 30)."""

    code = ErrorCode.GROUP_AUTHORIZATION_FAILED


@final
class ClusterAuthorizationFailedError(KraftError):
    """The principal may not perform this cluster action (Kafka error 31)."""

    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


@final
class InvalidTimestampError(KraftError):
    """A timestamp is out of the acceptable range (Kafka error 32)."""

    code = ErrorCode.INVALID_TIMESTAMP


@final
class UnsupportedVersionError(KraftError):
    """The request version or record format is not supported (Kafka error 35)."""

    code = ErrorCode.UNSUPPORTED_VERSION


@final
class TopicAlreadyExistsError(KraftError):
    """A topic with this name already exists (Kafka error 36)."""

    code = ErrorCode.TOPIC_ALREADY_EXISTS


@final
class InvalidPartitionsError(KraftError):
    """The number of partitions is invalid (Kafka error 37)."""

    code = ErrorCode.INVALID_PARTITIONS


@final
class InvalidReplicationFactorError(KraftError):
    """The replication factor is invalid or larger than the live brokers (Kafka error 38)."""

    code = ErrorCode.INVALID_REPLICATION_FACTOR


@final
class InvalidReplicaAssignmentError(KraftError):
    """The replica assignment is invalid (Kafka error 39)."""

    code = ErrorCode.INVALID_REPLICA_ASSIGNMENT


@final
class InvalidConfigError(KraftError):
    """A configuration key or value is invalid (Kafka error 40)."""

    code = ErrorCode.INVALID_CONFIG


@final
class NotControllerError(KraftError):
    """This controller is not the active controller (Kafka error 41)."""

    code = ErrorCode.NOT_CONTROLLER
    retriable = True

    def __init__(
        self, message: str = "", *, leader_id: int | None = None, leader_address: str = ""
    ) -> None:
        if not message:
            message = f"not the active controller (leader: {leader_id}, {leader_address or '?'})"
        super().__init__(message)
        self.leader_id = leader_id
        self.leader_address = leader_address

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_not_controller, (self.message, self.leader_id, self.leader_address))


def _rebuild_not_controller(message: str, leader: int | None, address: str) -> NotControllerError:
    return NotControllerError(message, leader_id=leader, leader_address=address)


@final
class InvalidRequestError(KraftError):
    """The request is malformed or not allowed in this state (Kafka error 42)."""

    code = ErrorCode.INVALID_REQUEST


@final
class PolicyViolationError(KraftError):
    """The request violates a configured policy (Kafka error 44)."""

    code = ErrorCode.POLICY_VIOLATION


@final
class OutOfOrderSequenceNumberError(KraftError):
    """The broker got a sequence number beyond the next expected one (Kafka error 45)."""

    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


@final
class DuplicateSequenceNumberError(KraftError):
    """The batch is a duplicate of one already appended (Kafka error 46)."""

    code = ErrorCode.DUPLICATE_SEQUENCE_NUMBER


@final
class InvalidProducerEpochError(KraftError):
    """The producer epoch is older than the broker's (Kafka error 47)."""

    code = ErrorCode.INVALID_PRODUCER_EPOCH


@final
class SecurityDisabledError(KraftError):
    """An ACL request reached a cluster that runs no authorizer (Kafka error 54): set
    ``authorizer.class.name`` on every node (``kraft cluster up --tls --authorizer``)."""

    code = ErrorCode.SECURITY_DISABLED


@final
class KafkaStorageError(KraftError):
    """A disk error on the server (Kafka error 56)."""

    code = ErrorCode.KAFKA_STORAGE_ERROR
    retriable = True


@final
class UnknownProducerIdError(KraftError):
    """The broker has no state for this producer id (Kafka error 59)."""

    code = ErrorCode.UNKNOWN_PRODUCER_ID


@final
class ReassignmentInProgressError(KraftError):
    """A reassignment is already running for this partition (Kafka error 60)."""

    code = ErrorCode.REASSIGNMENT_IN_PROGRESS


@final
class NoReassignmentInProgressError(KraftError):
    """A cancel named a partition with no reassignment in progress (Kafka error 85)."""

    code = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


@final
class NonEmptyGroupError(KraftError):
    """The group still has members, so it cannot be deleted or reset (Kafka error 68)."""

    code = ErrorCode.NON_EMPTY_GROUP


@final
class GroupIdNotFoundError(KraftError):
    """The group does not exist (Kafka error 69)."""

    code = ErrorCode.GROUP_ID_NOT_FOUND


@final
class FencedLeaderEpochError(KraftError):
    """The request's leader epoch is older than this replica's (Kafka error 74)."""

    code = ErrorCode.FENCED_LEADER_EPOCH
    retriable = True


@final
class UnknownLeaderEpochError(KraftError):
    """The request's leader epoch is newer than this replica's (Kafka error 75)."""

    code = ErrorCode.UNKNOWN_LEADER_EPOCH
    retriable = True


@final
class UnsupportedCompressionTypeError(KraftError):
    """The batch uses a compression codec kraft does not support (Kafka error 76)."""

    code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


@final
class StaleBrokerEpochError(KraftError):
    """The broker epoch in the request is stale (Kafka error 77)."""

    code = ErrorCode.STALE_BROKER_EPOCH


@final
class OffsetNotAvailableError(KraftError):
    """The offset is not available yet, e.g. during a leader change (Kafka error 78)."""

    code = ErrorCode.OFFSET_NOT_AVAILABLE
    retriable = True


@final
class MemberIdRequiredError(KraftError):
    """A classic group's JoinGroup must be sent again with the member id the response gives
    (Kafka error 79, KIP-394)."""

    code = ErrorCode.MEMBER_ID_REQUIRED


@final
class PreferredLeaderNotAvailableError(KraftError):
    """The preferred leader is not available (Kafka error 80)."""

    code = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    retriable = True


@final
class GroupMaxSizeReachedError(KraftError):
    """The group already has `group.consumer.max.size` members (Kafka error 81)."""

    code = ErrorCode.GROUP_MAX_SIZE_REACHED


@final
class FencedInstanceIdError(KraftError):
    """Another member of the classic group now holds this ``group.instance.id`` (Kafka error 82,
    KIP-345)."""

    code = ErrorCode.FENCED_INSTANCE_ID


@final
class EligibleLeadersNotAvailableError(KraftError):
    """No eligible replica can lead this partition (Kafka error 83)."""

    code = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    retriable = True


@final
class ElectionNotNeededError(KraftError):
    """The partition already has its preferred leader (Kafka error 84)."""

    code = ErrorCode.ELECTION_NOT_NEEDED


@final
class GroupSubscribedToTopicError(KraftError):
    """OffsetDelete of a topic the group's members subscribe to (Kafka error 86)."""

    code = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC


@final
class InvalidRecordError(KraftError):
    """A record failed validation (Kafka error 87)."""

    code = ErrorCode.INVALID_RECORD


@final
class ProducerFencedError(KraftError):
    """A newer producer with the same id has fenced this one (Kafka error 90)."""

    code = ErrorCode.PRODUCER_FENCED


@final
class ResourceNotFoundError(KraftError):
    """The named resource does not exist (Kafka error 91)."""

    code = ErrorCode.RESOURCE_NOT_FOUND


@final
class InconsistentVoterSetError(KraftError):
    """The sender's voter set differs from this node's (Kafka error 94)."""

    code = ErrorCode.INCONSISTENT_VOTER_SET


@final
class DuplicateVoterError(KraftError):
    """The node to add is a voter already (Kafka error 126, KIP-853 AddRaftVoter)."""

    code = ErrorCode.DUPLICATE_VOTER


@final
class VoterNotFoundError(KraftError):
    """The node to remove is not a voter (Kafka error 127, KIP-853 RemoveRaftVoter)."""

    code = ErrorCode.VOTER_NOT_FOUND


@final
class InvalidUpdateVersionError(KraftError):
    """The partition epoch in an AlterPartition is stale (Kafka error 95)."""

    code = ErrorCode.INVALID_UPDATE_VERSION


@final
class SnapshotNotFoundError(KraftError):
    """The requested snapshot does not exist (Kafka error 98)."""

    code = ErrorCode.SNAPSHOT_NOT_FOUND


@final
class PositionOutOfRangeError(KraftError):
    """The requested position is outside the snapshot (Kafka error 99)."""

    code = ErrorCode.POSITION_OUT_OF_RANGE


@final
class UnknownTopicIdError(KraftError):
    """No topic has this id (Kafka error 100)."""

    code = ErrorCode.UNKNOWN_TOPIC_ID
    retriable = True


@final
class DuplicateBrokerRegistrationError(KraftError):
    """Another live incarnation holds this broker id (Kafka error 101)."""

    code = ErrorCode.DUPLICATE_BROKER_REGISTRATION


@final
class BrokerIdNotRegisteredError(KraftError):
    """The broker id is not registered with the controller (Kafka error 102)."""

    code = ErrorCode.BROKER_ID_NOT_REGISTERED


@final
class IneligibleReplicaError(KraftError):
    """A proposed ISR member is fenced, shutting down or stale (Kafka error 107, KIP-841)."""

    code = ErrorCode.INELIGIBLE_REPLICA


@final
class NewLeaderElectedError(KraftError):
    """A new leader was elected while the request was pending (Kafka error 108)."""

    code = ErrorCode.NEW_LEADER_ELECTED


@final
class FencedMemberEpochError(KraftError):
    """The member epoch is not the coordinator's; rejoin with epoch 0 (Kafka error 110, KIP-848)."""

    code = ErrorCode.FENCED_MEMBER_EPOCH


@final
class UnsupportedAssignorError(KraftError):
    """The group does not know the requested server-side assignor (Kafka error 112, KIP-848)."""

    code = ErrorCode.UNSUPPORTED_ASSIGNOR


@final
class StaleMemberEpochError(KraftError):
    """The commit carries an older member epoch than the member's (Kafka error 113, KIP-848)."""

    code = ErrorCode.STALE_MEMBER_EPOCH


@final
class LogClosedError(KraftError):
    """The log was closed (kraft error 1000)."""

    code = ErrorCode.LOG_CLOSED


@final
class InvalidOffsetError(KraftError):
    """An offset argument is invalid, e.g. negative or not contiguous (kraft error 1001)."""

    code = ErrorCode.INVALID_OFFSET


@final
class SslAuthenticationFailedError(KraftError):
    """The TLS handshake was refused: the message names the side that refused and why
    (kraft error 1002; Kafka's ``SslAuthenticationException``, which has no wire code there
    because Kafka's handshake is not an RPC). Not retriable: a certificate does not fix
    itself."""

    code = ErrorCode.SSL_AUTHENTICATION_FAILED


def _all_error_classes() -> dict[ErrorCode, type[KraftError]]:
    table: dict[ErrorCode, type[KraftError]] = {}
    for cls in KraftError.__subclasses__():
        assert cls.code not in table, f"two classes for {cls.code!r}"
        table[cls.code] = cls
    return table


ERROR_CLASSES: dict[ErrorCode, type[KraftError]] = _all_error_classes()


def error_for(code: int, message: str = "") -> KraftError:
    """The exception for a wire error code (an unknown code becomes UnknownServerError)."""
    try:
        cls = ERROR_CLASSES[ErrorCode(code)]
    except (ValueError, KeyError):
        return UnknownServerError(message or f"unknown error code {code}")
    return cls(message)
