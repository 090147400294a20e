"""The garbage collector's and the C allocator's settings for kraft's own processes, as Kafka
ships its JVM's (``KAFKA_JVM_PERFORMANCE_OPTS``: G1 and its pause goal).

CPython's cycle collector runs a young collection every 700 net allocations of container
objects (3.11's default thresholds, 700/10/10). A producer keeps one future per record in
flight for the ~100 ms until its batch is acknowledged, and a broker a few objects per
request, so at 100,000 records/s most of them live through one or two young collections
before they die: the collector walks each of them again and again, and every so often the
whole heap. Measured with `kraft bench trees --base d3eceb8 --rounds 3 -- produce --records
300000 --acks all` (2026-12-07, ABBA, load 9-14; d3eceb8 is the tree before this module): the
client's CPU per record 6.87 -> 4.87 µs (its ``send()`` thread 4.37 -> 2.47), the brokers'
10.30 -> 8.80, records/s 1.63x.

- `tune_gc`: every kraft process (the CLI and what it runs, the demo, the benches' nodes)
  collects its youngest generation every `THRESHOLDS` allocations instead.
- `tune_server_gc`: a server, once started, moves what it holds (modules, classes,
  configuration: a broker's modules alone are about 76,000 objects) out of the collector's
  sight (``gc.freeze``), so that a full collection walks only what was allocated since (a full
  collection of those modules took 130-210 ms here at load 20, a stall of the event loop), and
  collects its older generations more often than a client (`SERVER_THRESHOLDS`), so that its
  memory stays flat for weeks, and runs a full collection every minute
  (`collect_periodically`).

- `tune_server_malloc`: a server, before it starts a thread, fixes glibc's thresholds for
  returning memory (`SERVER_MALLOPT`), so that what a burst allocated goes back to the system
  once freed.

A library never changes its host's collector: an application that embeds kraft's clients or a
`RaftServer` and wants the same can call `tune_gc` once at start-up (docs/operations.md, Sizing).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
from typing import Final

THRESHOLDS: Final = (50_000, 20, 10)
"""``gc.set_threshold``: a young collection every 50,000 net container allocations (the default
is 700), the middle generation every 20 of those, the oldest every 10 of those (and only when
the objects it would walk grew by a quarter: CPython's own rule)."""


def tune_gc() -> None:
    """Set `THRESHOLDS` for this process (see the module docstring)."""
    gc.set_threshold(*THRESHOLDS)


SERVER_THRESHOLDS: Final = (50_000, 5, 2)
"""A server's: its middle generation every 5 young collections, its oldest every 2 of those.

An object still alive at a young collection (a request in a long poll; gRPC's handler lookup
of an RPC, a cycle) moves up a generation, and once it dies there only that generation's
collection frees it. At `THRESHOLDS` a quiet controller reached its oldest collection about
every quarter of an hour, so such garbage piled up in between, and the heap's peak stayed in
its resident memory: in a 10-minute netns soak a broker held 9 MiB of it when collected
(docs/guarantees.md, the soak). A client keeps `THRESHOLDS`: its futures in flight, walked by
each middle collection, cost it about 6% more CPU per record at these (`kraft bench trees
-- produce`, one run at load 10)."""


def tune_server_gc() -> None:
    """A server, after its start: `SERVER_THRESHOLDS`, then collect once and keep every object
    alive now out of later collections."""
    gc.set_threshold(*SERVER_THRESHOLDS)
    gc.collect()
    gc.freeze()


FULL_COLLECTION_INTERVAL_S: Final = 60.0
"""A server's full collection every minute (`collect_periodically`), as Java's G1 can collect
on a timer to give memory back (JEP 346, ``G1PeriodicGCInterval``).

gRPC's asyncio server leaves a reference cycle behind every call: its handler lookup's closure
with the call's details (``_HandlerCallDetails``, ``_Metadatum``). In a 1+1 cluster's broker
after a minute of produce and consume, 131 of each were waiting, and ``gc.collect()`` freed all
of them. Under `SERVER_THRESHOLDS` the oldest generation is collected only once it has grown by
a quarter. At a few calls a second that is tens of minutes of garbage, and the heap's peak
stays resident. That is the suspect for the brokers' slow growth in the netns soak
(docs/guarantees.md). A full collection of a 1,000-partition broker takes tens of milliseconds,
once a minute."""


async def collect_periodically(interval_s: float = FULL_COLLECTION_INTERVAL_S) -> None:
    """Run a full collection every ``interval_s`` seconds, until cancelled."""
    while True:
        await asyncio.sleep(interval_s)
        gc.collect()


SERVER_MALLOPT: Final = {-3: 128 * 1024, -1: 128 * 1024}
"""glibc's ``mallopt``: ``M_MMAP_THRESHOLD`` (-3) and ``M_TRIM_THRESHOLD`` (-1), both at 128 KiB,
their initial values, fixed.

By default glibc raises both each time a block it had mapped on its own (128 KiB or more: a
fetch answer, a catch-up's batches) is freed, up to 32 and 64 MiB, so that from then on such
blocks come from the heap and its free space stays mapped. A broker's bursts (a follower
catching up after a partition heals, a backlog's fetch answers) then left their peak in its
resident memory: in `python -m kraft.bench.catch_up --partitions 300 --megabytes 40` the
follower kept 7-16 MiB of its 40-70 MiB burst. Fixed, a block of 128 KiB or more is mapped and
unmapped on its own, and the heap gives back what is free at its top above 128 KiB: 0-3 MiB
kept in the same bench (three alternated runs each, 2026-12-07, load 4-11). It does not flatten
the slow growth of a broker under the netns soak (docs/guarantees.md): that is something else."""


def tune_server_malloc() -> bool:
    """Apply `SERVER_MALLOPT` to this process (see the module docstring); whether the C
    library took it (glibc; elsewhere there is no ``mallopt`` and nothing changes)."""
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt if name else None
    except (OSError, AttributeError):
        mallopt = None
    if mallopt is None:
        return False
    return all(mallopt(param, value) == 1 for param, value in SERVER_MALLOPT.items())


__all__ = [
    "FULL_COLLECTION_INTERVAL_S",
    "SERVER_MALLOPT",
    "SERVER_THRESHOLDS",
    "THRESHOLDS",
    "collect_periodically",
    "tune_gc",
    "tune_server_gc",
    "tune_server_malloc",
]
