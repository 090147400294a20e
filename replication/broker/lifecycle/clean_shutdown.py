"""The broker's clean-shutdown record (KIP-966): the broker epoch it had when it last stopped
cleanly, so the controller can tell a clean restart from an unclean one.

Kafka writes its broker epoch into each log directory's clean-shutdown file when it closes its
logs, and sends it back as ``PreviousBrokerEpoch`` when it registers again; a broker that crashed
or lost power has no file and sends -1. The controller takes a broker whose previous epoch is
not the one it had registered out of every ELR (eligible leader replicas): its logs may have
lost records that were committed (`kraft.controller.eligible_leaders`).

kraft keeps one such file per broker, ``<log.dirs>/.kraft_clean_shutdown``, a small JSON object
``{"version": 0, "broker_epoch": N}`` written atomically (temporary file, fsync, rename) after
every replica's log was closed. `take_previous_broker_epoch` reads it at start and deletes it at
once, so a crash of this run leaves no file behind and the next start counts as unclean.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Final

CLEAN_SHUTDOWN_FILE: Final = ".kraft_clean_shutdown"
_VERSION: Final = 0


def take_previous_broker_epoch(data_dir: Path) -> int | None:
    """The broker epoch of the last clean shutdown, or None (no file, or an unreadable one: an
    unclean shutdown); the file is deleted either way."""
    path = data_dir / CLEAN_SHUTDOWN_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError:
        raw = b""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
        _sync_dir(data_dir)
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(doc, dict) or doc.get("version") != _VERSION:
        return None
    epoch = doc.get("broker_epoch")
    if not isinstance(epoch, int) or isinstance(epoch, bool):
        return None
    return epoch if epoch >= 0 else None


def write_clean_shutdown(data_dir: Path, broker_epoch: int) -> None:
    """Record a clean shutdown at ``broker_epoch`` (call after every log was closed)."""
    path = data_dir / CLEAN_SHUTDOWN_FILE
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(json.dumps({"version": _VERSION, "broker_epoch": broker_epoch}).encode())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _sync_dir(data_dir)


def _sync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["CLEAN_SHUTDOWN_FILE", "take_previous_broker_epoch", "write_clean_shutdown"]
