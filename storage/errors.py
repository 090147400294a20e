"""Every error a kraft client or peer can see: Kafka's error codes, one exception class each.

`ErrorCode` mirrors ``proto/kraft/v1/errors.proto`` value for value (a test checks both
directions); numbers and names are Kafka's own (``org.apache.kafka.common.protocol.Errors``),
so a Kafka user recognises them. Codes kraft adds are numbered from 1000. The enum and the base
class live in `storage.error_codes`, the classes of codes 45 and up in `storage.error_classes`;
import any of them from here.

NB: this module lives in ``storage`` rather than ``kraft`` because ``storage`` is the root of the
dependency graph (``storage <- kraft <- replication <- spark``) and raises these errors itself.
The `kraft` package names the most used ones (``from kraft import KraftError, ErrorCode``).

Operating errors carry a code; broken invariants are programmer errors and use ``assert`` or
`InvariantViolation` (which has no code and must never cross the wire).
"""

from __future__ import annotations

from typing import final

from storage.error_classes import (
    BrokerIdNotRegisteredError,
    ConcurrentTransactionsError,
    DuplicateBrokerRegistrationError,
    DuplicateSequenceNumberError,
    DuplicateVoterError,
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    FencedInstanceIdError,
    FencedLeaderEpochError,
    FencedMemberEpochError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    GroupSubscribedToTopicError,
    InconsistentVoterSetError,
    IneligibleReplicaError,
    InvalidOffsetError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidRecordError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    InvalidUpdateVersionError,
    KafkaStorageError,
    LogClosedError,
    MemberIdRequiredError,
    NewLeaderElectedError,
    NonEmptyGroupError,
    NoReassignmentInProgressError,
    OffsetNotAvailableError,
    OperationNotAttemptedError,
    OutOfOrderSequenceNumberError,
    PositionOutOfRangeError,
    PreferredLeaderNotAvailableError,
    ProducerFencedError,
    ReassignmentInProgressError,
    ResourceNotFoundError,
    SecurityDisabledError,
    SnapshotNotFoundError,
    SslAuthenticationFailedError,
    StaleBrokerEpochError,
    StaleMemberEpochError,
    TransactionAbortableError,
    TransactionalIdNotFoundError,
    TransactionCoordinatorFencedError,
    UnknownLeaderEpochError,
    UnknownProducerIdError,
    UnknownTopicIdError,
    UnstableOffsetCommitError,
    UnsupportedAssignorError,
    UnsupportedCompressionTypeError,
    VoterNotFoundError,
)
from storage.error_codes import ErrorCode, InvariantViolation, KraftError


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


__all__ = [
    "ERROR_CLASSES",
    "BrokerIdNotRegisteredError",
    "BrokerNotAvailableError",
    "ClusterAuthorizationFailedError",
    "ConcurrentTransactionsError",
    "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError",
    "CorruptRecordError",
    "DuplicateBrokerRegistrationError",
    "DuplicateSequenceNumberError",
    "DuplicateVoterError",
    "ElectionNotNeededError",
    "EligibleLeadersNotAvailableError",
    "ErrorCode",
    "FencedInstanceIdError",
    "FencedLeaderEpochError",
    "FencedMemberEpochError",
    "GroupAuthorizationFailedError",
    "GroupIdNotFoundError",
    "GroupMaxSizeReachedError",
    "GroupSubscribedToTopicError",
    "IllegalGenerationError",
    "InconsistentGroupProtocolError",
    "InconsistentVoterSetError",
    "IneligibleReplicaError",
    "InvalidConfigError",
    "InvalidGroupIdError",
    "InvalidOffsetError",
    "InvalidPartitionsError",
    "InvalidProducerEpochError",
    "InvalidProducerIdMappingError",
    "InvalidRecordError",
    "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError",
    "InvalidRequestError",
    "InvalidRequiredAcksError",
    "InvalidSessionTimeoutError",
    "InvalidTimestampError",
    "InvalidTopicError",
    "InvalidTransactionTimeoutError",
    "InvalidTxnStateError",
    "InvalidUpdateVersionError",
    "InvariantViolation",
    "KafkaStorageError",
    "KraftError",
    "LeaderNotAvailableError",
    "LogClosedError",
    "MemberIdRequiredError",
    "NetworkError",
    "NewLeaderElectedError",
    "NoReassignmentInProgressError",
    "NonEmptyGroupError",
    "NotControllerError",
    "NotCoordinatorError",
    "NotEnoughReplicasAfterAppendError",
    "NotEnoughReplicasError",
    "NotLeaderOrFollowerError",
    "OffsetNotAvailableError",
    "OffsetOutOfRangeError",
    "OperationNotAttemptedError",
    "OutOfOrderSequenceNumberError",
    "PolicyViolationError",
    "PositionOutOfRangeError",
    "PreferredLeaderNotAvailableError",
    "ProducerFencedError",
    "ReassignmentInProgressError",
    "RebalanceInProgressError",
    "RecordListTooLargeError",
    "RecordTooLargeError",
    "ReplicaNotAvailableError",
    "RequestTimedOutError",
    "ResourceNotFoundError",
    "SecurityDisabledError",
    "SnapshotNotFoundError",
    "SslAuthenticationFailedError",
    "StaleBrokerEpochError",
    "StaleMemberEpochError",
    "TopicAlreadyExistsError",
    "TopicAuthorizationFailedError",
    "TransactionAbortableError",
    "TransactionCoordinatorFencedError",
    "TransactionalIdNotFoundError",
    "UnknownLeaderEpochError",
    "UnknownMemberIdError",
    "UnknownProducerIdError",
    "UnknownServerError",
    "UnknownTopicIdError",
    "UnknownTopicOrPartitionError",
    "UnstableOffsetCommitError",
    "UnsupportedAssignorError",
    "UnsupportedCompressionTypeError",
    "UnsupportedVersionError",
    "VoterNotFoundError",
    "error_for",
]
