"""The exception classes of Kafka's error codes 45 and up and of kraft's own (1000 and up);
the transactions' (48-55, KIP-98) come first.

Import them from `storage.errors`, which holds the lower codes and the code -> class table.
"""

from __future__ import annotations

from typing import final

from storage.error_codes import ErrorCode, KraftError


@final
class InvalidTxnStateError(KraftError):
    """The transaction is not in a state that allows this request (Kafka error 48)."""

    code = ErrorCode.INVALID_TXN_STATE


@final
class InvalidProducerIdMappingError(KraftError):
    """The producer id is not the one of this transactional id (Kafka error 49)."""

    code = ErrorCode.INVALID_PRODUCER_ID_MAPPING


@final
class InvalidTransactionTimeoutError(KraftError):
    """The transaction timeout exceeds ``transaction.max.timeout.ms`` (Kafka error 50)."""

    code = ErrorCode.INVALID_TRANSACTION_TIMEOUT


@final
class ConcurrentTransactionsError(KraftError):
    """The previous transaction of this id is still completing; retry (Kafka error 51)."""

    code = ErrorCode.CONCURRENT_TRANSACTIONS
    retriable = True


@final
class TransactionCoordinatorFencedError(KraftError):
    """A newer transaction coordinator has taken over (Kafka error 52)."""

    code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


@final
class OperationNotAttemptedError(KraftError):
    """Not attempted because another part of the request failed (Kafka error 55)."""

    code = ErrorCode.OPERATION_NOT_ATTEMPTED


@final
class TransactionalIdNotFoundError(KraftError):
    """No transaction has this transactional id (Kafka error 105)."""

    code = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


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
class UnstableOffsetCommitError(KraftError):
    """An offset asked for with ``require_stable`` is pending in an open transaction (Kafka
    error 88, KIP-447): retriable once the transaction ends."""

    code = ErrorCode.UNSTABLE_OFFSET_COMMIT


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
class TransactionAbortableError(KraftError):
    """The transaction must be aborted: e.g. a partition leader found the partition was not
    added to it (Kafka error 120, KIP-890)."""

    code = ErrorCode.TRANSACTION_ABORTABLE


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
    """An update version is invalid (Kafka error 95): a stale partition epoch in an
    AlterPartition, or a feature level UpdateFeatures may not finalize (KIP-584)."""

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


__all__ = [
    "BrokerIdNotRegisteredError",
    "ConcurrentTransactionsError",
    "DuplicateBrokerRegistrationError",
    "DuplicateSequenceNumberError",
    "DuplicateVoterError",
    "ElectionNotNeededError",
    "EligibleLeadersNotAvailableError",
    "FencedInstanceIdError",
    "FencedLeaderEpochError",
    "FencedMemberEpochError",
    "GroupIdNotFoundError",
    "GroupMaxSizeReachedError",
    "GroupSubscribedToTopicError",
    "InconsistentVoterSetError",
    "IneligibleReplicaError",
    "InvalidOffsetError",
    "InvalidProducerEpochError",
    "InvalidProducerIdMappingError",
    "InvalidRecordError",
    "InvalidTransactionTimeoutError",
    "InvalidTxnStateError",
    "InvalidUpdateVersionError",
    "KafkaStorageError",
    "LogClosedError",
    "MemberIdRequiredError",
    "NewLeaderElectedError",
    "NoReassignmentInProgressError",
    "NonEmptyGroupError",
    "OffsetNotAvailableError",
    "OperationNotAttemptedError",
    "OutOfOrderSequenceNumberError",
    "PositionOutOfRangeError",
    "PreferredLeaderNotAvailableError",
    "ProducerFencedError",
    "ReassignmentInProgressError",
    "ResourceNotFoundError",
    "SecurityDisabledError",
    "SnapshotNotFoundError",
    "SslAuthenticationFailedError",
    "StaleBrokerEpochError",
    "StaleMemberEpochError",
    "TransactionAbortableError",
    "TransactionCoordinatorFencedError",
    "TransactionalIdNotFoundError",
    "UnknownLeaderEpochError",
    "UnknownProducerIdError",
    "UnknownTopicIdError",
    "UnstableOffsetCommitError",
    "UnsupportedAssignorError",
    "UnsupportedCompressionTypeError",
    "VoterNotFoundError",
]
