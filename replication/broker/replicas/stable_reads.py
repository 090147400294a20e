"""What a read_committed consumer may see of a partition (KIP-98): the last stable offset and
the aborted transactions of the records a fetch returns.

The last stable offset (LSO) is the smaller of the high watermark and the first offset of the
oldest open transaction (`ProducerStateManager.first_unstable_offset`): below it every
transaction is decided. A read_committed Fetch reads up to it and names the aborted
transactions whose records fall in what it returns, so the consumer drops them (Kafka's
``FetchIsolation.TXN_COMMITTED``); ListOffsets' latest offset is the LSO too.
"""

from __future__ import annotations

from replication.core import ProducerStateManager
from replication.messages import AbortedTransaction
from storage.file_region import FileRegion, Records
from storage.records import iter_batches

READ_COMMITTED = 1
"""Kafka's ``IsolationLevel.READ_COMMITTED`` (0 is read_uncommitted)."""


def last_stable_offset(state: ProducerStateManager, high_watermark: int) -> int:
    first = state.first_unstable_offset()
    return high_watermark if first is None else min(first, high_watermark)


def aborted_in(
    state: ProducerStateManager, fetch_offset: int, records: Records
) -> tuple[AbortedTransaction, ...]:
    """The aborted transactions with records in ``records`` (read from ``fetch_offset``; a
    region says where its batches end without being read)."""
    if isinstance(records, FileRegion):
        end = records.next_offset
    else:
        end = fetch_offset
        for _, header in iter_batches(records):
            end = header.next_offset
    if end <= fetch_offset:
        return ()
    return tuple(
        AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
        for a in state.aborted_transactions(fetch_offset, end)
    )


__all__ = ["READ_COMMITTED", "aborted_in", "last_stable_offset"]
