"""The scripted sequence: one small function per step, each sending the same requests to one
system and returning its answers as a flat, normalized dict (field -> plain value).

Normalization happens here, by the rules of `kraft.interop.normalize`, so that a dict holds
only what both systems are expected to answer alike: error codes by name, offsets, the
timestamps this client chose, shapes (counts, "leader in ISR") instead of node ids.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kraft.interop.normalize import error_name, is_set_uuid, replica_shape
from kraft.interop.wire import NotServed, Session
from storage.records import SimpleRecord, build_batch, iter_records, split_batches

FIND_COORDINATOR = 10
BASE_TS = 1_700_000_000_000
"""The timestamps of every record this test writes start here (fixed: comparable)."""
MAX_MESSAGE_BYTES = 4096
WAIT_S = 30.0

Fields = dict[str, Any]


class Admin(Protocol):
    """How the sequence sets up its topics on one system (not itself compared)."""

    def create_topic(
        self, name: str, partitions: int, rf: int, config: Mapping[str, str]
    ) -> None: ...

    def delete_topic(self, name: str) -> None: ...


@dataclass
class Target:
    """One system under test."""

    name: str
    session: Session
    admin: Admin
    run: str
    """A per-run prefix of every topic and group name, the same on both systems."""

    def topic(self, suffix: str) -> str:
        return f"{self.run}-{suffix}"

    def ready_topic(
        self, suffix: str, partitions: int = 1, config: Mapping[str, str] | None = None
    ) -> str:
        """Create ``run-suffix`` (replication factor 3) and wait until it has leaders."""
        name = self.topic(suffix)
        self.admin.create_topic(name, partitions, 3, config or {})
        wait_for(lambda: _all_led(self.session, name, partitions), f"leaders of {name}")
        # Metadata may name a leader before that broker acts as one (Kafka answers
        # NOT_LEADER_OR_FOLLOWER meanwhile, and clients retry): wait until each answers.
        wait_for(
            lambda: all(
                error_name(list_offset(self, name, -1, partition=p).error_code) == "NONE"
                for p in range(partitions)
            ),
            f"leaders of {name} serving",
        )
        return name


class WireAdmin:
    """Topic set-up through the Kafka protocol itself (CreateTopics, DeleteTopics)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def create_topic(self, name: str, partitions: int, rf: int, config: Mapping[str, str]) -> None:
        topic = {
            "name": name,
            "num_partitions": partitions,
            "replication_factor": rf,
            "assignments": [],
            "configs": [{"name": k, "value": v} for k, v in config.items()],
        }
        answer = self.session.send(19, {"topics": [topic], "timeout": 30_000})
        code = error_name(answer.topics[0].error_code)
        if code != "NONE":
            raise RuntimeError(f"CreateTopics {name}: {code}")

    def delete_topic(self, name: str) -> None:
        self.session.send(20, {"topics": [{"name": name}], "timeout": 30_000})


def wait_for(check: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} after {timeout:.0f} s")
        time.sleep(0.1)


def _all_led(session: Session, topic: str, partitions: int) -> bool:
    answer = session.metadata([topic])
    parts = [p for t in answer.topics for p in t.partitions if error_name(t.error_code) == "NONE"]
    return len(parts) == partitions and all(int(p.leader_id) >= 0 for p in parts)


# -- request helpers ---------------------------------------------------------------------------


def produce(t: Target, topic: str, batch: bytes, *, acks: int = -1, partition: int = 0) -> Any:
    body = {
        "transactional_id": None,
        "acks": acks,
        "timeout": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
    }
    part = t.session.send(0, body, node=t.session.leader(topic)).responses[0]
    return part.partition_responses[0]


def fetch(
    t: Target,
    topic: str,
    offset: int,
    max_bytes: int = 1 << 20,
    *,
    leader_epoch: int = -1,
    node: int | None = None,
    isolation_level: int = 0,
) -> Any:
    """Fetch partition 0 of ``topic`` from its leader (or from ``node``); ``isolation_level``
    1 is read_committed."""
    body = {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 0,
        "max_bytes": max_bytes,
        "isolation_level": isolation_level,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": leader_epoch,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": max_bytes,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    node = t.session.leader(topic) if node is None else node
    return t.session.send(1, body, node=node).responses[0].partitions[0]


def list_offset(t: Target, topic: str, timestamp: int, *, partition: int = 0) -> Any:
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": partition,
                        "current_leader_epoch": -1,
                        "timestamp": timestamp,
                    }
                ],
            }
        ],
    }
    return t.session.send(2, body, node=t.session.leader(topic, partition)).topics[0].partitions[0]


def records_of(data: bytes | None) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """(offset, timestamp, key, value) of every record in fetched bytes (whole batches)."""
    out = []
    for batch in split_batches(data or b""):
        out += [(r.offset, r.timestamp_ms, r.key, r.value) for r in iter_records(batch)]
    return out


def values(n: int, prefix: str, size: int = 0) -> list[SimpleRecord]:
    return [
        SimpleRecord(value=(f"{prefix}-{i}".encode()).ljust(size, b"."), timestamp_ms=BASE_TS + i)
        for i in range(n)
    ]


# -- the steps ---------------------------------------------------------------------------------


def create_topics_invalid(t: Target, out: Fields) -> None:
    """CreateTopics with bad names, a reserved name, min.insync.replicas above the RF, an RF
    above the brokers, and one valid topic (validate_only)."""
    cases: dict[str, tuple[str, int, dict[str, str]]] = {
        "bad_chars": ("bad name!", 3, {}),
        "dot": (".", 3, {}),
        "dotdot": ("..", 3, {}),
        "too_long": ("x" * 250, 3, {}),
        "reserved_offsets": ("__consumer_offsets", 3, {}),
        "min_isr_above_rf": (t.topic("minisr"), 3, {"min.insync.replicas": "4"}),
        "rf_above_brokers": (t.topic("rf9"), 9, {}),
        "unknown_config": (t.topic("badcfg"), 3, {"no.such.config": "1"}),
        "valid_validate_only": (t.topic("valid"), 3, {}),
    }
    for label, (name, rf, config) in cases.items():
        topic = {
            "name": name,
            "num_partitions": 1,
            "replication_factor": rf,
            "assignments": [],
            "configs": [{"name": k, "value": v} for k, v in config.items()],
        }
        answer = t.session.send(19, {"topics": [topic], "timeout": 30_000, "validate_only": True})
        out[f"{label}.error"] = error_name(answer.topics[0].error_code)


def produce_fetch_edges(t: Target, out: Fields) -> None:
    """Fetch from an empty topic and beyond its end, produce, read back, a record over the
    topic's max.message.bytes."""
    topic = t.ready_topic("edges", config={"max.message.bytes": str(MAX_MESSAGE_BYTES)})
    empty = fetch(t, topic, 0)
    out["empty.error"] = error_name(empty.error_code)
    out["empty.high_watermark"] = int(empty.high_watermark)
    out["empty.log_start_offset"] = int(empty.log_start_offset)
    out["empty.records"] = len(records_of(empty.records))
    out["empty_out_of_range.error"] = error_name(fetch(t, topic, 5).error_code)
    answer = produce(t, topic, build_batch(values(3, "edge"), timestamp_ms=BASE_TS))
    out["produce.error"] = error_name(answer.error_code)
    out["produce.base_offset"] = int(answer.base_offset)
    out["produce.log_start_offset"] = int(answer.log_start_offset)
    out["produce.log_append_time_set"] = answer.log_append_time is not None
    big = build_batch(values(1, "big", MAX_MESSAGE_BYTES * 2), timestamp_ms=BASE_TS)
    out["too_large.error"] = error_name(produce(t, topic, big).error_code)
    read = fetch(t, topic, 0)
    out["fetch.error"] = error_name(read.error_code)
    out["fetch.high_watermark"] = int(read.high_watermark)
    out["fetch.last_stable_offset"] = int(read.last_stable_offset)
    out["fetch.records"] = [
        [o, ts, v.decode() if v else v] for o, ts, _k, v in records_of(read.records)
    ]
    mid = fetch(t, topic, 1)
    out["fetch_mid.first_offset"] = min((r[0] for r in records_of(mid.records)), default=None)
    at_end = fetch(t, topic, 3)
    out["fetch_at_end.error"] = error_name(at_end.error_code)
    out["fetch_at_end.records"] = len(records_of(at_end.records))
    out["fetch_past_end.error"] = error_name(fetch(t, topic, 100).error_code)
    out["fetch_negative.error"] = error_name(fetch(t, topic, -5).error_code)
    unknown = fetch_unknown(t, t.topic("no-such-topic"))
    out["fetch_unknown_topic.error"] = unknown


def produce_refusals(t: Target, out: Fields) -> None:
    """Produce requests a broker must refuse (bad acks, a corrupt CRC, a partition that does
    not exist, a timestamp a day ahead), and requests from a future leader epoch."""
    topic = t.ready_topic("refusals")
    good = build_batch(values(1, "ok"), timestamp_ms=BASE_TS)
    out["acks_2.error"] = error_name(produce(t, topic, good, acks=2).error_code)
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF  # a record byte: the CRC no longer matches
    out["corrupt_crc.error"] = error_name(produce(t, topic, bytes(corrupt)).error_code)
    out["no_such_partition.error"] = error_name(produce(t, topic, good, partition=7).error_code)
    ahead = int(time.time() * 1000) + 86_400_000
    future = build_batch([SimpleRecord(value=b"future", timestamp_ms=ahead)], timestamp_ms=ahead)
    out["timestamp_a_day_ahead.error"] = error_name(produce(t, topic, future).error_code)
    shifted = build_batch(values(1, "shifted"), timestamp_ms=BASE_TS, base_offset=42)
    answer = produce(t, topic, shifted)
    out["client_base_offset_ignored"] = [error_name(answer.error_code), int(answer.base_offset)]
    out["fetch_future_epoch.error"] = error_name(fetch(t, topic, 0, leader_epoch=99).error_code)
    out["fetch_fenced_epoch"] = error_name(fetch(t, topic, 0, leader_epoch=0).error_code)
    out["log.values"] = [v.decode() if v else v for *_, v in records_of(fetch(t, topic, 0).records)]


def fetch_unknown(t: Target, topic: str) -> str:
    """Fetch of a topic that does not exist, sent to the lowest broker id."""
    t.session.metadata([])
    return error_name(fetch(t, topic, 0, node=min(t.session.brokers)).error_code)


def list_offsets_by_time(t: Target, out: Fields) -> None:
    """ListOffsets: earliest, latest, by timestamp before the first, on one, between two, and
    after the last record."""
    topic = t.ready_topic("times")
    out["empty.latest"] = _offset(list_offset(t, topic, -1))
    out["empty.by_time"] = _offset(list_offset(t, topic, BASE_TS))
    records = [SimpleRecord(value=b"r%d" % i, timestamp_ms=BASE_TS + 10 * i) for i in range(4)]
    produce(t, topic, build_batch(records, timestamp_ms=BASE_TS))
    for label, ts in {
        "earliest": -2,
        "latest": -1,
        "before_first": BASE_TS - 1_000,
        "on_first": BASE_TS,
        "between": BASE_TS + 15,
        "on_last": BASE_TS + 30,
        "after_last": BASE_TS + 31,
    }.items():
        out[label] = _offset(list_offset(t, topic, ts))


def _offset(p: Any) -> list[Any]:
    return [error_name(p.error_code), int(p.offset), int(p.timestamp)]


def idempotent_producer(t: Target, out: Fields) -> None:
    """InitProducerId, a batch, the same batch again (a duplicate), a batch out of sequence,
    the next batch in sequence, and what the log holds."""
    topic = t.ready_topic("idem")
    init = _init_producer_id(t)
    out["init.error"] = error_name(init.error_code)
    out["init.producer_id_set"] = int(init.producer_id) >= 0
    out["init.producer_epoch"] = int(init.producer_epoch)
    pid, epoch = int(init.producer_id), int(init.producer_epoch)

    def batch(seq: int, n: int) -> bytes:
        return build_batch(
            values(n, f"s{seq}"),
            timestamp_ms=BASE_TS,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
        )

    for label, data in (
        ("first", batch(0, 2)),
        ("duplicate", batch(0, 2)),
        ("out_of_sequence", batch(5, 1)),
        ("next", batch(2, 1)),
        (
            "epoch_bump_mid_sequence",
            build_batch(
                values(1, "bump"),
                timestamp_ms=BASE_TS,
                producer_id=pid,
                producer_epoch=epoch + 1,
                base_sequence=3,
            ),
        ),
        (
            "epoch_bump_at_zero",
            build_batch(
                values(1, "bump0"),
                timestamp_ms=BASE_TS,
                producer_id=pid,
                producer_epoch=epoch + 1,
                base_sequence=0,
            ),
        ),
        ("stale_epoch", batch(3, 1)),
    ):
        answer = produce(t, topic, data)
        out[f"{label}.error"] = error_name(answer.error_code)
        out[f"{label}.base_offset"] = int(answer.base_offset)
    stored = records_of(fetch(t, topic, 0).records)
    out["log.offsets"] = [o for o, *_ in stored]
    out["log.values"] = [v.decode() if v else v for *_, v in stored]


RETRIABLE = frozenset(
    {"COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR"}
)
"""Answers a Kafka client retries (Kafka's transaction state loads on the first call)."""


def find_coordinator(t: Target, key: str, key_type: int) -> tuple[str, int]:
    """FindCoordinator of a group (``key_type`` 0) or a transactional id (1), retried while
    the coordinator loads: its error name and node."""
    deadline = time.monotonic() + WAIT_S
    while True:
        found = t.session.send(
            FIND_COORDINATOR, {"key_type": key_type, "coordinator_keys": [key]}
        ).coordinators[0]
        code = error_name(found.error_code)
        if code not in RETRIABLE or time.monotonic() > deadline:
            return code, int(found.node_id)
        time.sleep(0.2)


def _init_producer_id(t: Target) -> Any:
    deadline = time.monotonic() + WAIT_S
    while True:
        init = t.session.send(
            22,
            {
                "transactional_id": None,
                "transaction_timeout": 60_000,
                "producer_id": -1,
                "producer_epoch": -1,
            },
        )
        if error_name(init.error_code) not in RETRIABLE or time.monotonic() > deadline:
            return init
        time.sleep(0.2)


def metadata_shapes(t: Target, out: Fields) -> None:
    """Metadata of a 3-partition RF-3 topic (leaders, replicas, ISR as shapes) and of a topic
    that does not exist."""
    topic = t.ready_topic("meta", partitions=3)
    answer = t.session.metadata([topic, t.topic("absent")])
    brokers = sorted(t.session.brokers)
    for tm in sorted(answer.topics, key=lambda x: str(x.name)):
        label = "topic" if str(tm.name) == topic else "absent"
        out[f"{label}.error"] = error_name(tm.error_code)
        out[f"{label}.topic_id_set"] = is_set_uuid(tm.topic_id)
        out[f"{label}.is_internal"] = bool(tm.is_internal)
        for p in sorted(tm.partitions, key=lambda x: int(x.partition_index)):
            shape = replica_shape(
                int(p.leader_id), list(p.replica_nodes), list(p.isr_nodes), brokers
            )
            out[f"{label}.p{int(p.partition_index)}"] = [error_name(p.error_code), *shape]
            out[f"{label}.p{int(p.partition_index)}.leader_epoch"] = int(p.leader_epoch)
    out["brokers"] = len(brokers)


DESCRIBED_KEYS = (
    "retention.ms",
    "cleanup.policy",
    "min.insync.replicas",
    "max.message.bytes",
    "segment.bytes",
    "unclean.leader.election.enable",
)


def describe_configs(t: Target, out: Fields) -> None:
    """DescribeConfigs of a topic with two overrides, with synonyms; and of an unknown topic."""
    topic = t.ready_topic("configs", config={"retention.ms": "123456", "cleanup.policy": "compact"})
    body = {
        "resources": [
            {
                "resource_type": 2,
                "resource_name": topic,
                "configuration_keys": list(DESCRIBED_KEYS),
            },
            {"resource_type": 2, "resource_name": t.topic("absent"), "configuration_keys": None},
        ],
        "include_synonyms": True,
        "include_documentation": False,
    }
    answer = t.session.send(32, body)
    known, absent = answer.results
    out["topic.error"] = error_name(known.error_code)
    out["absent.error"] = error_name(absent.error_code)
    for c in sorted(known.configs, key=lambda c: str(c.name)):
        out[f"{c.name}.value"] = c.value
        out[f"{c.name}.source"] = int(c.config_source)
        out[f"{c.name}.read_only"] = bool(c.read_only)
        out[f"{c.name}.synonyms"] = [[s.name, int(s.source)] for s in c.synonyms]


def acl_refusals(t: Target, out: Fields) -> None:
    """DescribeAcls and CreateAcls: refused with SECURITY_DISABLED where no authorizer runs."""
    described = t.session.send(
        29,
        {
            "resource_type_filter": 1,
            "resource_name_filter": None,
            "pattern_type_filter": 1,
            "principal_filter": None,
            "host_filter": None,
            "operation": 1,
            "permission_type": 1,
        },
    )
    out["describe.error"] = error_name(described.error_code)
    created = t.session.send(
        30,
        {
            "creations": [
                {
                    "resource_type": 2,
                    "resource_name": t.topic("acl"),
                    "resource_pattern_type": 3,
                    "principal": "User:alice",
                    "host": "*",
                    "operation": 3,
                    "permission_type": 3,
                }
            ]
        },
    )
    out["create.error"] = [error_name(r.error_code) for r in created.results]


def delete_and_recreate(t: Target, out: Fields) -> None:
    """Delete a topic with records, recreate it under the same name: empty, a new topic id."""
    topic = t.ready_topic("recreate")
    produce(t, topic, build_batch(values(2, "old"), timestamp_ms=BASE_TS))
    first_id = _topic_id(t, topic)
    deleted = t.session.send(20, {"topics": [{"name": topic}], "timeout": 30_000})
    out["delete.error"] = error_name(deleted.responses[0].error_code)
    gone = t.session.send(20, {"topics": [{"name": t.topic("never")}], "timeout": 30_000})
    out["delete_unknown.error"] = error_name(gone.responses[0].error_code)
    wait_for(lambda: _topic_id(t, topic) is None, f"{topic} gone from Metadata")
    t.session.send(20, {"topics": [{"name": topic}], "timeout": 30_000})
    recreated = _create_until_accepted(t, topic)
    out["recreate.error"] = recreated
    wait_for(lambda: _all_led(t.session, topic, 1), f"leaders of {topic} again")
    out["recreate.new_topic_id"] = _topic_id(t, topic) not in (None, first_id)
    out["recreate.latest"] = _offset(list_offset(t, topic, -1))
    out["recreate.records"] = len(records_of(fetch(t, topic, 0).records))


def _create_until_accepted(t: Target, topic: str) -> str:
    """CreateTopics until the name is free again (Kafka may answer TOPIC_ALREADY_EXISTS while
    the deletion completes); the code of the last answer."""
    deadline = time.monotonic() + WAIT_S
    while True:
        body = {
            "topics": [
                {
                    "name": topic,
                    "num_partitions": 1,
                    "replication_factor": 3,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout": 30_000,
        }
        code = error_name(t.session.send(19, body).topics[0].error_code)
        if code != "TOPIC_ALREADY_EXISTS" or time.monotonic() > deadline:
            return code
        time.sleep(0.2)


def _topic_id(t: Target, topic: str) -> Any:
    for tm in t.session.metadata([topic]).topics:
        if error_name(tm.error_code) == "NONE":
            return tm.topic_id
    return None


STEPS: dict[str, Callable[[Target, Fields], None]] = {
    "create_topics_invalid": create_topics_invalid,
    "metadata_shapes": metadata_shapes,
    "produce_fetch_edges": produce_fetch_edges,
    "produce_refusals": produce_refusals,
    "list_offsets_by_time": list_offsets_by_time,
    "idempotent_producer": idempotent_producer,
    "describe_configs": describe_configs,
    "acl_refusals": acl_refusals,
    "delete_and_recreate": delete_and_recreate,
}
"""The sequence, in order (each step uses topics of its own)."""


def _classic_group(t: Target, out: Fields) -> None:
    from kraft.interop.group_step import classic_group

    classic_group(t, out)


STEPS["classic_group_range"] = _classic_group


def _transactions(t: Target, out: Fields) -> None:
    from kraft.interop.txn_step import transactions

    transactions(t, out)


def _fetch_sessions(t: Target, out: Fields) -> None:
    from kraft.interop.session_step import fetch_sessions

    fetch_sessions(t, out)


def _consumer_group(t: Target, out: Fields) -> None:
    from kraft.interop.consumer_group_step import consumer_group

    consumer_group(t, out)


def _group_items(t: Target, out: Fields) -> None:
    from kraft.interop.items_step import group_items

    group_items(t, out)


def _leader_hints(t: Target, out: Fields) -> None:
    from kraft.interop.items_step import leader_hints

    leader_hints(t, out)


STEPS["transactions"] = _transactions
STEPS["fetch_sessions"] = _fetch_sessions
STEPS["consumer_group_kip848"] = _consumer_group
STEPS["group_items"] = _group_items
STEPS["leader_hints"] = _leader_hints


def _compacted_tombstones(t: Target, out: Fields) -> None:
    from kraft.interop.compaction_step import compacted_tombstones

    compacted_tombstones(t, out)


STEPS["compacted_tombstones"] = _compacted_tombstones


def run_step(name: str, t: Target) -> Fields:
    """One step on one system: its fields, plus ``not_served`` (the API missing) or
    ``failed`` (what went wrong) if it stopped early."""
    out: Fields = {}
    try:
        STEPS[name](t, out)
    except NotServed as e:
        out["not_served"] = str(e)
    except Exception as e:
        out["failed"] = f"{type(e).__name__}: {e}"
    return out
