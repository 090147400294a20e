"""`MetadataLoader`: a broker's metadata images, built off the event loop (Kafka's
``MetadataLoader``, which runs on a thread of its own).

The broker's Raft observer hands it committed batches, in offset order, as its state machine
(`kraft.raft_shell.state_machine.BatchStateMachine`). Decoding their records and folding them
into the next `MetadataImage` is pure work on immutable data, so one worker thread does it, in
the order the batches came; each image it finishes is *published* on the event loop, in the
same order (the broker's ``image`` is set and its replicas reconcile). A snapshot installed
from the leader goes the same way, so nothing built from an older image is published after it.

- **Order.** One worker, first in first out: the image of a batch is built from the image of
  the batch before it (or of the snapshot before it), and published after it.
- **Snapshots.** The Raft driver counts a batch applied once `apply_batch` returns, and
  snapshots at that offset. ``snapshot_writer`` therefore hands out the image *after every batch
  handed over so far* (it waits for the worker to finish them, in the driver's own worker
  thread), never the published one, which may lag behind.
- **Failure.** A batch that does not decode or contradicts the image (a controller bug) fails
  its image and every image after it; the first failure goes to ``on_error`` (the broker's
  supervisor, which takes the process down, as the same error on the loop did).

Why: a 10,000-partition topic is one committed batch of 10,001 records; decoding and applying
it costs ~0.15 s of CPU, which on the loop delayed the heartbeats, the Raft fetches and the
follower fetches behind it. In the worker it shares the CPU with the loop (the interpreter
switches threads every few milliseconds) and the loop keeps serving.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Callable

from kraft.metadata import MetadataImage, decode_record


class MetadataLoader:
    """The broker's metadata state machine (see the module docstring).

    Args:
        publish: called on the event loop with each new image, in order.
        on_error: called on the event loop with the first batch's error.
    """

    def __init__(
        self,
        publish: Callable[[MetadataImage], None],
        on_error: Callable[[BaseException], None],
    ) -> None:
        self._publish = publish
        self._on_error = on_error
        self._worker = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="metadata-loader"
        )
        self._tip: concurrent.futures.Future[MetadataImage] | None = None
        """The image after every batch and snapshot handed over so far (None: none yet)."""
        self._failed = False
        self.pending = 0
        """Images handed to the worker and not yet published."""

    # --- the Raft state machine (`kraft.raft_shell.state_machine`) -----------------------------

    def apply(self, offset: int, data: bytes) -> None:  # pragma: no cover - apply_batch wins
        self.apply_batch(offset, -1, [(offset, data)], False)

    def apply_batch(
        self, base_offset: int, epoch: int, records: list[tuple[int, bytes]], is_control: bool
    ) -> None:
        """Hand a committed batch to the worker; its image is published later, in order."""
        if is_control or not records:
            return
        first = records[0][0]
        values = [value for _, value in records]

        def fold(image: MetadataImage) -> MetadataImage:
            return image.apply_batch([decode_record(v) for v in values], first, epoch)

        self._submit(fold)

    def restore(self, data: bytes) -> None:
        """Replace the state with a snapshot's: built and published in turn, like a batch."""
        self._submit(lambda _previous: MetadataImage.from_snapshot(data))

    def snapshot(self) -> bytes:
        return self.snapshot_writer()()

    def snapshot_writer(self) -> Callable[[], bytes]:
        """The snapshot of the image after every batch handed over so far, as a function that
        waits for the worker to build it (the driver calls it in a worker thread)."""
        tip = self._tip
        if tip is None:
            return MetadataImage.empty().to_snapshot
        return lambda: tip.result().to_snapshot()

    # --- the worker ----------------------------------------------------------------------------

    def _submit(self, step: Callable[[MetadataImage], MetadataImage]) -> None:
        loop = asyncio.get_running_loop()
        previous = self._tip

        def build() -> MetadataImage:
            # NB: one worker, in order: ``previous`` has finished (or failed: so do we).
            return step(MetadataImage.empty() if previous is None else previous.result())

        future = self._worker.submit(build)
        self._tip = future
        self.pending += 1
        future.add_done_callback(lambda done: _call_soon(loop, self._built, done))

    def _built(self, future: concurrent.futures.Future[MetadataImage]) -> None:
        """On the loop: publish a finished image (in order: the worker finishes them so and
        ``call_soon_threadsafe`` keeps that order)."""
        self.pending -= 1
        if future.cancelled():
            return  # closed
        error = future.exception()
        if error is not None:
            if not self._failed:
                self._failed = True
                self._on_error(error)
            return
        if not self._failed:
            self._publish(future.result())

    def close(self) -> None:
        """Stop the worker (what it is building is dropped, not published)."""
        self._worker.shutdown(wait=False, cancel_futures=True)


def _call_soon(
    loop: asyncio.AbstractEventLoop,
    callback: Callable[[concurrent.futures.Future[MetadataImage]], None],
    future: concurrent.futures.Future[MetadataImage],
) -> None:
    # A closed loop (the broker stopped) publishes nothing any more.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback, future)


__all__ = ["MetadataLoader"]
