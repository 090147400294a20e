"""The voter set as part of the replicated log (KIP-853 dynamic quorums).

Theory of operation
-------------------
A voter change is a control batch holding one ``VotersRecord`` (Kafka's control record type
6, ``KRAFT_VOTERS``): the whole new voter set, each voter with the endpoint operators gave it.
As in KIP-853, a replica uses the **latest** voter set in its log, committed or not; when it
truncates the log, it goes back to the set before the cut. `VoterHistory` keeps that history
from the log start on:

- the set at the log start: the one the latest snapshot carries (a snapshot begins with a
  voters frame, `frame_snapshot`), else the static ``controller.quorum.voters``
  configuration (a log that never had a VotersRecord keeps working as before);
- one ``(offset, voters)`` entry per VotersRecord in the log.

Safety comes from changing one voter at a time (Raft thesis §4.1): any majority of the old
set and any majority of the new one share a voter, so two leaders cannot be elected in one
epoch by disjoint majorities. The leader refuses a change while another is uncommitted, and
until it has committed an entry of its own epoch (the fix Ongaro posted to raft-dev in 2015,
which KIP-853 adopts).
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Mapping
from typing import Final, final

from kraft.types import Epoch, NodeId, Offset
from storage.errors import CorruptRecordError
from storage.records import SimpleRecord, build_batch, iter_records, read_header

VOTERS_TYPE: Final = 6
"""Kafka's ``ControlRecordType.KRAFT_VOTERS``."""
_KEY = struct.Struct(">hh")  # version, control type (as in control.py)
_HEAD = struct.Struct(">hi")  # version, voter count
_VOTER = struct.Struct(">ih")  # id, endpoint length (utf-8 bytes follow)
_SNAPSHOT_MAGIC: Final = b"\x00kraft-voters\x01"
_FRAME_LEN = struct.Struct(">I")
VOTERS_MAX: Final = 64
"""A sanity bound on a voter set read from bytes (Kafka quorums have 3 or 5 voters)."""

Voters = Mapping[NodeId, str]
"""A voter set: id -> endpoint (``host:port``, or "" when only the id is known)."""


def encode_voters(voters: Voters) -> bytes:
    out = [_HEAD.pack(0, len(voters))]
    for vid in sorted(voters):
        endpoint = voters[vid].encode()
        out.append(_VOTER.pack(vid, len(endpoint)) + endpoint)
    return b"".join(out)


def decode_voters(value: bytes) -> dict[NodeId, str]:
    """Raises:
    CorruptRecordError: the bytes are not a voter set."""
    try:
        _, count = _HEAD.unpack_from(value)
        if not 0 < count <= VOTERS_MAX:
            raise CorruptRecordError(f"voter count {count} out of range")
        pos = _HEAD.size
        voters: dict[NodeId, str] = {}
        for _ in range(count):
            vid, n = _VOTER.unpack_from(value, pos)
            pos += _VOTER.size
            if vid < 0 or n < 0 or pos + n > len(value):
                raise CorruptRecordError("bad voter entry")
            voters[NodeId(vid)] = value[pos : pos + n].decode()
            pos += n
        return voters
    except (struct.error, UnicodeDecodeError) as e:
        raise CorruptRecordError(f"bad voters record: {e}") from None


def build_voters_batch(*, epoch: Epoch, voters: Voters, base_offset: Offset, now_ms: int) -> bytes:
    """A control batch holding one VotersRecord."""
    record = SimpleRecord(key=_KEY.pack(0, VOTERS_TYPE), value=encode_voters(voters))
    return build_batch(
        [record],
        timestamp_ms=now_ms,
        base_offset=base_offset,
        partition_leader_epoch=epoch,
        is_control=True,
    )


def parse_voters_batch(batch: bytes) -> dict[NodeId, str] | None:
    """The voter set in a control batch, or None for any other batch."""
    if not read_header(batch).is_control:
        return None
    for record in iter_records(batch):
        if record.key is None or record.value is None or len(record.key) != _KEY.size:
            continue
        if _KEY.unpack(record.key)[1] == VOTERS_TYPE:
            return decode_voters(record.value)
    return None


def frame_snapshot(voters: Voters | None, data: bytes) -> bytes:
    """Snapshot bytes that carry the voter set at their end offset in front of ``data``
    (Kafka writes a VotersRecord at the start of every snapshot). ``None``: no frame, for a
    log that never had a VotersRecord."""
    if voters is None:
        return data
    body = encode_voters(voters)
    return _SNAPSHOT_MAGIC + _FRAME_LEN.pack(len(body)) + body + data


def split_snapshot(data: bytes) -> tuple[dict[NodeId, str] | None, bytes]:
    """The inverse of `frame_snapshot`: (voters or None, the application's bytes)."""
    if not data.startswith(_SNAPSHOT_MAGIC):
        return None, data
    head = len(_SNAPSHOT_MAGIC)
    if len(data) < head + _FRAME_LEN.size:
        raise CorruptRecordError("snapshot voters frame cut short")
    (n,) = _FRAME_LEN.unpack_from(data, head)
    start = head + _FRAME_LEN.size
    if len(data) < start + n:
        raise CorruptRecordError("snapshot voters frame cut short")
    return decode_voters(data[start : start + n]), data[start + n :]


SNAPSHOT_FRAME_BYTES_MAX: Final = len(_SNAPSHOT_MAGIC) + _FRAME_LEN.size + 8 + VOTERS_MAX * 300
"""Enough of a snapshot's first bytes to read its voters frame."""


@final
class VoterHistory:
    """The voter sets of one replica's log: at its start, and at each VotersRecord after."""

    __slots__ = ("_base", "_ids", "_offsets", "_sets", "_static")

    def __init__(self, static: frozenset[NodeId]) -> None:
        self._static: dict[NodeId, str] = {v: "" for v in static}
        self._base: dict[NodeId, str] | None = None
        self._offsets: list[int] = []
        self._sets: list[dict[NodeId, str]] = []
        self._ids: frozenset[NodeId] = frozenset(static)

    @property
    def ids(self) -> frozenset[NodeId]:
        """The latest voter set's ids: the one this replica uses."""
        return self._ids

    @property
    def latest(self) -> dict[NodeId, str]:
        if self._sets:
            return dict(self._sets[-1])
        return dict(self._base if self._base is not None else self._static)

    @property
    def latest_offset(self) -> int:
        """The offset of the latest VotersRecord in the log, or -1 if there is none."""
        return self._offsets[-1] if self._offsets else -1

    @property
    def from_log(self) -> bool:
        """Whether the set in use came from the log (or a snapshot), not configuration."""
        return bool(self._sets) or self._base is not None

    @property
    def previous_ids(self) -> frozenset[NodeId]:
        """The set before the latest VotersRecord (the latest set if there is none)."""
        if not self._sets:
            return self._ids
        before = self.at(self._offsets[-1])
        return frozenset(before if before is not None else self._static)

    def at(self, end_offset: int) -> dict[NodeId, str] | None:
        """The set in force for the log below ``end_offset`` (None: the static one)."""
        i = bisect.bisect_left(self._offsets, end_offset)
        if i > 0:
            return dict(self._sets[i - 1])
        return None if self._base is None else dict(self._base)

    def append(self, offset: int, voters: Mapping[NodeId, str]) -> None:
        assert not self._offsets or offset > self._offsets[-1]
        self._offsets.append(offset)
        self._sets.append(dict(voters))
        self._refresh()

    def truncate(self, offset: int) -> None:
        """The log lost every offset at or above ``offset``: so did its voter records."""
        i = bisect.bisect_left(self._offsets, offset)
        if i < len(self._offsets):
            del self._offsets[i:], self._sets[i:]
            self._refresh()

    def advance_start(self, offset: int) -> None:
        """The log now starts at ``offset``: records below it fold into the base set."""
        i = bisect.bisect_left(self._offsets, offset)
        if i > 0:
            self._base = self._sets[i - 1]
            del self._offsets[:i], self._sets[:i]

    def reset(self, base: Mapping[NodeId, str] | None) -> None:
        """The log was replaced by a snapshot carrying ``base`` (None: no voters frame)."""
        self._offsets.clear()
        self._sets.clear()
        self._base = dict(base) if base is not None else None
        self._refresh()

    def _refresh(self) -> None:
        self._ids = frozenset(self.latest)


__all__ = [
    "SNAPSHOT_FRAME_BYTES_MAX",
    "VOTERS_MAX",
    "VOTERS_TYPE",
    "VoterHistory",
    "Voters",
    "build_voters_batch",
    "decode_voters",
    "encode_voters",
    "frame_snapshot",
    "parse_voters_batch",
    "split_snapshot",
]
