"""`ReplicaFiles`: what a replica keeps on disk beside its log, for both partition drivers.

Kafka's ``replication-offset-checkpoint`` (the high watermark, written when it moved) and the
producer-state snapshots (``<offset>.snapshot``, taken at the log end after a segment roll and
on a clean shutdown). The ISR and the quorum driver differ in how they replicate, not in these
files, so the rules live here once. Errors are raised to the caller, whose storage guard takes
the replica offline (`PartitionDriver.storage_guard`), except in `close`, which is best effort.
"""

from __future__ import annotations

import contextlib
from typing import final

from structlog.typing import FilteringBoundLogger

from replication.core import ProducerStateManager
from replication.driver.interface import HighWatermarkCheckpoint, ProducerSnapshots, ReplicaLog
from storage.errors import KafkaStorageError


@final
class ReplicaFiles:
    """The high-watermark checkpoint and the producer snapshots of one replica."""

    def __init__(
        self,
        *,
        log: ReplicaLog,
        snapshots: ProducerSnapshots,
        checkpoint: HighWatermarkCheckpoint,
        producer_state: ProducerStateManager,
        checkpointed_high_watermark: int | None,
        logger: FilteringBoundLogger,
    ) -> None:
        self._log = log
        self._snapshots = snapshots
        self._checkpoint = checkpoint
        self._producer_state = producer_state
        self._checkpointed = checkpointed_high_watermark
        self._logger = logger

    def checkpoint_high_watermark(self, high_watermark: int) -> None:
        """Persist ``high_watermark`` if it moved since the last write (durable on return).

        Raises:
            OSError, KafkaStorageError: the write failed.
        """
        if high_watermark != self._checkpointed:
            self._checkpoint.write(high_watermark)
            self._checkpointed = high_watermark

    def take_producer_snapshot(self) -> int | None:
        """Snapshot the producer state at the log end (Kafka takes one when a segment rolls);
        its offset, or None if there was nothing new or a rebuild is pending.

        Raises:
            OSError: the snapshot could not be written.
        """
        state, log = self._producer_state, self._log
        offset = state.map_end_offset
        if offset != log.log_end_offset or offset < log.log_start_offset:
            # NB: a rebuild is pending (the state lags the log): the next roll will do.
            self._logger.warning(
                "producer_snapshot_skipped",
                map_end_offset=offset,
                log_end_offset=log.log_end_offset,
            )
            return None
        if offset in self._snapshots:
            return None
        self._snapshots.write(offset, state.snapshot())
        self._logger.debug("producer_snapshot_taken", offset=offset)
        return offset

    def close(self, high_watermark: int) -> None:
        """A clean shutdown: checkpoint and snapshot, so the next open replays nothing (best
        effort: a failure only means more replay then)."""
        with contextlib.suppress(OSError, KafkaStorageError):
            self.checkpoint_high_watermark(high_watermark)
        with contextlib.suppress(OSError, KafkaStorageError):
            self.take_producer_snapshot()


__all__ = ["ReplicaFiles"]
