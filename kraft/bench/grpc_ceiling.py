"""The raw gRPC ceiling: what one client-streaming call moves to a server in another process
over 127.0.0.1, the baseline that ``kraft bench produce|consume`` and ``e2e`` print beside
kraft's figures (measured in the same run)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

from kraft.bench import BenchError

CEILING_TRIALS = 3
"""Timed trials; the median is reported."""

CEILING_SERVER = r"""
import sys, grpc
from concurrent import futures
def push(it, ctx):
    n = 0
    for m in it:
        n += len(m)
    return n.to_bytes(8, "big")
server = grpc.server(futures.ThreadPoolExecutor(max_workers=4),
    options=[("grpc.max_receive_message_length", 64 << 20)])
handler = grpc.method_handlers_generic_handler(
    "bench.Ceiling", {"Push": grpc.stream_unary_rpc_method_handler(push)})
server.add_generic_rpc_handlers((handler,))
port = server.add_insecure_port("127.0.0.1:0")
server.start()
print(port, flush=True)
sys.stdin.read()
server.stop(0)
"""
"""The ceiling's server, run with ``python -c``: it prints its port, then sums what it is
pushed until its stdin closes."""


def grpc_ceiling(total_bytes: int, message_bytes: int) -> dict[str, Any]:
    """MB/s of one client-streaming call to a server in another process, over 127.0.0.1."""
    import grpc

    total_bytes = max(total_bytes, 32 << 20)
    count = max(1, total_bytes // message_bytes)
    server = subprocess.Popen(
        [sys.executable, "-c", CEILING_SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        push = channel.stream_unary("/bench.Ceiling/Push")
        grpc.channel_ready_future(channel).result(timeout=10)
        payload = os.urandom(message_bytes)

        def messages(n: int) -> Iterator[bytes]:
            for _ in range(n):
                yield payload

        push(messages(min(count, 64)), timeout=30)  # warm up
        trials: list[float] = []
        for _ in range(CEILING_TRIALS):
            start = time.perf_counter()
            received = int.from_bytes(push(messages(count), timeout=120), "big")
            trials.append(time.perf_counter() - start)
            if received != count * message_bytes:
                raise BenchError(
                    f"gRPC ceiling: the server got {received} bytes, not {count * message_bytes}"
                )
        seconds = sorted(trials)[len(trials) // 2]  # the median trial
        channel.close()
    finally:
        if server.stdin is not None:
            with contextlib.suppress(OSError):
                server.stdin.close()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return {
        "message_bytes": message_bytes,
        "messages": count,
        "bytes": received,
        "seconds": round(seconds, 3),
        "trials_mb_per_s": [round(received / t / 1e6, 3) for t in trials],
        "messages_per_s": round(count / seconds, 1),
        "mb_per_s": round(received / seconds / 1e6, 3),
    }
