"""A small datadriven runner for Raft scenario scripts (after etcd's interaction tests).

A script is a list of blocks::

    command args...
    ----
    expected output

Blocks are separated by a blank line; ``#`` lines are comments. The output of a command is
the INFO events the nodes logged while it ran, then whatever the command prints. Run
``python -m tests.scenarios.runner --rewrite [files]`` to regenerate the expected output.

Commands: ``add-nodes N [observers=M]``, ``campaign ID``, ``tick MS``, ``tick-election ID``
(to ID's next deadline), ``propose ID value...``, ``stabilize`` (deliver every message
until quiet), ``partition 1|2,3``, ``heal``, ``crash ID``, ``restart ID``, ``resign ID``,
``raft-state``, ``log ID``, ``forge KIND from=S to=D epoch=E [leader=L]`` (a message from
anyone, stepped into D at once; D's answers to S are printed; KIND is ``vote``,
``pre-vote``, ``vote-response``, ``begin-quorum-epoch`` or ``end-quorum-epoch``).
"""

from __future__ import annotations

import random
import sys
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from kraft.raft import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    NotLeaderError,
    RaftConfig,
    RaftMessage,
    RaftNode,
    VoteRequest,
    VoteResponse,
    parse_leader_change,
)
from kraft.sim import SimDisk
from kraft.sim.cluster import sim_raft_config
from kraft.types import Epoch, NodeId, Offset
from storage.records import iter_batches, record_values

ROOT = Path(__file__).parent


class _Capture:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def msg(self, message: str) -> None:
        self.lines.append(message)

    info = warning = error = critical = debug = msg


def _render(_: Any, level: str, event: MutableMapping[str, Any]) -> str:
    head = f"{level.upper()} node={event.pop('node_id', '?')} epoch={event.pop('epoch', '?')}"
    event.pop("role", None)
    name = event.pop("event")
    rest = " ".join(f"{k}={v}" for k, v in sorted(event.items()))
    return f"{head} {name}" + (f" {rest}" if rest else "")


SCENARIO_CONFIG = sim_raft_config(append_linger_ms=0)
"""The scripts' timings: the simulators' (their ``tick N`` steps are written against them)."""


@dataclass
class Env:
    lines: list[str] = field(default_factory=list)
    nodes: dict[NodeId, RaftNode] = field(default_factory=dict)
    disks: dict[NodeId, SimDisk] = field(default_factory=dict)
    voters: frozenset[NodeId] = frozenset()
    inflight: list[RaftMessage] = field(default_factory=list)
    groups: list[set[NodeId]] = field(default_factory=list)
    now_ms: int = 0
    config: RaftConfig = field(default_factory=lambda: SCENARIO_CONFIG)

    def logger(self) -> Any:
        return structlog.wrap_logger(
            _Capture(self.lines),
            wrapper_class=structlog.make_filtering_bound_logger(20),
            processors=[_render],
        )

    def start(self, nid: NodeId) -> None:
        disk = self.disks[nid]
        self.nodes[nid] = RaftNode(
            nid,
            voters=self.voters,
            config=self.config,
            log=disk,
            persisted_state=disk.hard_state,
            rng=random.Random(int(nid)),
            now_ms=self.now_ms,
            logger=self.logger(),
        )
        self.lines.clear()  # "started" is noise in scripts

    def drain(self, nid: NodeId) -> None:
        node = self.nodes.get(nid)
        while node is not None and node.has_ready():
            rd = node.ready()
            disk = self.disks[nid]
            disk.write_ready(rd)
            disk.sync()
            if rd.delete_log_before is not None:
                disk.delete_before(rd.delete_log_before)
            self.inflight += rd.early_messages + rd.messages
            node.advance(rd)

    def blocked(self, msg: RaftMessage) -> bool:
        return any((msg.source in g) != (msg.destination in g) for g in self.groups)

    def stabilize(self) -> None:
        for _ in range(1000):
            for nid in sorted(self.nodes):
                self.drain(nid)
            if not self.inflight:
                return
            batch, self.inflight = self.inflight, []
            for msg in batch:
                node = self.nodes.get(msg.destination)
                if node is not None and not self.blocked(msg):
                    node.step(msg, self.now_ms)
        raise AssertionError("stabilize did not settle")

    def run(self, cmd: str, args: list[str]) -> list[str]:
        out: list[str] = []
        if cmd == "add-nodes":
            count = int(args[0])
            observers = int(args[1].split("=")[1]) if len(args) > 1 else 0
            self.voters = frozenset(NodeId(i) for i in range(1, count + 1))
            for i in range(1, count + observers + 1):
                self.disks[NodeId(i)] = SimDisk()
                self.start(NodeId(i))
            out.append("ok")
        elif cmd in ("campaign", "tick-election"):
            node = self.nodes[NodeId(int(args[0]))]
            self.now_ms = max(self.now_ms, node.next_deadline_ms())
            node.tick(self.now_ms)
            self.drain(node.node_id)
        elif cmd == "tick":
            # Advance time the way a shell does: wake each node at its own next deadline, in
            # time order, up to the target (messages wait for deliver-msgs / stabilize).
            target = self.now_ms + int(args[0])
            for _ in range(100_000):
                nid = min(sorted(self.nodes), key=lambda n: self.nodes[n].next_deadline_ms())
                deadline = self.nodes[nid].next_deadline_ms()
                if deadline > target:
                    break
                self.now_ms = max(self.now_ms, deadline)
                self.nodes[nid].tick(self.now_ms)
                self.drain(nid)
            else:  # pragma: no cover
                raise AssertionError("tick did not converge")
            self.now_ms = target
            for nid in sorted(self.nodes):
                self.nodes[nid].tick(self.now_ms)
                self.drain(nid)
        elif cmd == "propose":
            node = self.nodes[NodeId(int(args[0]))]
            try:
                offset = node.propose([a.encode() for a in args[1:]], self.now_ms)
                out.append(f"offset={offset}")
            except NotLeaderError as e:
                out.append(f"error: {e.message}")
            self.drain(node.node_id)
        elif cmd == "resign":
            self.nodes[NodeId(int(args[0]))].resign(self.now_ms)
            self.drain(NodeId(int(args[0])))
        elif cmd == "stabilize":
            self.stabilize()
        elif cmd == "partition":
            self.groups = [{NodeId(int(x)) for x in g.split(",")} for g in args[0].split("|")]
        elif cmd == "heal":
            self.groups = []
        elif cmd == "crash":
            nid = NodeId(int(args[0]))
            self.disks[nid].crash()
            del self.nodes[nid]
            self.inflight = [m for m in self.inflight if nid not in (m.source, m.destination)]
        elif cmd == "restart":
            self.start(NodeId(int(args[0])))
        elif cmd == "raft-state":
            for nid, n in sorted(self.nodes.items()):
                out.append(
                    f"{nid}: {n.role_name} epoch={n.epoch} leader={n.leader_id} "
                    f"hw={n.high_watermark} log_end={n.log_end_offset}"
                )
        elif cmd == "log":
            disk = self.disks[NodeId(int(args[0]))]
            for b in disk.read(disk.log_start_offset(), disk.log_end_offset(), 1 << 30):
                for _, h in iter_batches(b):
                    if h.is_control:
                        change = parse_leader_change(b)
                        what = f"leader_change leader={change.leader_id if change else '?'}"
                    else:
                        what = " ".join(v.decode() for v in record_values(b) if v is not None)
                    out.append(
                        f"{h.base_offset}..{h.last_offset} epoch={h.partition_leader_epoch} {what}"
                    )
            if not out:
                out.append("(empty)")
        elif cmd == "forge":
            msg = _forge(args[0], dict(a.split("=", 1) for a in args[1:]))
            node = self.nodes[msg.destination]
            before = len(self.inflight)
            node.step(msg, self.now_ms)
            self.drain(node.node_id)
            for reply in [m for m in self.inflight[before:] if m.destination == msg.source]:
                error = getattr(reply, "error", None)
                out.append(
                    f"reply {type(reply).__name__} epoch={reply.epoch} "
                    f"error={error.name if error else None} "
                    f"leader={getattr(reply, 'leader_id', None)}"
                )
        else:
            raise ValueError(f"unknown command {cmd!r}")
        events, self.lines[:] = list(self.lines), []
        return events + out


def _forge(kind: str, kv: dict[str, str]) -> RaftMessage:
    source, dest = NodeId(int(kv["from"])), NodeId(int(kv["to"]))
    epoch = Epoch(int(kv["epoch"]))
    leader = NodeId(int(kv.get("leader", kv["from"])))
    head: dict[str, Any] = {
        "source": source,
        "destination": dest,
        "epoch": epoch,
        "correlation_id": 1,
    }
    if kind in ("vote", "pre-vote"):
        return VoteRequest(
            **head,
            last_epoch=Epoch(max(0, epoch - 1)),
            last_epoch_end_offset=Offset(1 << 40),
            pre_vote=kind == "pre-vote",
        )
    if kind == "vote-response":
        return VoteResponse(**head, vote_granted=True, leader_id=leader)
    if kind == "begin-quorum-epoch":
        return BeginQuorumEpochRequest(**head, leader_id=leader)
    if kind == "end-quorum-epoch":
        return EndQuorumEpochRequest(**head, leader_id=leader, preferred_successors=(dest,))
    raise ValueError(f"unknown message kind {kind!r}")


def run_script(text: str) -> str:
    """Run a script; returns it with the actual outputs filled in."""
    env = Env()
    result: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.startswith("#"):
            result.append(line)
            i += 1
            continue
        command = line.split()
        result.append(line)
        i += 1
        assert i < len(lines) and lines[i] == "----", f"missing ---- after {line!r}"
        result.append("----")
        i += 1
        while i < len(lines) and lines[i].strip():
            i += 1  # skip the old expected output
        result.extend(env.run(command[0], command[1:]) or ["ok"])
    return "\n".join(result) + "\n"


def scripts() -> list[Path]:
    return sorted(ROOT.rglob("*.txt"))


def main(argv: list[str]) -> int:
    rewrite = "--rewrite" in argv
    files = [Path(a) for a in argv if not a.startswith("--")] or scripts()
    failed = 0
    for path in files:
        expected = path.read_text()
        actual = run_script(expected)
        if rewrite:
            path.write_text(actual)
        elif actual != expected:
            failed += 1
            print(f"FAIL {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
