"""The compacted-topic step: what the log cleaner leaves of superseded records and tombstones.

Three compacted topics get the same records: ``k1=a k2=b k1=c k2=<tombstone> k3=d`` in one
batch, then, once ``segment.ms`` has passed, ``k4=e``, whose append rolls the first segment so
that the cleaner may clean it (never the active segment). Each topic sets
``min.cleanable.dirty.ratio`` low, so that one superseded record is enough to clean, and
``min.compaction.lag.ms`` 0. They differ in the tombstone's fate:

- ``recent``: records stamped now, ``delete.retention.ms`` one day: the tombstone stays;
- ``old``: records stamped `BASE_TS` (2023), ``delete.retention.ms`` one day: both count the
  day from the first pass that kept the tombstone (KIP-534's delete horizon), not from its
  timestamp, and keep it;
- ``no_retention``: records stamped now, ``delete.retention.ms`` 0: the tombstone goes, at a
  pass after the one that set its horizon; a log is cleaned only once it is dirty again, so,
  after the first pass, one more record rolls the segment again (``k5=f``), and the step
  reads the log once the tombstone is gone.

The cleaner runs every ``log.cleaner.backoff.ms`` on both (`CLEANER_BACKOFF_MS` on the
clusters `kraft interop diff` starts; Kafka's and kraft's default is 15 s, which the waits
below allow for). A record produced without a key is refused by both.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kraft.interop.normalize import error_name
from kraft.interop.steps import BASE_TS, WAIT_S, Fields, Target, fetch, produce, records_of
from storage.records import SimpleRecord, build_batch

SEGMENT_MS = 100
"""Each topic's ``segment.ms``: the next append after this long rolls the active segment."""
CLEANER_BACKOFF_MS = 1000
"""``log.cleaner.backoff.ms`` of the clusters the command starts (default 15 s on both)."""
DAY_MS = 86_400_000
CLEAN_WAIT_S = WAIT_S + 15.0
"""A pass within one default backoff (15 s) of the roll, and a second for Kafka's horizon."""

Row = list[object]


def _config(delete_retention_ms: int) -> dict[str, str]:
    return {
        "cleanup.policy": "compact",
        "segment.ms": str(SEGMENT_MS),
        "min.cleanable.dirty.ratio": "0.01",
        "min.compaction.lag.ms": "0",
        "delete.retention.ms": str(delete_retention_ms),
    }


def _records(timestamp_ms: int) -> list[SimpleRecord]:
    pairs: list[tuple[bytes, bytes | None]] = [
        (b"k1", b"a"),
        (b"k2", b"b"),
        (b"k1", b"c"),
        (b"k2", None),
        (b"k3", b"d"),
    ]
    return [  # a millisecond apart: each record's own timestamp must survive the cleaner
        SimpleRecord(key=k, value=v, timestamp_ms=timestamp_ms + i)
        for i, (k, v) in enumerate(pairs)
    ]


def _rows(t: Target, topic: str, since_ms: int) -> list[Row]:
    """Every record of the topic, ``[offset, key, value, timestamp - since_ms]``: fetches from
    offset 0 to the high watermark (a fetch returns the records of one segment at most, on
    both systems). The timestamps show that a batch the cleaner stamped with its delete
    horizon (KIP-534: the horizon in the base timestamp) still gives each record its own."""
    out: list[Row] = []
    offset = 0
    while True:
        answer = fetch(t, topic, offset)
        got = records_of(answer.records)
        for at, ts, key, value in got:
            if at >= offset:
                text = value.decode() if value else value
                out.append([at, key.decode() if key else key, text, ts - since_ms])
        if not got or got[-1][0] + 1 >= int(answer.high_watermark):
            return out
        offset = got[-1][0] + 1


def _wait(
    t: Target, topic: str, since_ms: int, done: Callable[[list[Row]], bool]
) -> tuple[list[Row], bool]:
    """The topic's records once ``done`` holds of them, or at the deadline: (rows, held)."""
    deadline = time.monotonic() + CLEAN_WAIT_S
    while True:
        rows = _rows(t, topic, since_ms)
        if done(rows):
            return rows, True
        if time.monotonic() > deadline:
            return rows, False
        time.sleep(0.25)


def _superseded_gone(rows: list[Row]) -> bool:
    return bool(rows) and rows[0][0] != 0  # k1=a at offset 0 is superseded by k1=c


def _tombstone_gone(rows: list[Row]) -> bool:
    return _superseded_gone(rows) and all(row[2] is not None for row in rows)


def compacted_tombstones(t: Target, out: Fields) -> None:
    now = int(time.time() * 1000)
    cases = {
        "recent": (now, DAY_MS, _superseded_gone),
        "old": (BASE_TS, DAY_MS, _superseded_gone),
        "no_retention": (now, 0, _tombstone_gone),
    }
    topics = {
        label: t.ready_topic(f"compact-{label}", config=_config(retention))
        for label, (
            _ts,
            retention,
            _done,
        ) in cases.items()
    }
    keyless = build_batch([SimpleRecord(value=b"no key")], timestamp_ms=now)
    out["keyless.error"] = error_name(produce(t, topics["recent"], keyless).error_code)
    for label, (timestamp_ms, _retention, _done) in cases.items():
        batch = build_batch(_records(timestamp_ms), timestamp_ms=timestamp_ms)
        out[f"{label}.produce"] = error_name(produce(t, topics[label], batch).error_code)
    # The next append rolls the segment: kraft looks at its clock, Kafka at the appended
    # record's timestamp against the segment's first (KIP-33): both are past segment.ms.
    time.sleep(3 * SEGMENT_MS / 1000)
    for label, (timestamp_ms, _retention, _done) in cases.items():
        later = timestamp_ms + 10 * SEGMENT_MS
        roll = build_batch([SimpleRecord(key=b"k4", value=b"e")], timestamp_ms=later)
        answer = produce(t, topics[label], roll)
        out[f"{label}.roll"] = [error_name(answer.error_code), int(answer.base_offset)]
    for label, (timestamp_ms, _retention, done) in cases.items():
        if done is _tombstone_gone:
            _wait(t, topics[label], timestamp_ms, _superseded_gone)  # the first pass
            time.sleep(3 * SEGMENT_MS / 1000)
            again = timestamp_ms + 20 * SEGMENT_MS
            dirty = build_batch([SimpleRecord(key=b"k5", value=b"f")], timestamp_ms=again)
            answer = produce(t, topics[label], dirty)
            out[f"{label}.roll_again"] = [error_name(answer.error_code), int(answer.base_offset)]
        rows, held = _wait(t, topics[label], timestamp_ms, done)
        out[f"{label}.cleaned"] = held
        out[f"{label}.records"] = rows
        after = fetch(t, topics[label], 0)
        out[f"{label}.high_watermark"] = int(after.high_watermark)
        out[f"{label}.log_start_offset"] = int(after.log_start_offset)


__all__ = ["CLEANER_BACKOFF_MS", "compacted_tombstones"]
