"""`LogCleaner`: the broker's log cleaner, off the event loop (Kafka's ``LogCleaner`` threads).

Every ``log.cleaner.backoff.ms`` it visits each compacted replica once. A pass has three steps
(`storage.log_cleaner`): the plan on the loop (`PartitionReplica.prepare_compaction`: reads
the segment list and the high watermark), the map and rewrite in one of ``log.cleaner.threads``
worker threads (`storage.log_cleaner.run_clean`: reads the planned segments by path and writes
durable ``.cleaned`` files, touching nothing the loop owns), and the swap on the loop
(`PartitionReplica.finish_compaction`: drops the pass if the log changed meanwhile, else
renames the files in and checkpoints). At most ``log.cleaner.threads`` logs are cleaned at
once, and ``log.cleaner.dedupe.buffer.size`` is split between the threads, as in Kafka; a log
whose dirty part does not fit one map is cleaned over several passes.

NB: the worker runs Python, so it holds the GIL while it computes; the interpreter hands the
GIL back to the loop every ``sys.getswitchinterval()`` (5 ms), so the loop keeps serving
(more slowly) rather than stalling for the whole pass. docs/compaction.md has the figures.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Iterable
from typing import Protocol, final

import structlog
from structlog.typing import FilteringBoundLogger

from kraft.types import TopicPartition
from replication.broker.loop_slice import LoopSlice
from storage.errors import KraftError
from storage.log_cleaner import CleanJob, CleanOutput, discard_clean, run_clean

_log: FilteringBoundLogger = structlog.get_logger("replication.broker.replicas.cleaner")


class CompactedReplica(Protocol):
    """What the cleaner needs of a replica
    (`replication.broker.replicas.partition.PartitionReplica`)."""

    @property
    def topic_partition(self) -> TopicPartition: ...

    def prepare_compaction(self, now_ms: int, offset_map_bytes: int | None) -> CleanJob | None:
        """Plan a pass on the loop (None: nothing to clean)."""

    def finish_compaction(self, job: CleanJob, output: CleanOutput | Exception) -> int:
        """Swap the pass in on the loop (or raise its error); the records removed."""


@final
class LogCleaner:
    """Cleans compacted replicas in worker threads.

    Args:
        threads: ``log.cleaner.threads``.
        dedupe_buffer_bytes: ``log.cleaner.dedupe.buffer.size`` (all threads together).
        run: the worker's step (`run_clean`; a test may wrap it).
    """

    def __init__(
        self,
        threads: int = 1,
        dedupe_buffer_bytes: int = 128 << 20,
        *,
        run: Callable[[CleanJob], CleanOutput] = run_clean,
    ) -> None:
        self.threads = max(1, threads)
        self.offset_map_bytes = max(1, dedupe_buffer_bytes // self.threads)
        self._run = run
        self._executor = concurrent.futures.ThreadPoolExecutor(
            self.threads, thread_name_prefix="log-cleaner"
        )
        self._slots = asyncio.Semaphore(self.threads)

    async def run(
        self,
        replicas: Callable[[], Iterable[CompactedReplica]],
        backoff_ms: int,
        clock_ms: Callable[[], int],
    ) -> None:
        """Clean ``replicas()`` every ``backoff_ms`` until cancelled (then `close`)."""
        try:
            while True:
                await asyncio.sleep(backoff_ms / 1000)
                await self.clean_once(list(replicas()), clock_ms())
        finally:
            self.close()

    async def clean_once(self, replicas: Iterable[CompactedReplica], now_ms: int) -> int:
        """One pass over each replica in order, up to ``threads`` in the workers at once; the
        records removed. The plans run on the loop in slices (`LoopSlice`: a replica with
        nothing to clean costs only its plan, and no task), so a pass over thousands of
        replicas does not hold it. A failing replica is logged and skipped, so one bad disk
        does not stop the others."""
        running: list[asyncio.Task[int]] = []
        cut = LoopSlice()
        try:
            for replica in replicas:
                await cut.turn()
                await self._slots.acquire()
                job = self._plan(replica, now_ms)
                if job is None:
                    self._slots.release()
                    continue
                running.append(asyncio.create_task(self._clean(replica, job)))
            return sum(await asyncio.gather(*running))
        finally:
            for task in running:
                task.cancel()  # NB: a no-op once done; else the broker is stopping

    def _plan(self, replica: CompactedReplica, now_ms: int) -> CleanJob | None:
        try:
            return replica.prepare_compaction(now_ms, self.offset_map_bytes)
        except (KraftError, OSError) as e:
            _failed(replica, e)
            return None

    async def _clean(self, replica: CompactedReplica, job: CleanJob) -> int:
        """Run ``job`` in a worker and swap it in; holds a slot taken by `clean_once`."""
        try:
            output: CleanOutput | Exception
            work = self._executor.submit(self._run, job)
            try:
                output = await asyncio.wrap_future(work)
            except (OSError, KraftError) as e:
                output = e
            except asyncio.CancelledError:
                work.add_done_callback(_discard_if_done)  # the broker is stopping
                raise
            return replica.finish_compaction(job, output)
        except (KraftError, OSError) as e:
            _failed(replica, e)
            return 0
        finally:
            self._slots.release()

    def close(self) -> None:
        """Stop taking work; a pass in a worker finishes there and its files are deleted."""
        self._executor.shutdown(wait=False, cancel_futures=True)


def _failed(replica: CompactedReplica, error: Exception) -> None:
    _log.error("compaction_failed", topic_partition=str(replica.topic_partition), error=repr(error))


def _discard_if_done(work: concurrent.futures.Future[CleanOutput]) -> None:
    if not work.cancelled() and work.exception() is None:
        discard_clean(work.result())


__all__ = ["CompactedReplica", "LogCleaner"]
