"""The metadata state machine: records, their codec, and the image they fold into (KIP-631).

Usage
-----
The active controller (``kraft.controller``) decides which records to write; Raft replicates
them as record values inside log batches; every controller and broker replays the committed ones
into a `MetadataImage`::

    from kraft.metadata import MetadataImage, TopicRecord, decode_record, encode_record

    payload = encode_record(TopicRecord(name="orders", topic_id=topic_id))  # -> Raft propose
    ...
    image = MetadataImage.empty()
    for entry in committed_entries:                       # from the Raft core, in log order
        image = image.apply(decode_record(entry.value), entry.offset, entry.epoch)

    image.describe_topic("orders")      # partitions: leader, leader_epoch, replicas, isr
    image.topic_config("orders", "min.insync.replicas")   # effective value, Kafka defaults

The image is **immutable**: ``apply`` returns a new image that shares unchanged state with the
old one, so holding several versions (committed vs pending, a snapshot in progress) is cheap.
A batch is best applied with ``apply_batch`` (one copy-on-write pass).

Snapshots (KIP-630): ``data = image.to_snapshot()`` and ``MetadataImage.from_snapshot(data)``
round-trip exactly; ``image.to_records()`` gives the records that rebuild the image.

Who does what: this package does no I/O and reads no clock. The shell persists the log and the
snapshots; a replayed record that contradicts the image raises `InvariantViolation` (a bug, so
the node must stop rather than diverge).
"""

from kraft.metadata.codec import (
    RECORD_VERSIONS,
    decode_record,
    encode_record,
    record_from_dict,
    record_to_dict,
)
from kraft.metadata.configs import (
    BROKER_CONFIGS,
    CLUSTER_DEFAULT_RESOURCE,
    TOPIC_CONFIGS,
    ConfigDef,
    ConfigType,
    parse_bool,
    parse_int,
    validate_config,
)
from kraft.metadata.delta import MetadataDelta
from kraft.metadata.image import (
    BrokerRegistration,
    BrokerState,
    MetadataImage,
    PartitionDescription,
    PartitionRegistration,
    TopicDescription,
    TopicImage,
)
from kraft.metadata.records import (
    NO_LEADER,
    RECORD_TYPE_IDS,
    AccessControlEntryRecord,
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    Endpoint,
    FeatureLevelRecord,
    FenceBrokerRecord,
    LeaderRecoveryState,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)

__all__ = [
    "BROKER_CONFIGS",
    "CLUSTER_DEFAULT_RESOURCE",
    "NO_LEADER",
    "RECORD_TYPE_IDS",
    "RECORD_VERSIONS",
    "TOPIC_CONFIGS",
    "AccessControlEntryRecord",
    "BrokerFeature",
    "BrokerRegistration",
    "BrokerRegistrationChangeRecord",
    "BrokerState",
    "ConfigDef",
    "ConfigRecord",
    "ConfigResourceType",
    "ConfigType",
    "Endpoint",
    "FeatureLevelRecord",
    "FenceBrokerRecord",
    "LeaderRecoveryState",
    "MetadataDelta",
    "MetadataImage",
    "MetadataRecord",
    "NoOpRecord",
    "PartitionChangeRecord",
    "PartitionDescription",
    "PartitionRecord",
    "PartitionRegistration",
    "ProducerIdsRecord",
    "RegisterBrokerRecord",
    "RemoveAccessControlEntryRecord",
    "RemoveTopicRecord",
    "TopicDescription",
    "TopicImage",
    "TopicRecord",
    "UnfenceBrokerRecord",
    "UnregisterBrokerRecord",
    "decode_record",
    "encode_record",
    "parse_bool",
    "parse_int",
    "record_from_dict",
    "record_to_dict",
    "validate_config",
]
