"""The fetch-session step (KIP-227): a consumer's incremental fetches, poll after poll, to one
broker: a full Fetch that opens a session, incremental Fetches that answer only the partitions
that changed, a partition forgotten, a wrong epoch, an unknown session id, and the session
closed.

Session ids are random per system: answers keep whether one is set; partitions are named by
their place (``a``, ``b``) among the partitions the broker leads.
"""

from __future__ import annotations

from typing import Any

from kraft.interop.normalize import error_name
from kraft.interop.steps import BASE_TS, Fields, Target, produce, records_of, values, wait_for
from storage.records import build_batch

FETCH = 1
PARTITIONS = 6
"""Enough that the broker leading partition 0 leads a second partition on both systems."""


def _body(
    topic: str,
    session_id: int,
    epoch: int,
    fetch: dict[int, int],
    forgotten: list[int] | None = None,
) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": p,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                    for p, offset in sorted(fetch.items())
                ],
            }
        ]
        if fetch
        else [],
        "forgotten_topics_data": [{"topic": topic, "partitions": forgotten}] if forgotten else [],
        "rack_id": "",
    }


def fetch_sessions(t: Target, out: Fields) -> None:
    topic = t.ready_topic("session", partitions=PARTITIONS)
    leaders: dict[int, int] = {}
    for tm in t.session.metadata([topic]).topics:
        for p in tm.partitions:
            leaders[int(p.partition_index)] = int(p.leader_id)
    node = leaders[0]
    a, b = sorted(p for p, n in leaders.items() if n == node)[:2]
    names = {a: "a", b: "b"}

    def send(session_id: int, epoch: int, fetch: dict[int, int], **kw: Any) -> Any:
        return t.session.send(FETCH, _body(topic, session_id, epoch, fetch, **kw), node=node)

    def shape(answer: Any, label: str) -> None:
        out[f"{label}.error"] = error_name(answer.error_code)
        out[f"{label}.session_id_set"] = int(answer.session_id) != 0
        out[f"{label}.partitions"] = sorted(
            [
                names.get(int(p.partition_index), "?"),
                error_name(p.error_code),
                int(p.high_watermark),
                [v.decode() if v else v for *_, v in records_of(p.records)],
            ]
            for r in answer.responses
            for p in r.partitions
        )

    opened = send(0, 0, {a: 0, b: 0})  # a full fetch that asks for a session
    shape(opened, "full")
    sid = int(opened.session_id)
    shape(send(sid, 1, {}), "incremental_nothing_new")
    produce(t, topic, build_batch(values(2, "one"), timestamp_ms=BASE_TS), partition=a)
    # max_wait is 0: poll until the records come (Kafka may first answer the new high
    # watermark alone: its read stops at the high watermark's known position)
    polls: list[Any] = []

    def poll() -> bool:
        polls.append(send(sid, 1 + len(polls) + 1, {}))
        return any(records_of(p.records) for r in polls[-1].responses for p in r.partitions)

    wait_for(poll, "the produced records in an incremental fetch")
    epoch = 2 + len(polls)
    shape(polls[-1], "incremental_new_records")
    shape(send(sid, epoch, {a: 2}), "incremental_offset_moved")
    epoch += 1
    shape(send(sid, epoch, {}, forgotten=[b]), "incremental_forget_b")
    epoch += 1
    produce(t, topic, build_batch(values(1, "two"), timestamp_ms=BASE_TS), partition=b)
    shape(send(sid, epoch, {}), "incremental_after_forgotten_write")
    epoch += 1
    shape(send(sid, epoch + 5, {}), "wrong_epoch")
    shape(send(sid ^ 0x5A5A5A5, 1, {}), "unknown_session")
    shape(send(sid, epoch, {a: 2}), "after_wrong_epoch")
    shape(send(sid, -1, {a: 2}), "close")
    shape(send(sid, 1, {}), "closed_session")


__all__ = ["fetch_sessions"]
