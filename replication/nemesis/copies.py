"""Exactly once through a copier (consume-transform-produce, KIP-447): the judgement both
checkers make, `check_txn_history` on a fault run of real processes and the simulator's
`replication.sim.txn.TxnChecker`.

A copier reads a source topic read_committed and, in each of its transactions, writes a copy
of each record it read to an output topic and commits its group's offsets (the next offset
to read) with them. Given what a read_committed reader finally saw, it is exactly once when:

- **copied_twice**: no source record has two committed copies;
- **copied_aborted**: no committed copy is of a record of an aborted transaction;
- **offsets_not_atomic**: the committed offsets and the copies agree: every source record
  below its partition's committed offset has its committed copy, and none at or above it
  does.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Literal, TypeVar

CopyCheck = Literal["copied_twice", "copied_aborted", "offsets_not_atomic"]
V = TypeVar("V", bound=Hashable)

SourceRead = tuple[str, int, Sequence[tuple[int, V]]]
"""A source partition's final read_committed read: topic, partition, (offset, value)s."""


def judge_copies(
    copies: Mapping[V, Sequence[object]],
    aborted: Callable[[V], bool],
    source_reads: Iterable[SourceRead[V]],
    committed_offsets: Mapping[tuple[str, int], int] | None,
) -> Iterator[tuple[CopyCheck, str]]:
    """The violations (module docstring), each as (check, detail).

    Args:
        copies: each copied source value -> its committed copies (those in the output
            topic's final read_committed read).
        aborted: whether a source value is of an aborted transaction.
        source_reads: the source partitions' final read_committed reads.
        committed_offsets: the group's committed offset per (topic, partition) after the
            run (a partition without one: -1); None if unknown (the offsets go unjudged).
    """
    for source_value, made in copies.items():
        if len(made) > 1:
            yield "copied_twice", f"{source_value!r} copied {len(made)} times: {list(made)[:3]}"
        if made and aborted(source_value):
            yield (
                "copied_aborted",
                f"{made[0]!r} copies {source_value!r}, of an aborted transaction",
            )
    if committed_offsets is None:
        return
    for topic, partition, records in source_reads:
        end = committed_offsets.get((topic, partition), -1)
        for offset, value in records:
            copied = bool(copies.get(value))
            if offset < end and not copied:
                yield (
                    "offsets_not_atomic",
                    f"{topic}-{partition}@{offset} ({value!r}) is below the committed offset "
                    f"{end} and has no committed copy",
                )
            elif offset >= end and copied:
                yield (
                    "offsets_not_atomic",
                    f"{topic}-{partition}@{offset} ({value!r}) has a committed copy but the "
                    f"committed offset is {end}",
                )


__all__ = ["CopyCheck", "SourceRead", "judge_copies"]
