"""Fault runs on real processes (issue 16): the history of what clients saw, and its checker.

`History` records every send, acknowledgement, failure and poll of a run as JSON lines;
`check_history` judges them the way Jepsen's Kafka checker does (lost, duplicated,
inconsistent offsets, non-monotonic sends and polls, vanished and unseen writes);
`check_txn_history` judges a transactional run's (aborted and premature reads, lost and
partial commits, duplicates; `replication.nemesis.txn_history`). The fault proxies that
partition the network are `kraft.cluster.fault_network.FaultNetwork`.
"""

from replication.nemesis.history import (
    Ack,
    Anomalies,
    FinalRead,
    History,
    HistoryReport,
    Operation,
    Poll,
    Seek,
    Send,
    SendFailed,
    check_history,
    from_json,
    iter_jsonl,
    to_json,
)
from replication.nemesis.txn_history import TxnReport, check_txn_history

__all__ = [
    "Ack",
    "Anomalies",
    "FinalRead",
    "History",
    "HistoryReport",
    "Operation",
    "Poll",
    "Seek",
    "Send",
    "SendFailed",
    "TxnReport",
    "check_history",
    "check_txn_history",
    "from_json",
    "iter_jsonl",
    "to_json",
]
