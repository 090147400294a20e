"""The rules by which answers that legitimately differ are made comparable.

Each rule replaces a value by what both systems must agree on; no response is dropped whole.

- **Error codes** are compared by Kafka's name (``OFFSET_OUT_OF_RANGE``); the free-text
  ``error_message`` beside them is not compared (Kafka's wording is not a contract).
- **Node ids and addresses** (leaders, replicas, ISR, coordinators, hosts, ports) become
  shapes: whether the leader is a replica and in the ISR, how many replicas and ISR members.
  Which broker leads is an election's outcome, not a protocol answer.
- **Topic ids, cluster ids, producer ids, member ids** are random per cluster: compared as
  "set" (non-zero, non-empty) or not.
- **Throttle times** are not read: they report load, not semantics.
- **Names** of topics and groups carry a per-run prefix, the same on both systems; steps
  label fields by role (``topic``, ``absent``), never by the prefixed name.
- **Timestamps** are compared only where this client chose them (records' create times);
  ``log_append_time`` is compared as set or not.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode


def error_name(code: Any) -> str:
    """Kafka's name of an error code (kio's enum or an int), upper case."""
    try:
        return ErrorCode(int(code)).name.upper()
    except ValueError:
        return f"UNKNOWN_CODE_{int(code)}"


def is_set_uuid(value: Any) -> bool:
    return isinstance(value, uuid.UUID) and value.int != 0


def replica_shape(
    leader: int, replicas: list[Any], isr: list[Any], brokers: list[int]
) -> list[Any]:
    """[leader is a live broker, leader in replicas, leader in ISR, #replicas, #ISR]."""
    reps = [int(r) for r in replicas]
    in_sync = [int(r) for r in isr]
    return [leader in brokers, leader in reps, leader in in_sync, len(reps), len(in_sync)]
