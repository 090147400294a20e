"""kraft's processes run with `kraft.gc_tuning`'s collector settings; a library import does not."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import subprocess
import sys
from collections.abc import Callable

import pytest
import structlog

from kraft.cli import main
from kraft.gc_tuning import SERVER_THRESHOLDS, THRESHOLDS
from kraft.supervision import LoopSupervisor, serve_until_stopped
from kraft.transport.retry import retry_retriable
from replication.broker.coordinators.group_shard import GroupShard
from replication.group import GroupConfig
from replication.group.classic import ClassicGroupConfig
from storage.errors import RequestTimedOutError


def test_importing_kraft_leaves_the_collector_as_the_application_set_it() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import gc, kraft, replication.clients, kraft.raft_shell; print(gc.get_threshold())",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == str(gc.get_threshold())


def test_a_kraft_command_runs_with_kraft_thresholds() -> None:
    assert gc.get_threshold() != THRESHOLDS
    with pytest.raises(SystemExit):
        main(["bench", "storage", "--help"])
    assert gc.get_threshold() == THRESHOLDS


# --- what a server makes and drops all the time is freed without the collector -------------
# A server's oldest generation is collected only once it grew by a quarter (CPython's rule),
# so cyclic garbage made a few times a second piles up for many minutes and leaves the heap
# fragmented at its peak (docs/guarantees.md, the soak's memory).


def _cyclic_garbage_of(make_and_drop: Callable[[], object]) -> int:
    gc.collect()
    gc.disable()
    try:
        for _ in range(20):
            make_and_drop()
        return gc.collect()
    finally:
        gc.enable()


def test_a_retried_call_leaves_no_cycles_behind() -> None:
    attempts = iter([RequestTimedOutError("the first attempt timed out"), None] * 20)

    def flaky() -> int:
        error = next(attempts)
        if error is not None:
            raise error
        return 1

    assert _cyclic_garbage_of(lambda: retry_retriable(lambda: 1, timeout_s=1.0)) == 0
    assert _cyclic_garbage_of(lambda: retry_retriable(flaky, timeout_s=1.0, wait=lambda _: 0)) == 0


def test_a_dropped_group_shard_leaves_no_cycles_behind() -> None:
    # a broker drops and loads one at every leadership move of an offsets partition
    assert _cyclic_garbage_of(lambda: GroupShard(GroupConfig(), ClassicGroupConfig())) == 0


def test_a_started_server_collects_its_older_generations_as_a_server() -> None:
    seen: list[tuple[tuple[int, int, int], int]] = []

    async def start() -> None:
        pass

    async def on_signal() -> None:
        pass

    async def main() -> int:
        async def stop_soon() -> None:
            seen.append((gc.get_threshold(), gc.get_freeze_count()))
            os.kill(os.getpid(), signal.SIGTERM)

        asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(stop_soon()))
        return await serve_until_stopped(
            LoopSupervisor(structlog.get_logger("test")),
            start=start,
            on_signal=on_signal,
            on_death=on_signal,
        )

    assert asyncio.run(main()) == 0
    [(thresholds, frozen)] = seen
    assert thresholds == SERVER_THRESHOLDS != THRESHOLDS
    assert frozen > 0  # what the process held once started is out of later collections


_MAPPED_AFTER_A_BURST = """
import ctypes, sys
from kraft.gc_tuning import tune_server_malloc
if "--tuned" in sys.argv:
    assert tune_server_malloc()
burst = bytearray(8 << 20)  # mapped on its own, then freed: glibc's default raises its thresholds
del burst
block = bytearray(1 << 20)
address = ctypes.addressof((ctypes.c_char * 1).from_buffer(block))
for line in open("/proc/self/maps"):
    span, *rest = line.split()
    low, high = (int(x, 16) for x in span.split("-"))
    if low <= address < high:
        print(rest[-1] if len(rest) == 5 else "anonymous")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_server_s_allocator_maps_a_large_block_on_its_own_even_after_a_burst() -> None:
    """`tune_server_malloc` keeps glibc's mmap threshold fixed: after an 8 MiB burst was freed, a
    1 MiB block is still mapped on its own (and unmapped when freed), where by default it
    would come from the heap, which then keeps that memory resident."""

    def where(*args: str) -> str:
        code = _MAPPED_AFTER_A_BURST
        out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert where() == "[heap]"  # glibc's default, the behaviour this setting exists to change
    assert where("--tuned") == "anonymous"


def test_a_node_command_tunes_the_allocator_before_grpc_is_imported() -> None:
    """`kraft broker` and `kraft controller` call `tune_server_malloc` before gRPC (and its
    threads) exist, and the other commands do not call it."""
    code = """
import contextlib, sys
import kraft.gc_tuning as tuning
calls = []
tuning.tune_server_malloc = lambda: calls.append("grpc" in sys.modules) or True
from kraft.cli import main
for argv in (["broker", "--help"], ["controller", "--help"], ["topics", "--help"]):
    with contextlib.redirect_stdout(None), contextlib.suppress(SystemExit):
        main(argv)
print(calls)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "[False, False]", out.stdout + out.stderr


def test_a_started_server_runs_full_collections_on_a_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cycle dropped while a server runs (gRPC leaves one per call) is freed by the server's
    periodic full collection (`collect_periodically`), though no threshold was reached."""
    import weakref

    import kraft.gc_tuning as tuning

    monkeypatch.setattr(tuning.collect_periodically, "__defaults__", (0.05,))
    freed = asyncio.Event()

    class Node:
        def __init__(self) -> None:
            self.me = self  # a cycle: only the collector frees it

    async def start() -> None:
        pass

    async def on_signal() -> None:
        pass

    async def main() -> int:
        async def drop_a_cycle_then_stop() -> None:
            node = Node()
            weakref.finalize(node, freed.set)
            del node
            await asyncio.wait_for(freed.wait(), 30)
            os.kill(os.getpid(), signal.SIGTERM)

        asyncio.get_running_loop().call_soon(
            lambda: asyncio.ensure_future(drop_a_cycle_then_stop())
        )
        return await serve_until_stopped(
            LoopSupervisor(structlog.get_logger("test")),
            start=start,
            on_signal=on_signal,
            on_death=on_signal,
        )

    thresholds = gc.get_threshold()
    try:
        assert asyncio.run(main()) == 0
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
    assert freed.is_set()
