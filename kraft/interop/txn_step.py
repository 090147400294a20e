"""The transactions step (KIP-98): a transactional producer's requests, by hand, on both
systems: InitProducerId with a transactional id, AddPartitionsToTxn, transactional Produce,
EndTxn commit and abort, read_committed and read_uncommitted Fetches (last stable offset,
aborted transactions, what a read_committed consumer keeps), and a zombie: the first
producer's epoch after a second InitProducerId of the same transactional id.

Producer ids are random per system: answers keep whether an id is set, epochs relative to the
first one, and offsets (the control records' included, which both systems place alike).
"""

from __future__ import annotations

import time
from typing import Any

from kraft.interop.normalize import error_name
from kraft.interop.steps import (
    BASE_TS,
    RETRIABLE,
    WAIT_S,
    Fields,
    Target,
    fetch,
    find_coordinator,
    records_of,
    values,
    wait_for,
)
from storage.records import build_batch, read_header, split_batches

INIT_PRODUCER_ID, ADD_PARTITIONS, END_TXN = 22, 24, 26
TXN_RETRIABLE = RETRIABLE | {"CONCURRENT_TRANSACTIONS"}
"""Answers a Kafka producer retries: the coordinator still completing the last transaction."""
MAX_POLLS = 20
"""Fetches of one read, at most (the topic holds a dozen batches)."""
CONTROL_BIT = 0x20
"""A batch's attributes bit 5: a control batch (a transaction marker)."""


class _Producer:
    """One transactional producer's state: its id, epoch and next sequence."""

    def __init__(self, t: Target, txn_id: str, coordinator: int) -> None:
        self.t = t
        self.txn_id = txn_id
        self.coordinator = coordinator
        self.producer_id = -1
        self.epoch = -1
        self.sequence = 0
        self.last_offset = -1
        """The offset of the last record written (its transaction's marker comes after it)."""

    def _retry(self, api: int, body: dict[str, Any], code: Any) -> Any:
        deadline = time.monotonic() + WAIT_S
        while True:
            answer = self.t.session.send(api, body, node=self.coordinator)
            if error_name(code(answer)) not in TXN_RETRIABLE or time.monotonic() > deadline:
                return answer
            time.sleep(0.2)

    def init(self) -> str:
        body = {
            "transactional_id": self.txn_id,
            "transaction_timeout": 60_000,
            "producer_id": -1,
            "producer_epoch": -1,
        }
        answer = self._retry(INIT_PRODUCER_ID, body, lambda a: a.error_code)
        if error_name(answer.error_code) == "NONE":
            self.producer_id, self.epoch = int(answer.producer_id), int(answer.producer_epoch)
            self.sequence = 0
        return error_name(answer.error_code)

    def add_partition(self, topic: str) -> list[str]:
        body = {
            "v3_and_below_transactional_id": self.txn_id,
            "v3_and_below_producer_id": self.producer_id,
            "v3_and_below_producer_epoch": self.epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": [0]}],
        }

        def first(a: Any) -> Any:
            return a.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code

        answer = self._retry(ADD_PARTITIONS, body, first)
        return [
            error_name(p.partition_error_code)
            for tr in answer.results_by_topic_v3_and_below
            for p in tr.results_by_partition
        ]

    def produce(self, topic: str, prefix: str, n: int) -> list[Any]:
        batch = build_batch(
            values(n, prefix),
            timestamp_ms=BASE_TS,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            base_sequence=self.sequence,
            is_transactional=True,
        )
        body = {
            "transactional_id": self.txn_id,
            "acks": -1,
            "timeout": 10_000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
        }
        node = self.t.session.leader(topic)
        part = self.t.session.send(0, body, node=node).responses[0].partition_responses[0]
        if error_name(part.error_code) == "NONE":
            self.sequence += n
            self.last_offset = int(part.base_offset) + n - 1
        return [error_name(part.error_code), int(part.base_offset)]

    def end(self, commit: bool) -> str:
        body = {
            "transactional_id": self.txn_id,
            "producer_id": self.producer_id,
            "producer_epoch": self.epoch,
            "committed": commit,
        }
        return error_name(self._retry(END_TXN, body, lambda a: a.error_code).error_code)


def _read(t: Target, topic: str, committed: bool) -> Fields:
    """What Fetches from offset 0 answer (read_committed or not), poll after poll as a
    consumer reads up to the last stable offset (read_committed) or the high watermark (Kafka
    answered one batch per Fetch here), and what a consumer of that isolation keeps of it
    (`consumer_view`)."""
    records = b""
    aborted: set[int] = set()
    offset, p = 0, None
    for _ in range(MAX_POLLS):
        p = fetch(t, topic, offset, isolation_level=1 if committed else 0)
        aborted |= {int(a.first_offset) for a in (p.aborted_transactions or ())}
        batches = split_batches(p.records or b"")
        records += b"".join(batches)
        end = int(p.last_stable_offset if committed else p.high_watermark)
        if not batches or error_name(p.error_code) != "NONE":
            break
        offset = read_header(batches[-1]).next_offset
        if offset >= end:
            break
    assert p is not None
    view = consumer_view(records, sorted(aborted) if committed else [])
    return {
        "error": error_name(p.error_code),
        "high_watermark": int(p.high_watermark),
        "last_stable_offset": int(p.last_stable_offset),
        "aborted_first_offsets": sorted(aborted),
        **view,
    }


def consumer_view(records: bytes, aborted: list[int]) -> Fields:
    """The batches of one producer's fetched ``records``: the control markers (offset, type:
    0 abort, 1 commit), the data batches, and the values a consumer keeps, dropping those of
    the ``aborted`` transactions (their first offsets) as Kafka's clients do: from a
    transaction's first offset to its producer's next marker."""
    pending = sorted(aborted)
    kept: list[str] = []
    markers: list[list[int]] = []
    data_batches = 0
    aborting = False
    for batch in split_batches(records):
        header = read_header(batch)
        if header.attributes & CONTROL_BIT:
            markers.append([header.base_offset, header.control_type])
            aborting = False
            continue
        data_batches += 1
        while pending and pending[0] <= header.base_offset:
            pending.pop(0)
            aborting = True
        if not aborting:
            kept += [v.decode() if v else "" for *_, v in records_of(batch)]
    return {"markers": markers, "data_batches_returned": data_batches, "kept": kept}


def _wait_marker(t: Target, topic: str, last_data_offset: int, what: str) -> None:
    """Until the marker after ``last_data_offset`` is readable: the markers are written after
    EndTxn answers, on both systems, and a read is compared once the transaction ended."""
    wait_for(lambda: _read(t, topic, True)["last_stable_offset"] >= last_data_offset + 2, what)


def transactions(t: Target, out: Fields) -> None:
    topic = t.ready_topic("txn")
    txn_id = t.topic("txn")
    code, coordinator = find_coordinator(t, txn_id, 1)
    out["find_coordinator.error"] = code
    first = _Producer(t, txn_id, coordinator)
    out["init.error"] = first.init()
    out["init.producer_id_set"] = first.producer_id >= 0
    epoch0 = first.epoch
    out["produce_before_add.error"] = first.produce(topic, "early", 1)[0]
    _write(first, topic, "c", 2, out, "commit")
    out["open.read_committed"] = _read(t, topic, True)
    out["open.read_uncommitted"] = _read(t, topic, False)
    _end(t, first, topic, True, out, "commit")
    _write(first, topic, "a", 2, out, "abort")
    _end(t, first, topic, False, out, "abort")
    out["abort.read_uncommitted"] = _read(t, topic, False)
    out["end_without_transaction.error"] = first.end(commit=True)

    # A zombie: a second producer takes the transactional id (its epoch is bumped); the
    # first, still at the old epoch, is fenced on every request.
    first.add_partition(topic)
    first.produce(topic, "z", 1)  # an open transaction the second InitProducerId aborts
    second = _Producer(t, txn_id, coordinator)
    out["zombie.second_init.error"] = second.init()
    out["zombie.same_producer_id"] = second.producer_id == first.producer_id
    out["zombie.epoch_delta"] = second.epoch - epoch0
    out["zombie.produce.error"] = first.produce(topic, "zombie", 1)[0]
    out["zombie.add.errors"] = first.add_partition(topic)
    _end(t, first, topic, True, out, "zombie")
    _write(second, topic, "s", 1, out, "second")
    _end(t, second, topic, True, out, "second")


def _write(p: _Producer, topic: str, prefix: str, n: int, out: Fields, label: str) -> None:
    """AddPartitionsToTxn, then ``n`` records in the transaction."""
    out[f"{label}.add.errors"] = p.add_partition(topic)
    out[f"{label}.produce.answer"] = p.produce(topic, prefix, n)


def _end(t: Target, p: _Producer, topic: str, commit: bool, out: Fields, label: str) -> None:
    """EndTxn, then what a read_committed consumer reads once its marker is there (for a
    fenced producer, the marker of the abort the second InitProducerId wrote)."""
    out[f"{label}.end.error"] = p.end(commit=commit)
    _wait_marker(t, topic, p.last_offset, f"the {label} marker")
    out[f"{label}.read_committed"] = _read(t, topic, True)


__all__ = ["consumer_view", "transactions"]
