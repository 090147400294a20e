"""``kraft bench host-faults``: does the metadata quorum keep one leader through packet loss,
a GC-like pause of its leader and a starved host, how fast does it replace a crashed one, and
how fast does a broker cut off from the others rejoin the ISR after the heal?

A `NetnsCluster` (root: every controller and broker on a network host of its own, issue 29),
one topic of 6 partitions at RF 3, then these phases, each with acks=all producers running:

- ``loss``: ``--loss`` percent of the packets every host sends and receives dropped;
- ``pause``: SIGSTOP of the active controller for ``--pause-s`` (a GC pause, a stalled VM);
- ``load``: two producers sending as fast as they can, and ``--hogs`` busy-looping processes
  competing for the CPU;
- ``long-pause``: SIGSTOP of the active controller for ``--long-pause-s`` (5 s), longer than
  ``controller.quorum.fetch.timeout.ms`` (2 s) and check-quorum (3 s): a node stalled past every
  timeout on an oversubscribed host. The others must elect one new leader (the time from the
  stop until one answers DescribeQuorum, polled every 20 ms), the old one must resign when it
  runs again (`_leaders_by_epoch`: its log's ``resigned`` or ``became_follower``, and never two
  ``became_leader`` in one epoch), produce must go on, and a final read of the phase's own topic
  must hold every acknowledged record (`kraft.bench.read_back`);
- ``kill``: SIGKILL of the active controller, and the time until another one answers
  DescribeQuorum as leader (polled every 20 ms);
- ``isr-cut``: the last broker cut off from the other brokers, both ways (not from the
  controllers), for ``--cut-s`` (longer than ``replica.lag.time.max.ms``, 30 s, so it leaves
  the ISRs), then healed: the time until it is back in every partition's ISR (polled every
  0.1 s). A connection the cut left open must not hold it back until TCP's retransmission
  (`kraft.transport.channels.PEER_KEEPALIVE_MS`).

For each phase it prints the controller epoch before and after, the leaders seen (polled every
0.5 s) and the records acknowledged. ``--controller-config`` compares Raft timeouts.

    sudo kraft bench host-faults --phases loss,pause,load,kill,isr-cut
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from kraft.arguments import ArgumentParser, positive_int
from kraft.bench.failover import key_value
from kraft.bench.metadata import _log_events, _wall
from kraft.bench.read_back import read_topic
from kraft.cluster.netns import NetnsUnavailableError
from kraft.cluster.netns_cluster import NetnsCluster
from replication.clients import Producer
from storage.errors import KraftError

PHASES = ("loss", "pause", "long-pause", "load", "kill", "isr-cut")
TOPIC = "host-faults"
LONG_PAUSE_TOPIC = "host-faults-long-pause"


@dataclass
class PhaseResult:
    phase: str
    what: str
    epoch_before: int
    epoch_after: int
    leaders_seen: list[int]
    acknowledged: int
    load_average: list[float] = field(default_factory=list)
    new_leader_after_s: float | None = None
    back_in_isr_after_s: float | None = None
    old_leader_resigned_after_resume_s: float | None = None
    """``long-pause``: from SIGCONT to the old leader's first log line as a non-leader."""
    old_leader_left_as: str | None = None
    """``long-pause``: that line (its event, reason and epoch)."""
    leaders_per_epoch: dict[str, list[int]] | None = None
    """``long-pause``: each epoch's ``became_leader`` nodes, from every controller's log."""
    acknowledged_during_pause: int | None = None
    lost: int | None = None
    """``long-pause``: acknowledged records a final read of the topic did not return."""


def _load() -> list[float]:
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def _quorum(cluster: NetnsCluster) -> tuple[int, int]:
    with cluster.controller_client(timeout=10.0, request_timeout=0.5) as client:
        q = client.describe_quorum(timeout=10.0)
        return int(q.leader_id), int(q.leader_epoch)


class _Producers:
    """acks=all producers on the topic until stopped; counts what was acknowledged."""

    def __init__(
        self, cluster: NetnsCluster, count: int, batch: int, topic: str = TOPIC, keep: bool = False
    ) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.acknowledged = 0
        self.topic = topic
        self.values: list[bytes] = []
        """With ``keep``: every acknowledged value, each unique (a loss check's input)."""
        self._keep = keep
        self._threads = [
            threading.Thread(target=self._run, args=(cluster.bootstrap, batch, i), daemon=True)
            for i in range(count)
        ]
        for t in self._threads:
            t.start()

    def _run(self, bootstrap: str, batch: int, index: int) -> None:
        sent = 0
        with Producer(bootstrap, acks="all") as producer:
            while not self._stop.is_set():
                values = [
                    f"{index}-{sent + i:012d}".encode().ljust(100, b"x") for i in range(batch)
                ]
                sent += batch
                futures = [producer.send(self.topic, v) for v in values]
                producer.flush(120)
                acked = [v for v, f in zip(values, futures, strict=True) if f.exception() is None]
                with self._lock:
                    self.acknowledged += len(acked)
                    if self._keep:
                        self.values.extend(acked)

    def stop(self) -> int:
        self._stop.set()
        for t in self._threads:
            t.join(180)
        return self.acknowledged


def _watch(
    cluster: NetnsCluster,
    phase: str,
    what: str,
    seconds: float,
    fault: Callable[[], Callable[[], None]],
    producers: int = 1,
    batch: int = 200,
) -> PhaseResult:
    leader, epoch = _quorum(cluster)
    load = _load()
    load_producers = _Producers(cluster, producers, batch)
    seen = {leader}
    undo = fault()
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            with contextlib.suppress(KraftError):  # no leader now: the next poll tells
                seen.add(_quorum(cluster)[0])
            time.sleep(0.5)
    finally:
        undo()
    acknowledged = load_producers.stop()
    _, after = _quorum(cluster)
    return PhaseResult(phase, what, epoch, after, sorted(seen), acknowledged, load + _load())


def _kill(cluster: NetnsCluster) -> PhaseResult:
    leader, epoch = _quorum(cluster)
    load = _load()
    start = time.monotonic()
    cluster.kill_controller(leader)
    while True:
        try:
            new, new_epoch = _quorum(cluster)
            if new not in (-1, leader):
                break
        except KraftError:
            pass
        if time.monotonic() - start > 60:
            raise RuntimeError("no new active controller within 60 s of the kill")
        time.sleep(0.02)
    took = time.monotonic() - start
    return PhaseResult(
        "kill",
        f"SIGKILL of the active controller {leader}",
        epoch,
        new_epoch,
        [leader, new],
        0,
        load + _load(),
        new_leader_after_s=round(took, 3),
    )


def _long_pause(cluster: NetnsCluster, seconds: float) -> PhaseResult:
    """SIGSTOP of the active controller for ``seconds``, past every Raft timeout (see the
    module docstring's ``long-pause``)."""
    with cluster.controller_client(timeout=30.0) as client:
        client.create_topic(LONG_PAUSE_TOPIC, 6, 3, timeout=30.0)
    leader, epoch = _quorum(cluster)
    load = _load()
    producers = _Producers(cluster, 1, 200, topic=LONG_PAUSE_TOPIC, keep=True)
    time.sleep(2.0)  # producing steadily before the stop
    process = cluster.processes[leader]
    seen = {leader}
    new_leader_after: float | None = None
    acknowledged_at_stop = producers.acknowledged
    stopped = time.monotonic()
    process.pause()
    try:
        while time.monotonic() - stopped < seconds:
            try:
                now_leader = _quorum(cluster)[0]
            except KraftError:
                now_leader = -1  # no leader now: the next poll tells
            if now_leader >= 0:
                seen.add(now_leader)
            if new_leader_after is None and now_leader not in (-1, leader):
                new_leader_after = time.monotonic() - stopped
            time.sleep(0.02)
    finally:
        process.resume()
    resumed_wall = time.time()
    during = producers.acknowledged - acknowledged_at_stop
    time.sleep(5.0)  # the old leader runs again, producing goes on
    producers.stop()
    _, after = _quorum(cluster)
    leaders = _leaders_by_epoch(cluster)
    left = _first_non_leader_line(cluster, leader, resumed_wall)
    read = set(read_topic(cluster.bootstrap, LONG_PAUSE_TOPIC, 6))
    lost = sum(1 for value in producers.values if value not in read)
    return PhaseResult(
        "long-pause",
        f"SIGSTOP of the active controller {leader} for {seconds:g} s",
        epoch,
        after,
        sorted(seen),
        producers.acknowledged,
        load + _load(),
        new_leader_after_s=None if new_leader_after is None else round(new_leader_after, 3),
        old_leader_resigned_after_resume_s=None
        if left is None
        else round(left[0] - resumed_wall, 3),
        old_leader_left_as=None if left is None else left[1],
        leaders_per_epoch={str(e): ids for e, ids in sorted(leaders.items()) if e >= epoch},
        acknowledged_during_pause=during,
        lost=lost,
    )


def _leaders_by_epoch(cluster: NetnsCluster) -> dict[int, list[int]]:
    """Every epoch's controllers that logged ``became_leader`` in it (Raft: at most one)."""
    leaders: dict[int, list[int]] = {}
    for node_id in cluster.controller_ids:
        for event in _log_events(cluster.log_path(node_id), "became_leader"):
            if event.get("group") is None and "epoch" in event:  # the metadata quorum's
                leaders.setdefault(int(event["epoch"]), []).append(node_id)
    return leaders


def _first_non_leader_line(
    cluster: NetnsCluster, node_id: int, after_wall: float
) -> tuple[float, str] | None:
    """When (wall clock) ``node_id`` first logged leaving leadership after ``after_wall``, and
    that line: its check-quorum resignation, or a follower of a newer epoch."""
    names = ("resigned", "became_follower", "became_unattached", "became_prospective")
    for event in _log_events(cluster.log_path(node_id), *names):
        at = _wall(event["timestamp"])
        if at >= after_wall:
            detail = ", ".join(
                f"{k}={event[k]}" for k in ("reason", "epoch", "leader_id") if k in event
            )
            return at, f"{event['event']} ({detail})"
    return None


def _isr_cut(cluster: NetnsCluster, seconds: float) -> PhaseResult:
    assert cluster.network is not None
    network = cluster.network
    victim = cluster.broker_ids[-1]
    others = [cluster.host_name(b) for b in cluster.broker_ids if b != victim]
    name = cluster.host_name(victim)
    _, epoch = _quorum(cluster)
    load = _load()
    producers = _Producers(cluster, 1, 100)

    def isrs() -> list[set[int]]:
        return [set(p.isr) for p in cluster.describe_topic(TOPIC).partitions]

    network.cut(name, to=others)
    for other in others:
        network.cut(other, to=[name])
    end = time.monotonic() + seconds
    left = False
    while time.monotonic() < end:
        left = left or any(victim not in isr for isr in isrs())
        time.sleep(0.5)
    network.heal()
    healed = time.monotonic()
    while not all(victim in isr for isr in isrs()):
        if time.monotonic() - healed > 300:
            raise RuntimeError(f"broker {victim} not back in every ISR 300 s after the heal")
        time.sleep(0.1)
    back = time.monotonic() - healed
    acknowledged = producers.stop()
    what = f"broker {victim} cut off from the other brokers for {seconds:.0f} s" + (
        "" if left else " (it never left an ISR: cut longer than replica.lag.time.max.ms)"
    )
    return PhaseResult(
        "isr-cut",
        what,
        epoch,
        _quorum(cluster)[1],
        [],
        acknowledged,
        load + _load(),
        back_in_isr_after_s=round(back, 2),
    )


def run(args: argparse.Namespace, say: Callable[[str], None]) -> dict[str, Any]:
    phases = [p for p in args.phases.split(",") if p]
    unknown = set(phases) - set(PHASES)
    if unknown:
        raise ValueError(f"unknown phase(s) {sorted(unknown)}; choose from {', '.join(PHASES)}")
    config = dict(args.controller_config)
    results: list[PhaseResult] = []
    with NetnsCluster(controllers=3, brokers=3, controller_config=config) as cluster:
        cluster.wait_until_running(90)
        with cluster.controller_client(timeout=30.0) as client:
            client.create_topic(TOPIC, 6, 3, timeout=30.0)
        assert cluster.network is not None
        network = cluster.network
        hosts = [cluster.host_name(n) for n in [*cluster.controller_ids, *cluster.broker_ids]]
        for phase in phases:
            say(f"phase {phase} ...")
            if phase == "loss":

                def lose() -> Callable[[], None]:
                    for host in hosts:
                        network.loss(host, args.loss)
                    return lambda: network.heal()

                what = f"{args.loss}% loss on every host, both ways, {args.seconds:.0f} s"
                results.append(_watch(cluster, phase, what, args.seconds, lose))
            elif phase == "pause":

                def pause() -> Callable[[], None]:
                    process = cluster.processes[_quorum(cluster)[0]]
                    process.pause()
                    time.sleep(args.pause_s)
                    process.resume()
                    return lambda: None

                what = f"SIGSTOP of the active controller for {args.pause_s} s"
                results.append(_watch(cluster, phase, what, args.pause_s + 6, pause))
            elif phase == "load":

                def starve() -> Callable[[], None]:
                    busy = [sys.executable, "-c", "while True: pass"]
                    hogs = [subprocess.Popen(busy) for _ in range(args.hogs)]

                    def stop() -> None:
                        for hog in hogs:
                            hog.kill()
                            hog.wait()

                    return stop

                what = f"2 full-speed producers and {args.hogs} busy loops, {args.seconds:.0f} s"
                results.append(
                    _watch(cluster, phase, what, args.seconds, starve, producers=2, batch=2000)
                )
            elif phase == "long-pause":
                results.append(_long_pause(cluster, args.long_pause_s))
            elif phase == "isr-cut":
                results.append(_isr_cut(cluster, args.cut_s))
            else:
                results.append(_kill(cluster))
            say(_row(results[-1]))
    return {"controller_config": config, "phases": [asdict(r) for r in results]}


def _row(r: PhaseResult) -> str:
    tail = f", a new leader after {r.new_leader_after_s} s" if r.new_leader_after_s else ""
    if r.back_in_isr_after_s is not None:
        tail = f", back in every ISR {r.back_in_isr_after_s} s after the heal"
    if r.leaders_per_epoch is not None:
        tail += (
            f"; the old leader resigned {r.old_leader_resigned_after_resume_s} s after it "
            f"resumed; leaders by epoch {r.leaders_per_epoch}; "
            f"{r.acknowledged_during_pause:,} acknowledged during the pause, {r.lost} lost"
            f" (old leader: {r.old_leader_left_as})"
        )
    return (
        f"{r.what}: epoch {r.epoch_before} -> {r.epoch_after}, leaders seen {r.leaders_seen}, "
        f"{r.acknowledged:,} records acknowledged{tail}; load average "
        f"{r.load_average[0]:.1f} -> {r.load_average[3]:.1f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(
        prog="kraft bench host-faults",
        description="On network hosts (root): the controller epoch through packet loss, a "
        "paused leader and a starved host, the time to replace a killed leader, and the time "
        "a broker cut off from the others takes to rejoin every ISR after the heal.",
        epilog="example: sudo kraft bench host-faults --phases loss,pause,load,kill,isr-cut",
    )
    parser.add_argument(
        "--phases", default=",".join(PHASES), help=f"comma-separated, of {', '.join(PHASES)}"
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="loss and load (default 60)")
    parser.add_argument("--loss", type=float, default=5.0, help="percent (default 5)")
    parser.add_argument("--pause-s", type=float, default=1.5, help="SIGSTOP (default 1.5 s)")
    parser.add_argument(
        "--long-pause-s", type=float, default=5.0, help="long-pause's SIGSTOP (default 5 s)"
    )
    parser.add_argument("--hogs", type=positive_int, default=4, help="busy loops (default 4)")
    parser.add_argument("--cut-s", type=float, default=40.0, help="isr-cut (default 40 s)")
    parser.add_argument(
        "--controller-config",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra controller property, e.g. controller.quorum.fetch.timeout.ms=600",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    try:
        result = run(args, lambda msg: print(msg, file=sys.stderr, flush=True))
    except (NetnsUnavailableError, KraftError, ValueError, RuntimeError) as e:
        print(f"kraft bench host-faults: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print("\n".join(_row(PhaseResult(**p)) for p in result["phases"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
