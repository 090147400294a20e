"""A process holding live gRPC channels can still start children the way pyspark starts its
JVM (``subprocess.Popen(preexec_fn=...)``), every time: kraft turns gRPC's fork handlers off,
which otherwise make about one such start in 40 die before exec (grpc/grpc#43055)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(300)

_CHILD = textwrap.dedent(
    """
    import subprocess, threading
    import kraft  # noqa: F401  (what every kraft process imports first)
    import grpc
    from concurrent import futures
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc

    server = grpc.server(futures.ThreadPoolExecutor(4))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = health_pb2_grpc.HealthStub(channel)
    done = threading.Event()

    def load() -> None:
        while not done.is_set():
            stub.Check(health_pb2.HealthCheckRequest(), timeout=10)

    loaders = [threading.Thread(target=load, daemon=True) for _ in range(3)]
    for loader in loaders:
        loader.start()
    failed = sum(
        subprocess.Popen(["/bin/true"], preexec_fn=lambda: None).wait() != 0 for _ in range(200)
    )
    done.set()
    print("failed", failed, flush=True)
    # NB: stop gRPC before the interpreter exits: with calls still in flight on daemon threads
    # while the interpreter finalizes, the server's thread raised and the exit hung (CI).
    for loader in loaders:
        loader.join(timeout=30)
    channel.close()
    server.stop(None).wait(30)
    """
)


def test_children_started_with_preexec_fn_all_exec_while_grpc_is_busy() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=240, check=True
    )
    assert "failed 0" in out.stdout, out.stdout + out.stderr[-2000:]
