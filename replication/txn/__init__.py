"""Transactions (KIP-98, KIP-447, KIP-890 part 1): the pure transaction coordinator.

- `state`: a transactional id's state and the transitions Kafka allows.
- `records`: its records in ``__transaction_state`` (latest wins per id).
- `coordinator`: `TxnCoordinator`, one per ``__transaction_state`` partition, driven by the
  broker shell as the group coordinator is (replay committed records, write one request at a
  time, write the markers of ended transactions, tick the timers); see its module docstring.

The partition side (open transactions, the last stable offset, aborted transactions) is folded
with the idempotent producer state, as Kafka's ``ProducerStateManager`` does
(`replication.core.producer_state`).
"""

from replication.txn.coordinator import (
    NEEDS_PRODUCER_ID,
    MarkerJob,
    ProducerIdAndEpoch,
    Result,
    TxnConfig,
    TxnCoordinator,
)
from replication.txn.state import TxnMetadata, TxnState

__all__ = [
    "NEEDS_PRODUCER_ID",
    "MarkerJob",
    "ProducerIdAndEpoch",
    "Result",
    "TxnConfig",
    "TxnCoordinator",
    "TxnMetadata",
    "TxnState",
]
