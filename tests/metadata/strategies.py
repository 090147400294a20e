"""Hypothesis strategies for metadata records."""

from __future__ import annotations

from hypothesis import strategies as st

from kraft.metadata import (
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
from kraft.security.acls import AclOperation, AclPermissionType, PatternType, ResourceType

ids = st.integers(min_value=-1, max_value=2**31 - 1)
offsets = st.integers(min_value=-1, max_value=2**63 - 1)
text = st.text(max_size=20)
broker_lists = st.lists(ids, max_size=5).map(tuple)
endpoints = st.builds(
    Endpoint, name=text, host=text, port=st.integers(0, 65535), security_protocol=text
)

broker_features = st.builds(
    BrokerFeature,
    name=text,
    min_supported_version=st.integers(0, 32767),
    max_supported_version=st.integers(0, 32767),
)

records: st.SearchStrategy[MetadataRecord] = st.one_of(
    st.builds(
        RegisterBrokerRecord,
        broker_id=ids,
        incarnation_id=text,
        broker_epoch=offsets,
        listeners=st.lists(endpoints, max_size=3).map(tuple),
        rack=st.none() | text,
        fenced=st.booleans(),
        in_controlled_shutdown=st.booleans(),
        features=st.lists(broker_features, max_size=2).map(tuple),
    ),
    st.builds(UnregisterBrokerRecord, broker_id=ids, broker_epoch=offsets),
    st.builds(FenceBrokerRecord, broker_id=ids, broker_epoch=offsets),
    st.builds(UnfenceBrokerRecord, broker_id=ids, broker_epoch=offsets),
    st.builds(
        BrokerRegistrationChangeRecord,
        broker_id=ids,
        broker_epoch=offsets,
        fenced=st.none() | st.booleans(),
        in_controlled_shutdown=st.none() | st.booleans(),
    ),
    st.builds(TopicRecord, name=text, topic_id=text),
    st.builds(
        PartitionRecord,
        topic_id=text,
        partition=ids,
        replicas=broker_lists,
        isr=broker_lists,
        leader=ids,
        leader_epoch=ids,
        partition_epoch=ids,
        leader_recovery_state=st.sampled_from(LeaderRecoveryState),
    ),
    st.builds(
        PartitionChangeRecord,
        topic_id=text,
        partition=ids,
        isr=st.none() | broker_lists,
        leader=st.none() | ids,
        replicas=st.none() | broker_lists,
        leader_recovery_state=st.none() | st.sampled_from(LeaderRecoveryState),
    ),
    st.builds(RemoveTopicRecord, topic_id=text),
    st.builds(
        ConfigRecord,
        resource_type=st.sampled_from(ConfigResourceType),
        resource_name=text,
        name=text,
        value=st.none() | text,
    ),
    st.builds(ProducerIdsRecord, broker_id=ids, broker_epoch=offsets, next_producer_id=offsets),
    st.just(NoOpRecord()),
    st.builds(FeatureLevelRecord, name=text, feature_level=st.integers(0, 2**15 - 1)),
    st.builds(
        AccessControlEntryRecord,
        acl_id=text,
        resource_type=st.sampled_from(ResourceType),
        resource_name=text,
        pattern_type=st.sampled_from(PatternType),
        principal=text,
        host=text,
        operation=st.sampled_from(AclOperation),
        permission_type=st.sampled_from(AclPermissionType),
    ),
    st.builds(RemoveAccessControlEntryRecord, acl_id=text),
)
