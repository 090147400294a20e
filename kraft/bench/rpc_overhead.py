"""``python -m kraft.bench.rpc_overhead``: the server CPU of one unary RPC on kraft's grpc.aio
server (`kraft.transport.channels.aio_server`: its interceptors, `RequestMetrics` and
`RejectUnparseable`) beside a bare ``grpc.aio.server()``, in the same run.

Each server runs in its own process and answers one method (an async echo of a 100-byte
message); a client with 8 threads sends ``--calls`` unary calls; the figure is the server
process's CPU time (user + system, ``/proc``) per call. The two servers alternate for
``--rounds`` rounds and the medians are reported, so load from elsewhere hits both.

``--in-process`` measures the interceptors' own Python instead, without gRPC: both
``intercept_service`` calls (over a stub handler lookup) and one call through the handler
they return, against the lookup and call alone; CPU time (``time.process_time``), best of 7
rounds.

The script uses only ``aio_server`` and the two interceptor classes from the tree on
``PYTHONPATH``, so it measures an older tree too: ``PYTHONPATH=/old/tree python
/path/to/rpc_overhead.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

_SERVER = r"""
import asyncio, sys
import grpc

async def main(kind):
    if kind == "kraft":
        from kraft.transport.channels import aio_server
        server = aio_server()
    else:
        server = grpc.aio.server()

    async def echo(request, context):
        return request

    handler = grpc.unary_unary_rpc_method_handler(
        echo, request_deserializer=bytes, response_serializer=bytes
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("bench.Bench", {"Echo": handler}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(port, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await server.stop(None)

asyncio.run(main(sys.argv[1]))
"""


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_round(kind: str, calls: int, threads: int = 8) -> dict[str, float]:
    """Server CPU µs per call and calls/s of ``calls`` unary calls to a ``kind`` server."""
    import grpc

    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER, kind],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            echo = channel.unary_unary("/bench.Bench/Echo")
            message = b"x" * 100
            for _ in range(200):  # warm-up: connection, first calls
                echo(message, timeout=10)
            before = _cpu_s(server.pid)
            started = time.perf_counter()

            def run(n: int) -> None:
                for _ in range(n):
                    echo(message, timeout=10)

            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(run, [calls // threads] * threads))
            seconds = time.perf_counter() - started
            used = _cpu_s(server.pid) - before
        done = calls // threads * threads
        return {"server_cpu_us_per_call": used / done * 1e6, "calls_per_s": done / seconds}
    finally:
        server.communicate("", timeout=30)


def in_process(calls: int) -> dict[str, float]:
    """µs of CPU per RPC of the interceptors' own Python (see the module docstring)."""
    import asyncio

    import grpc

    from kraft.metrics.registry import RequestMetrics
    from kraft.transport.request_guard import RejectUnparseable

    async def echo(request: bytes, context: Any) -> bytes:
        return request

    handler = grpc.unary_unary_rpc_method_handler(echo, bytes, bytes)

    class Details:
        method = "/bench.Bench/InProcessEcho"
        invocation_metadata = ()

    async def lookup(details: Any) -> Any:
        return handler

    async def main() -> dict[str, float]:
        outer, inner = RequestMetrics(), RejectUnparseable()
        details = Details()

        async def chain(d: Any) -> Any:
            return await inner.intercept_service(lookup, d)

        async def intercepted() -> None:
            h = await outer.intercept_service(chain, details)
            await h.unary_unary(h.request_deserializer(b"x" * 100), None)

        async def bare() -> None:
            h = await lookup(details)
            await h.unary_unary(h.request_deserializer(b"x" * 100), None)

        best: dict[str, float] = {}
        for _ in range(7):
            for name, one in (("with_interceptors_us", intercepted), ("bare_us", bare)):
                started = time.process_time()
                for _ in range(calls):
                    await one()
                spent = (time.process_time() - started) / calls * 1e6
                best[name] = min(best.get(name, spent), spent)
        best["interceptors_us_per_rpc"] = best["with_interceptors_us"] - best["bare_us"]
        return {k: round(v, 2) for k, v in best.items()}

    return asyncio.run(main())


def run(calls: int, rounds: int) -> dict[str, Any]:
    measured: dict[str, list[dict[str, float]]] = {"bare": [], "kraft": []}
    load_before = [round(x, 2) for x in os.getloadavg()]
    for _ in range(rounds):
        for kind in measured:
            measured[kind].append(one_round(kind, calls))
    out: dict[str, Any] = {"calls": calls, "rounds": rounds, "load_average_before": load_before}
    for kind, runs in measured.items():
        out[kind] = {key: round(statistics.median(r[key] for r in runs), 1) for key in runs[0]} | {
            "server_cpu_us_per_call_all": [round(r["server_cpu_us_per_call"], 1) for r in runs]
        }
    out["kraft_minus_bare_us_per_call"] = round(
        out["kraft"]["server_cpu_us_per_call"] - out["bare"]["server_cpu_us_per_call"], 1
    )
    out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000, help="unary calls per round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (median)")
    parser.add_argument(
        "--in-process", action="store_true", help="the interceptors' own Python, without gRPC"
    )
    args = parser.parse_args(argv)
    if args.in_process:
        print(json.dumps(in_process(args.calls), indent=2))
        return 0
    print(json.dumps(run(args.calls, args.rounds), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
