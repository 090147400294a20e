"""The rocksdict state store: key spaces, atomic batches, durability across reopen."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from storage.errors import LogClosedError
from storage.state import StateStore, WriteBatch


def test_key_spaces_do_not_see_each_others_keys(tmp_path: Path) -> None:
    with StateStore(tmp_path / "db") as store:
        store.space("raft").put(b"epoch", b"3")
        store.space("raft2").put(b"epoch", b"9")
        assert store.space("raft").get(b"epoch") == b"3"
        assert dict(store.space("raft").items()) == {b"epoch": b"3"}
        assert store.space("producers").get(b"epoch") is None


def test_batch_across_spaces_is_applied_whole(tmp_path: Path) -> None:
    with StateStore(tmp_path / "db") as store:
        store.space("a").put(b"gone", b"x")
        store.write(
            WriteBatch().put("a", b"k", b"1").put("b", b"k", b"2").delete("a", b"gone"), sync=True
        )
        assert store.space("a").get(b"k") == b"1"
        assert store.space("b").get(b"k") == b"2"
        assert store.space("a").get(b"gone") is None


def test_synced_writes_survive_a_killed_process(tmp_path: Path) -> None:
    db = tmp_path / "db"
    script = (
        "import os; from storage.state import StateStore\n"
        f"s = StateStore({str(db)!r})\n"
        "s.space('raft').put(b'vote', b'2', sync=True)\n"
        "os._exit(0)  # no close, no flush\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, cwd=Path(__file__).parents[2])
    with StateStore(db) as store:
        assert store.space("raft").get(b"vote") == b"2"


def test_use_after_close_raises_a_typed_error(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "db")
    space = store.space("x")
    store.close()
    with pytest.raises(LogClosedError):
        space.get(b"k")


def test_clear_removes_only_its_space(tmp_path: Path) -> None:
    with StateStore(tmp_path / "db") as store:
        for i in range(5):
            store.space("a").put(bytes([i]), b"v")
        store.space("b").put(b"keep", b"v")
        store.space("a").clear()
        assert list(store.space("a").items()) == []
        assert store.space("b").get(b"keep") == b"v"
