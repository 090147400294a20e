"""A dead loop takes its process down (issue 10, finding 1): one error event naming the
exception, health NOT_SERVING at once, exit code 1; never a zombie that health still counts."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
import structlog
from grpc_health.v1 import health_pb2, health_pb2_grpc
from structlog.testing import capture_logs

import replication.broker.server as broker_server
from kraft.cluster.ports import free_ports
from kraft.controller.node_config import ControllerNodeConfig
from kraft.controller.server import ControllerServer
from kraft.raft import RaftNode
from kraft.supervision import EXIT_LOOP_DIED, LoopSupervisor
from replication.broker.config import BrokerNodeConfig
from replication.broker.process import serve
from storage.errors import LogClosedError

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[2]


def _deaths(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == "background_task_died"]


def test_the_first_loop_to_die_is_logged_once_and_runs_the_death_callbacks() -> None:
    async def main() -> None:
        supervisor = LoopSupervisor(structlog.get_logger("test"))
        marked: list[str] = []
        supervisor.on_death(lambda: marked.append("not_serving"))

        async def boom() -> None:
            raise ValueError("Value out of range: 2147483648")

        async def forever() -> None:
            await asyncio.Event().wait()

        idle = asyncio.create_task(forever(), name="idle")
        supervisor.watch(idle)
        for name in ("raft-loop-1", "controller-tick-1"):
            supervisor.watch(asyncio.create_task(boom(), name=name))
        exc = await asyncio.wait_for(supervisor.wait_for_death(), 5)
        assert isinstance(exc, ValueError) and marked == ["not_serving"]
        idle.cancel()
        await asyncio.sleep(0)

    with capture_logs() as logs:
        asyncio.run(main())
    (death,) = _deaths(logs)
    assert death["log_level"] == "error" and death["task"] == "raft-loop-1"
    assert "ValueError" in death["error"]


def test_a_loop_that_returns_dies_but_a_cancelled_or_stopping_one_does_not() -> None:
    async def main() -> tuple[BaseException | None, BaseException | None]:
        supervisor = LoopSupervisor(structlog.get_logger("test"))

        async def done() -> None:
            return None

        async def forever() -> None:
            await asyncio.Event().wait()

        cancelled = asyncio.create_task(forever())
        supervisor.watch(cancelled)
        allowed = asyncio.create_task(done())
        supervisor.watch(allowed, may_finish=True)
        cancelled.cancel()
        await asyncio.gather(cancelled, allowed, return_exceptions=True)
        await asyncio.sleep(0)
        before = supervisor.death
        supervisor.watch(asyncio.create_task(done(), name="tick"))
        await asyncio.sleep(0.01)
        return before, supervisor.death

    before, after = asyncio.run(main())
    assert before is None
    assert isinstance(after, RuntimeError) and "tick" in str(after)


async def _health(address: str) -> int:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        reply = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
        return int(reply.status)


async def _until(predicate: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def test_a_controller_whose_raft_loop_dies_says_not_serving_at_once_and_fails_proposals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Voters 2 and 3 never start: node 1 keeps campaigning, so its loop keeps ticking.
    voters = {i + 1: f"127.0.0.1:{p}" for i, p in enumerate(free_ports(3))}
    address = voters[1]
    config = ControllerNodeConfig(
        node_id=1, voters=voters, listen=address, data_dir=tmp_path / "c1"
    )
    fail = {"now": False}
    real_tick = RaftNode.tick

    def tick(self: RaftNode, now_ms: int) -> None:
        if fail["now"]:
            raise ValueError("Value out of range: 2147483648")
        real_tick(self, now_ms)

    monkeypatch.setattr(RaftNode, "tick", tick)

    async def main() -> None:
        server = ControllerServer(config, seed=1)
        await server.start()
        try:
            assert await _health(address) == health_pb2.HealthCheckResponse.SERVING
            fail["now"] = True
            await _until(lambda: server.supervisor.death is not None)
            assert await _health(address) == health_pb2.HealthCheckResponse.NOT_SERVING
            with pytest.raises(LogClosedError):
                server.raft.propose_nowait([b"x"])
        finally:
            await server.stop(graceful=False)

    with capture_logs() as logs:
        asyncio.run(main())
    (death,) = _deaths(logs)
    assert death["task"] == "raft-loop-1" and "ValueError" in death["error"]


def test_a_broker_whose_tick_loop_dies_stops_serving_and_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No controller is needed: the broker keeps trying to register meanwhile."""
    controller_port, broker_port = free_ports(2)
    config = BrokerNodeConfig(
        node_id=101,
        voters={1: f"127.0.0.1:{controller_port}"},
        listen=f"127.0.0.1:{broker_port}",
        data_dir=tmp_path / "b101",
    )

    async def dies(*_: object) -> None:
        await asyncio.sleep(0.2)
        raise ValueError("injected into the broker's tick loop")

    monkeypatch.setattr(broker_server, "run_tick_loop", dies)
    with capture_logs() as logs:
        code = asyncio.run(asyncio.wait_for(serve(config), 60))
    assert code == EXIT_LOOP_DIED
    (death,) = _deaths(logs)
    assert death["task"] == "broker-tick" and "ValueError" in death["error"]


_CONTROLLER_WITH_A_FAILING_LOOP = textwrap.dedent(
    """
    import sys
    from kraft.raft import RaftNode

    real_tick = RaftNode.tick
    calls = 0

    def tick(self, now_ms):
        global calls
        calls += 1
        if calls == 30:  # what an epoch past int32 did in the protobuf encoder
            raise ValueError("Value out of range: 2147483648")
        real_tick(self, now_ms)

    RaftNode.tick = tick
    from kraft.cli import main

    sys.exit(main(sys.argv[1:]))
    """
)


@pytest.mark.process
def test_a_controller_process_whose_raft_loop_dies_exits_non_zero_with_one_error_line(
    tmp_path: Path,
) -> None:
    # Voters 2 and 3 never start: node 1 keeps campaigning, so its loop keeps ticking.
    voters = {i + 1: f"127.0.0.1:{p}" for i, p in enumerate(free_ports(3))}
    address = voters[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            _CONTROLLER_WITH_A_FAILING_LOOP,
            "controller",
            "--node-id",
            "1",
            "--controller-quorum-voters",
            ",".join(f"{i}@{a}" for i, a in voters.items()),
            "--listen",
            address,
            "--data-dir",
            str(tmp_path / "c1"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == EXIT_LOOP_DIED, proc.stderr[-2000:]
    events = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    deaths = _deaths(events)
    assert len(deaths) == 1, proc.stderr[-2000:]
    assert deaths[0]["level"] == "error" and "ValueError" in deaths[0]["error"]
    assert deaths[0]["task"] == "raft-loop-1"


def test_a_start_that_fails_releases_what_it_opened_and_raises() -> None:
    from kraft.supervision import serve_until_stopped

    released: list[str] = []

    async def start() -> None:
        raise OSError("cannot listen on 127.0.0.1:1")

    async def on_death() -> None:
        released.append("stopped")

    async def main() -> int:
        return await serve_until_stopped(
            LoopSupervisor(structlog.get_logger("test")),
            start=start,
            on_signal=on_death,
            on_death=on_death,
        )

    with pytest.raises(OSError, match="cannot listen"):
        asyncio.run(main())
    assert released == ["stopped"]


def test_a_dead_nodes_summary_names_its_error_not_the_warning_printed_at_exit(
    tmp_path: Path,
) -> None:
    from kraft.cluster.process import last_log_line

    log = tmp_path / "broker.log"
    log.write_text(
        "OSError: cannot listen on 127.0.0.1:9092: the port is taken\n"
        "sys:1: RuntimeWarning: coroutine 'AioServer.shutdown' was never awaited\n"
    )
    assert last_log_line(log) == "OSError: cannot listen on 127.0.0.1:9092: the port is taken"
