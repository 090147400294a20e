"""``kraft bench failover``: SIGKILL the active controller; time until a write commits again.

A 3-controller `LocalCluster` (real ``kraft controller`` processes on loopback, RaftConfig's
loopback defaults unless ``--controller-config`` says otherwise). Each run:

1. waits until the cluster is healthy (an active controller, every running voter fetching),
   makes one write succeed and waits until every voter has it, then waits a random 0.1-0.4 s
   (to kill at a random point of the fetch cycle);
2. SIGKILLs the active controller, and from that instant retries the write in a tight loop
   until one returns success; the figure is the time from the kill to that success.

The write is an IncrementalAlterConfigs SET of ``log.retention.ms`` on the cluster-wide broker
default (resource ``""``): it needs no broker, always produces a ``ConfigRecord``, and is
idempotent, so a retried attempt whose response was lost does no harm. Its success means the
record committed (a majority has it) and the new active controller replayed it.

Probes (``--probe``):

- ``direct`` (default): attempts go straight to the surviving controllers over gRPC, each with
  ``--attempt-timeout-ms``; a NOT_CONTROLLER answer that names a surviving leader sends the next
  attempt there, else attempts alternate; ``--pause-ms`` between attempts. This measures the
  controllers, not a client's retry policy.
- ``client``: one `ControllerClient.send` (bootstrap: all three controllers, its default retry
  and backoff, its cached leader being the killed one), as an admin tool would see it.

By default every run gets a fresh cluster (a few seconds to start; the figure is then the
failover of a steady cluster whose nodes all connected at start-up). ``--reuse`` keeps one
cluster and restarts the killed controller between runs (faster, and it also exercises a
restarted node: recovery of its log, peers reconnecting to it). Each run's time is split into
phases read from the survivors' logs (wall-clock timestamps, same machine): the first survivor
to notice (``became_prospective``/``became_candidate``), the new Raft leader
(``became_leader``), the new active controller (``controller_activated``), and the commit the
probe saw.

    python -m kraft.bench.failover --runs 10 --json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import grpc

from kraft._generated import controller_pb2_grpc
from kraft.arguments import ArgumentParser, non_negative_int, positive_int
from kraft.cluster import LocalCluster
from kraft.controller.client import ControllerClient
from kraft.controller.messages import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kraft.metadata.records import ConfigResourceType
from kraft.raft import RaftConfig
from kraft.transport.controller_codec import decode_response, encode
from storage.errors import ErrorCode, KraftError

CONFIG_KEY = "log.retention.ms"
"""The broker config the probe write sets (cluster default); any valid value will do."""

HEALTHY_TIMEOUT_S = 20.0
"""How long a run waits for an active controller followed by every voter before failing."""

RUN_DEADLINE_S = 15.0
"""A run whose write has not succeeded this long after the kill fails the bench."""

_PHASE_EVENTS = {
    "detected": ("became_prospective", "became_candidate"),
    "candidate": ("became_candidate",),
    "elected": ("became_leader",),
    "activated": ("controller_activated",),
}


class BenchError(Exception):
    """The cluster did not get healthy, or no write succeeded in time after a kill."""


def write_request(value: int) -> IncrementalAlterConfigsRequest:
    """SET ``log.retention.ms`` = ``value`` on the cluster-wide broker default."""
    return IncrementalAlterConfigsRequest(
        resources=(
            AlterConfigsResource(
                resource_type=ConfigResourceType.BROKER,
                resource_name="",
                configs=(AlterableConfig(name=CONFIG_KEY, value=str(value)),),
            ),
        )
    )


def _write_error(response: IncrementalAlterConfigsResponse) -> ErrorCode:
    for result in response.responses:
        if result.error_code is not ErrorCode.NONE:
            return result.error_code
    return ErrorCode.NONE


# --- probes --------------------------------------------------------------------------------------


@dataclass
class Attempts:
    """What the probe's attempts met before the write succeeded."""

    total: int = 0
    not_controller: int = 0
    timed_out: int = 0
    unavailable: int = 0
    other: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "total": self.total,
            "not_controller": self.not_controller,
            "timed_out": self.timed_out,
            "unavailable": self.unavailable,
            "other": self.other,
        }


@dataclass
class DirectProbe:
    """Sends the write straight to the controllers, one gRPC attempt at a time."""

    addresses: dict[int, str]
    attempt_timeout_s: float
    pause_s: float
    _channels: dict[int, grpc.Channel] = field(default_factory=dict)
    _stubs: dict[int, controller_pb2_grpc.ControllerStub] = field(default_factory=dict)

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()
        self._stubs.clear()

    def _stub(self, node_id: int) -> controller_pb2_grpc.ControllerStub:
        stub = self._stubs.get(node_id)
        if stub is None:
            channel = grpc.insecure_channel(
                self.addresses[node_id],
                options=[
                    ("grpc.initial_reconnect_backoff_ms", 20),
                    ("grpc.min_reconnect_backoff_ms", 20),
                    ("grpc.max_reconnect_backoff_ms", 100),
                ],
            )
            self._channels[node_id] = channel
            stub = self._stubs[node_id] = controller_pb2_grpc.ControllerStub(channel)
        return stub

    def attempt(self, node_id: int, request: IncrementalAlterConfigsRequest) -> tuple[str, int]:
        """One attempt: (outcome, leader hint or -1); outcome is ``ok``, ``not_controller``,
        ``timed_out``, ``unavailable`` or ``other``."""
        try:
            reply = self._stub(node_id).IncrementalAlterConfigs(
                encode(request), timeout=self.attempt_timeout_s
            )
        except grpc.RpcError as e:
            code = e.code() if hasattr(e, "code") else None
            if code is grpc.StatusCode.DEADLINE_EXCEEDED:
                return "timed_out", -1
            if code is grpc.StatusCode.UNAVAILABLE:
                return "unavailable", -1
            return "other", -1
        response, leader = decode_response(reply, IncrementalAlterConfigsResponse)
        error = _write_error(response)
        if error is ErrorCode.NONE:
            return "ok", node_id
        if error is ErrorCode.NOT_CONTROLLER:
            return "not_controller", leader.leader_id
        return "other", leader.leader_id

    def warm_up(self, node_ids: list[int], value: int) -> None:
        """Connect to every node (a follower answers NOT_CONTROLLER and writes nothing)."""
        for node_id in node_ids:
            with contextlib.suppress(grpc.RpcError):
                self._stub(node_id).IncrementalAlterConfigs(encode(write_request(value)), timeout=2)

    def until_committed(
        self, survivors: list[int], request: IncrementalAlterConfigsRequest, deadline: float
    ) -> tuple[float, int, Attempts]:
        """Retry ``request`` against ``survivors`` until it succeeds: (monotonic time of the
        success, the node that answered, the attempts)."""
        attempts = Attempts()
        turn = 0
        target = survivors[0]
        while time.monotonic() < deadline:
            attempts.total += 1
            outcome, hint = self.attempt(target, request)
            if outcome == "ok":
                return time.monotonic(), target, attempts
            setattr(attempts, outcome, getattr(attempts, outcome) + 1)
            if hint in survivors and hint != target:
                target = hint  # follow the answer's leader hint at once
                continue
            turn += 1
            target = survivors[turn % len(survivors)]
            if self.pause_s > 0 and outcome != "timed_out":
                time.sleep(self.pause_s)
        raise BenchError(f"no write committed within {RUN_DEADLINE_S:.0f} s of the kill")


def client_until_committed(
    client: ControllerClient, request: IncrementalAlterConfigsRequest
) -> tuple[float, int, Attempts]:
    """One `ControllerClient.send` with its own retries: (monotonic time of the success, the
    active controller's id, attempts (unknown: 0))."""
    try:
        response: IncrementalAlterConfigsResponse = client.send(request, timeout=RUN_DEADLINE_S)
    except KraftError as e:
        raise BenchError(f"the client gave up: {e}") from None
    done = time.monotonic()
    error = _write_error(response)
    if error is not ErrorCode.NONE:
        raise BenchError(f"the write failed after the kill: {error.name}")
    node_id, _ = client.active_controller(timeout=RUN_DEADLINE_S)
    return done, node_id, Attempts()


# --- one run -------------------------------------------------------------------------------------


def _log_events(path: Path, since: float, until: float) -> list[tuple[float, str]]:
    """(wall-clock time, event) of the JSON log lines of ``path`` within [since, until]."""
    events: list[tuple[float, str]] = []
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return events
    for line in lines:
        if not line.startswith("{"):
            continue
        try:
            entry = json.loads(line)
            at = datetime.fromisoformat(entry["timestamp"]).timestamp()
        except (ValueError, KeyError, TypeError):
            continue
        if since <= at <= until:
            events.append((at, str(entry.get("event", ""))))
    return events


def phases(
    cluster: LocalCluster, survivors: list[int], new_leader: int, killed_wall: float, until: float
) -> tuple[dict[str, float | None], int]:
    """Seconds from the kill to each phase, from the survivors' logs (None: not logged), and
    how many candidacies it took (more than 1: a split vote or a lost election)."""
    by_node = {n: _log_events(cluster.controller_log(n), killed_wall, until) for n in survivors}
    out: dict[str, float | None] = {}
    for phase, names in _PHASE_EVENTS.items():
        nodes = survivors if phase in ("detected", "candidate") else [new_leader]
        times = [at for n in nodes for at, event in by_node[n] if event in names]
        out[f"{phase}_s"] = min(times) - killed_wall if times else None
    candidacies = sum(event == "became_candidate" for n in survivors for _, event in by_node[n])
    return out, candidacies


def wait_caught_up(cluster: LocalCluster, timeout: float = 10.0) -> None:
    """Wait until every running voter's log reaches the high watermark."""
    client = cluster.controller_client()
    running = {i for i in cluster.controller_ids if cluster.controller(i).is_running()}
    deadline = time.monotonic() + timeout
    while True:
        quorum = client.describe_quorum(timeout=timeout)
        ends = {v.replica_id: v.log_end_offset for v in quorum.voters}
        behind = [i for i in running if ends.get(i, -1) < quorum.high_watermark]
        if not behind:
            return
        if time.monotonic() > deadline:
            raise BenchError(
                f"controller(s) {behind} not caught up within {timeout:.0f} s (high watermark "
                f"{quorum.high_watermark}, log ends {ends}); see their logs"
            )
        time.sleep(0.02)


def failover_run(
    cluster: LocalCluster,
    args: argparse.Namespace,
    rng: random.Random,
    number: int,
) -> dict[str, Any]:
    """Kill the active controller of a healthy cluster; time the first write that commits."""
    try:
        cluster.wait_until_healthy(timeout=HEALTHY_TIMEOUT_S)
    except TimeoutError as e:
        keep = "" if args.dir else " (deleted on exit: use --dir to keep them)"
        raise BenchError(f"{e}{keep}") from None
    value = 600_000 + number * 1000
    admin = ControllerClient(cluster.controller_bootstrap)
    probe = DirectProbe(
        addresses=cluster.controller_addresses,
        attempt_timeout_s=args.attempt_timeout_ms / 1000,
        pause_s=args.pause_ms / 1000,
    )
    try:
        response = admin.send(write_request(value), timeout=30)
        if (error := _write_error(response)) is not ErrorCode.NONE:
            raise BenchError(f"the write before the kill failed: {error.name}")
        wait_caught_up(cluster)
        leader, _ = admin.active_controller(timeout=30)
        survivors = [i for i in cluster.controller_ids if i != leader]
        if args.probe == "direct":
            probe.warm_up(cluster.controller_ids, value)
        request = write_request(value + 1)
        time.sleep(rng.uniform(0.1, 0.4))  # kill at a random point of the fetch cycle
        killed_wall = time.time()
        killed_at = time.monotonic()
        cluster.kill_controller(leader)
        if args.probe == "direct":
            done, new_leader, attempts = probe.until_committed(
                survivors, request, killed_at + RUN_DEADLINE_S
            )
        else:
            done, new_leader, attempts = client_until_committed(admin, request)
    finally:
        probe.close()
        admin.close()
    seconds = done - killed_at
    committed_wall = killed_wall + seconds
    time.sleep(0.05)  # let the survivors' log lines reach their files
    split, candidacies = phases(cluster, survivors, new_leader, killed_wall, committed_wall + 0.5)
    return {
        "run": number,
        "seconds": seconds,
        "killed": leader,
        "new_leader": new_leader,
        "attempts": attempts.as_dict(),
        "candidacies": candidacies,
        "phases": {**split, "committed_s": seconds},
    }


# --- the bench -----------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in (0, 100]) of a non-empty list."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


@contextlib.contextmanager
def _cluster(args: argparse.Namespace, data_dir: Path | None) -> Iterator[LocalCluster]:
    with LocalCluster(
        controllers=3,
        brokers=0,
        data_dir=data_dir,
        controller_config=dict(args.controller_config),
    ) as cluster:
        yield cluster


def run(args: argparse.Namespace, say: Any) -> dict[str, Any]:
    rng = random.Random(args.seed)
    base = Path(args.dir) if args.dir else None
    results: list[dict[str, Any]] = []
    load_before = os.getloadavg()
    started = time.monotonic()

    def record(r: dict[str, Any]) -> None:
        results.append(r)
        p = r["phases"]
        say(
            f"run {r['run']:>2}: {r['seconds']:.3f} s  (killed {r['killed']}, new active "
            f"{r['new_leader']}; detected {_fmt(p['detected_s'])}, elected "
            f"{_fmt(p['elected_s'])} after {r['candidacies']} candidacies, active "
            f"{_fmt(p['activated_s'])})"
        )

    if not args.reuse:
        for i in range(1, args.runs + 1):
            with _cluster(args, None if base is None else base / f"run-{i}") as cluster:
                record(failover_run(cluster, args, rng, i))
    else:
        with _cluster(args, base) as cluster:
            for i in range(1, args.runs + 1):
                r = failover_run(cluster, args, rng, i)
                record(r)
                cluster.start_controller(r["killed"])  # caught up by the next run's wait
    seconds = [r["seconds"] for r in results]
    phase_names = list(results[0]["phases"]) if results else []
    phase_medians: dict[str, float | None] = {}
    for name in phase_names:
        known = [v for r in results if (v := r["phases"][name]) is not None]
        phase_medians[name] = statistics.median(known) if known else None
    raft = RaftConfig.from_properties(dict(args.controller_config))
    median, p90, worst = statistics.median(seconds), percentile(seconds, 90), max(seconds)
    return {
        "runs": results,
        "runs_s": seconds,
        "median_s": median,
        "p90_s": p90,
        "max_s": worst,
        "min_s": min(seconds),
        "phase_medians": phase_medians,
        "runs_with_more_than_one_candidacy": sum(r["candidacies"] > 1 for r in results),
        "targets": {"median_lt_0_5s": median < 0.5, "max_lt_1s": worst < 1.0},
        "config": {
            "runs": args.runs,
            "cluster": "reused, killed node restarted" if args.reuse else "fresh per run",
            "probe": args.probe,
            "attempt_timeout_ms": args.attempt_timeout_ms,
            "pause_ms": args.pause_ms,
            "controller_config": dict(args.controller_config),
            "fetch_timeout_ms": raft.fetch_timeout_ms,
            "election_timeout_ms": raft.election_timeout_ms,
            "election_backoff_max_ms": raft.election_backoff_max_ms,
            "seed": args.seed,
        },
        "load_average": {"before": list(load_before), "after": list(os.getloadavg())},
        "wall_s": time.monotonic() - started,
    }


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def render(result: dict[str, Any]) -> str:
    c = result["config"]
    pm = result["phase_medians"]
    t = result["targets"]

    def verdict(ok: bool) -> str:
        return "met" if ok else "MISSED"

    overrides = f", overrides {c['controller_config']}" if c["controller_config"] else ""
    return "\n".join(
        [
            f"kraft bench failover: 3 controller processes on 127.0.0.1, {c['runs']} run(s), "
            f"cluster {c['cluster']}",
            f"controllers: fetch timeout {c['fetch_timeout_ms']} ms, election timeout "
            f"{c['election_timeout_ms']} ms{overrides}",
            f"probe: {c['probe']}"
            + (
                f" (attempt timeout {c['attempt_timeout_ms']} ms, pause {c['pause_ms']} ms)"
                if c["probe"] == "direct"
                else ""
            ),
            "",
            "kill -9 of the active controller -> first committed write on the new one:",
            f"  median {result['median_s']:.3f} s, p90 {result['p90_s']:.3f} s, "
            f"max {result['max_s']:.3f} s, min {result['min_s']:.3f} s",
            f"  median phases from the kill: detected {_fmt(pm.get('detected_s'))} s, "
            f"candidate {_fmt(pm.get('candidate_s'))} s, elected {_fmt(pm.get('elected_s'))} s, "
            f"active {_fmt(pm.get('activated_s'))} s, committed {_fmt(pm.get('committed_s'))} s",
            f"  runs whose election took more than one candidacy (split vote): "
            f"{result['runs_with_more_than_one_candidacy']} of {c['runs']}",
            f"targets: median < 0.5 s: {verdict(t['median_lt_0_5s'])}; "
            f"max < 1 s: {verdict(t['max_lt_1s'])}",
            "load average before/after: "
            + " / ".join(
                ", ".join(f"{x:.2f}" for x in result["load_average"][k])
                for k in ("before", "after")
            ),
        ]
    )


def key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(
        prog="kraft bench failover",
        description="SIGKILL the active controller of a 3-controller cluster; time from the "
        "kill to the first committed write on the new active controller.",
        epilog="example: kraft bench failover --runs 10 --json",
    )
    parser.add_argument("--runs", type=positive_int, default=10, help="leader kills (default 10)")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="one cluster for every run, the killed controller restarted between runs "
        "(default: a fresh cluster per run)",
    )
    parser.add_argument(
        "--probe",
        choices=("direct", "client"),
        default="direct",
        help="direct: tight gRPC loop on the survivors (default); client: one ControllerClient "
        "call with its own retries",
    )
    parser.add_argument(
        "--attempt-timeout-ms",
        type=positive_int,
        default=100,
        help="direct probe: per-attempt deadline",
    )
    parser.add_argument(
        "--pause-ms", type=float, default=2.0, help="direct probe: pause between attempts"
    )
    parser.add_argument(
        "--controller-config",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra controller property, e.g. controller.quorum.fetch.timeout.ms=200 "
        "(repeatable; default: the loopback defaults)",
    )
    parser.add_argument(
        "--dir", default=None, help="keep the cluster(s) and their logs here (default: temp)"
    )
    parser.add_argument("--seed", type=non_negative_int, default=1, help="seed of the kill timing")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    try:
        result = run(args, say)
    except (BenchError, KraftError) as e:
        print(f"kraft bench failover: {e}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
