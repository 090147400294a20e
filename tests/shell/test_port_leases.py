"""`free_ports` never hands one port to two clusters starting at once on one machine."""

from __future__ import annotations

import multiprocessing
import random
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from kraft.cluster import ports
from kraft.cluster.ports import free_ports


@pytest.fixture(autouse=True)
def private_leases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    return tmp_path


def test_draws_in_other_processes_while_none_listens_never_share_a_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Nothing binds the ports drawn, so every one stays free, and every process (forked,
    # with this patch) tries them in the same order: only the leases keep 8 processes x 12
    # ports (a 3+3 cluster's worth each) apart.
    monkeypatch.setattr(random, "sample", lambda population, k: list(population))
    with ProcessPoolExecutor(max_workers=8, mp_context=multiprocessing.get_context("fork")) as pool:
        draws = list(pool.map(free_ports, [12] * 8))
    every = [port for draw in draws for port in draw]
    assert len(every) == len(set(every)) == 96


def test_a_port_is_drawn_again_once_its_lease_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    first = free_ports(1)[0]
    lines = ports.lease_file().read_text().split()
    assert lines[0] == str(first) and float(lines[1]) > time.time() + ports.LEASE_S - 5
    ports.lease_file().write_text(f"{first} {time.time() - 1:.0f}\ntorn")
    monkeypatch.setattr(random, "sample", lambda population, k: [first, *population])
    assert free_ports(1) == [first]
    assert ports.lease_file().read_text().split()[0] == str(first)
