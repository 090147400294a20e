"""A read_committed consumer's filter (KIP-98): the batches of aborted transactions dropped from
what a Fetch returned, as Kafka's ``CompletedFetch`` skips them.

The broker stops a read_committed Fetch at the last stable offset and names the aborted
transactions with records in what it returns (producer id, first offset). Walking the batches in
offset order, a producer's transactional batches are dropped from its aborted transaction's first
offset until that transaction's abort marker; control batches stay (consumers skip their records,
and the position moves past them).
"""

from __future__ import annotations

from collections.abc import Sequence

from replication.messages import AbortedTransaction
from storage.control import ControlType
from storage.records import iter_batches


def drop_aborted(records: bytes, aborted: Sequence[AbortedTransaction]) -> bytes:
    """``records`` without the batches of ``aborted`` transactions (see the module docstring)."""
    if not aborted:
        return records
    upcoming = sorted(aborted, key=lambda a: a.first_offset)
    active: set[int] = set()
    kept: list[bytes] = []
    view = memoryview(records)
    for pos, header in iter_batches(view):
        while upcoming and upcoming[0].first_offset <= header.last_offset:
            active.add(upcoming.pop(0).producer_id)
        pid = header.producer_id
        if header.is_control:
            if header.control_type == ControlType.ABORT:
                active.discard(pid)
        elif header.is_transactional and pid in active:
            continue
        kept.append(bytes(view[pos : pos + header.size_bytes]))
    return b"".join(kept)


__all__ = ["drop_aborted"]
