"""A consumer of the main job's group step (`kraft.demo.group_step`), run as a process:

    python -m kraft.demo.group_worker BOOTSTRAP TOPIC GO_FILE

It joins `GROUP`, holds off until ``GO_FILE`` exists (what it polls meanwhile is put back), then
polls, *processes* each poll by reporting its offsets on stdout (one JSON line, flushed) and
only then commits: at-least-once. Other lines report the partitions it is assigned, revoked
or lost, as its own rebalance callbacks see them. It stops on SIGTERM (and leaves the group).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

GROUP = "demo-group"
MAX_POLL_RECORDS = 5_000
"""Per poll, so per commit: also the most a killed member can leave processed but uncommitted."""


def worker(bootstrap: str, topic: str, go: Path, security: dict[str, str] | None = None) -> int:
    """One member of `GROUP`: JSON lines on stdout (``assigned``/``revoked``/``lost`` with
    partitions; ``processed`` with ``[partition, first, last, count]`` per partition of a
    poll), until SIGTERM. ``security``: the client's TLS settings (a TLS cluster)."""
    from kraft import Consumer
    from storage.errors import KraftError

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    out = sys.stdout

    def emit(event: dict[str, Any]) -> None:
        out.write(json.dumps(event, separators=(",", ":")) + "\n")
        out.flush()

    def callback(name: str) -> Any:
        return lambda _c, ps: emit({"e": name, "p": sorted(p.partition for p in ps)})

    gated = True
    with Consumer(
        bootstrap,
        group_id=GROUP,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=MAX_POLL_RECORDS,
        client_id=f"demo-consumer-{os.getpid()}",
        **(security or {}),
    ) as consumer:
        consumer.subscribe(
            [topic],
            on_assign=callback("assigned"),
            on_revoke=callback("revoked"),
            on_lost=callback("lost"),
        )
        while not stop.is_set():
            if gated and go.exists():
                gated = False
                consumer.seek_to_beginning()  # nothing is committed yet: start at offset 0
            try:
                records = consumer.poll(0.2)
            except KraftError as e:
                emit({"e": "error", "error": type(e).__name__})
                continue
            if gated:
                if records:  # not yet: put them back
                    consumer.seek_to_beginning()
                continue
            if not records:
                continue
            ranges: dict[int, list[int]] = {}
            for r in records:
                span = ranges.get(r.partition)
                if span is None:
                    ranges[r.partition] = [r.partition, r.offset, r.offset, 1]
                else:
                    span[2] = r.offset
                    span[3] += 1
            emit({"e": "processed", "r": list(ranges.values())})
            try:
                consumer.commit()  # after processing: at-least-once
            except KraftError as e:  # e.g. fenced during a rebalance: the next owner redoes
                emit({"e": "commit_failed", "error": type(e).__name__})
    return 0


def main(argv: Sequence[str]) -> int:
    """``python -m kraft.demo.group_worker BOOTSTRAP TOPIC GO_FILE [SECURITY_JSON]``."""
    from kraft.cluster.process import die_with_parent
    from kraft.gc_tuning import tune_gc

    die_with_parent()  # never outlive the demo, even a SIGKILLed one
    tune_gc()
    if len(argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    security = json.loads(argv[3]) if len(argv) == 4 else None
    with contextlib.suppress(KeyboardInterrupt):
        return worker(argv[0], argv[1], Path(argv[2]), security)
    return 130


__all__ = ["GROUP", "MAX_POLL_RECORDS", "worker"]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
