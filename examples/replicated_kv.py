"""A key-value store replicated across 3 processes with kraft's embeddable Raft log.

Run it with no arguments:

    python examples/replicated_kv.py

It starts three node processes (this same file with ``--node``), writes keys through the
leader, kills the leader with SIGKILL, keeps writing through the new leader, restarts the
killed node and checks that all three end with the same store. Each node speaks a tiny line
protocol on stdin/stdout (``put K V``, ``get K``, ``dump``, ``leader``) so the driver can talk
to it; the replication itself is all `kraft.ReplicatedLog`.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

# --- a node --------------------------------------------------------------------------------------


class KeyValueStore:
    """The replicated state machine: a dict, changed only by committed entries."""

    def __init__(self) -> None:
        self.data: dict[str, str] = {}
        self.last_offset = -1

    def apply(self, offset: int, entry: bytes) -> None:
        key, value = json.loads(entry)
        self.data[key] = value
        self.last_offset = offset

    def snapshot(self) -> bytes:
        return json.dumps(self.data).encode()

    def restore(self, snapshot: bytes) -> None:
        self.data = json.loads(snapshot)


def run_node(node_id: int, voters: dict[int, str], data_dir: str) -> None:
    from kraft import NotControllerError, ReplicatedLog
    from kraft.logs import configure_logging

    configure_logging(os.environ.get("KRAFT_LOG_LEVEL", "warning"))  # to stderr: the node log
    store = KeyValueStore()
    log = ReplicatedLog(node_id, voters, data_dir, state_machine=store)
    log.start()
    signal.signal(signal.SIGTERM, lambda *_: (log.stop(), sys.exit(0)))
    print("ready", flush=True)
    for line in sys.stdin:
        cmd, *args = line.split()
        if cmd == "put":
            entry = json.dumps([args[0], args[1]]).encode()
            try:
                offset = log.propose(entry).result(timeout=5)
                print(f"ok {offset}", flush=True)
            except NotControllerError as e:
                print(f"not_leader {e.leader_id}", flush=True)
            except TimeoutError:
                print("timeout", flush=True)
        elif cmd == "get":
            print(f"value {store.data.get(args[0])}", flush=True)
        elif cmd == "dump":
            print("dump " + json.dumps(store.data, sort_keys=True), flush=True)
        elif cmd == "leader":
            print(f"leader {log.leader_id} {log.epoch} {log.server.node.role_name}", flush=True)
    log.stop()


# --- the driver ----------------------------------------------------------------------------------


class Node:
    """A node process and a line reader over its stdout."""

    def __init__(self, node_id: int, voters_arg: str, data_dir: Path) -> None:
        self.node_id = node_id
        self.argv = [
            sys.executable,
            __file__,
            "--node",
            str(node_id),
            "--voters",
            voters_arg,
            "--data-dir",
            str(data_dir / f"node-{node_id}"),
        ]
        self.log_path = data_dir / f"node-{node_id}.log"
        self.proc: subprocess.Popen[str] | None = None
        self.lines: queue.Queue[str] = queue.Queue()

    def start(self) -> None:
        log = self.log_path.open("a")
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True
        )
        self.lines = queue.Queue()
        threading.Thread(
            target=self._read, args=(self.proc.stdout, self.lines), daemon=True
        ).start()
        assert self.expect(timeout=30) == "ready"

    @staticmethod
    def _read(stream: IO[str] | None, lines: queue.Queue[str]) -> None:
        assert stream is not None
        for line in stream:
            lines.put(line.strip())

    def ask(self, command: str, timeout: float = 10) -> str:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.expect(timeout)

    def expect(self, timeout: float) -> str:
        return self.lines.get(timeout=timeout)

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


def wait_for_leader(nodes: list[Node], timeout: float = 15) -> Node:
    deadline = time.monotonic() + timeout
    answers: dict[int, str] = {}
    while time.monotonic() < deadline:
        for node in nodes:
            answers[node.node_id] = node.ask("leader")
            _, leader, _epoch, _role = answers[node.node_id].split()
            if leader != "None":
                match = [n for n in nodes if str(n.node_id) == leader]
                if match:
                    return match[0]
        time.sleep(0.05)
    raise TimeoutError(f"no leader elected; last answers (leader, epoch, role): {answers}")


def put_all(nodes: list[Node], items: dict[str, str]) -> None:
    leader = wait_for_leader(nodes)
    for key, value in items.items():
        while not (reply := leader.ask(f"put {key} {value}")).startswith("ok"):
            leader = wait_for_leader(nodes)  # leadership moved: ask again
            assert reply.startswith(("not_leader", "timeout")), reply


def drive(data_dir: Path) -> int:
    from kraft.cluster.ports import free_ports

    data_dir.mkdir(parents=True, exist_ok=True)
    ports = free_ports(3)
    voters_arg = ",".join(f"{i + 1}=127.0.0.1:{p}" for i, p in enumerate(ports))
    nodes = [Node(i, voters_arg, data_dir) for i in (1, 2, 3)]
    try:
        for node in nodes:
            node.start()
        leader = wait_for_leader(nodes)
        print(f"3 nodes up; node {leader.node_id} leads")
        put_all(nodes, {f"k{i}": f"v{i}" for i in range(100)})
        print("wrote 100 keys; killing the leader with SIGKILL")
        started = time.monotonic()
        leader.kill()
        survivors = [n for n in nodes if n is not leader]
        new_leader = wait_for_leader(survivors)
        print(f"node {new_leader.node_id} leads after {time.monotonic() - started:.2f}s")
        put_all(survivors, {f"k{i}": f"w{i}" for i in range(50, 150)})
        print("wrote 100 more keys; restarting the killed node")
        leader.start()
        expected = {f"k{i}": f"v{i}" for i in range(50)} | {
            f"k{i}": f"w{i}" for i in range(50, 150)
        }
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            dumps = [json.loads(n.ask("dump").removeprefix("dump ")) for n in nodes]
            if all(d == expected for d in dumps):
                print(f"all 3 nodes hold the same {len(expected)} keys")
                return 0
            time.sleep(0.1)
        print("the nodes did not converge", file=sys.stderr)
        return 1
    finally:
        for node in nodes:
            node.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--node", type=int, help="run one node with this id")
    parser.add_argument("--voters", help="1=host:port,2=host:port,3=host:port")
    parser.add_argument("--data-dir", help="where to keep data (default: a temp dir)")
    args = parser.parse_args(argv)
    if args.node is not None:
        voters = {int(k): v for k, v in (p.split("=") for p in args.voters.split(","))}
        run_node(args.node, voters, args.data_dir)
        return 0
    if args.data_dir:
        return drive(Path(args.data_dir))
    with tempfile.TemporaryDirectory(prefix="kraft-kv-") as tmp:
        return drive(Path(tmp))


if __name__ == "__main__":
    sys.exit(main())
