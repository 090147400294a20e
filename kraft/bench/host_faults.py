"""``kraft bench host-faults``: does the metadata quorum keep one leader through packet loss,
a GC-like pause of its leader and a starved host, how fast does it replace a crashed one, and
how fast does a broker cut off from the others rejoin the ISR after the heal?

A `NetnsCluster` (root: every controller and broker on a network host of its own, issue 29),
one topic of 6 partitions at RF 3, then these phases, each with acks=all producers running:

- ``loss``: ``--loss`` percent of the packets every host sends and receives dropped;
- ``pause``: SIGSTOP of the active controller for ``--pause-s`` (a GC pause, a stalled VM);
- ``load``: two producers sending as fast as they can, and ``--hogs`` busy-looping processes
  competing for the CPU;
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
from kraft.cluster.netns import NetnsUnavailableError
from kraft.cluster.netns_cluster import NetnsCluster
from replication.clients import Producer
from storage.errors import KraftError

PHASES = ("loss", "pause", "load", "kill", "isr-cut")
TOPIC = "host-faults"


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


def _load() -> list[float]:
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def _quorum(cluster: NetnsCluster) -> tuple[int, int]:
    with cluster.controller_client(timeout=10.0, request_timeout=0.5) as client:
        q = client.describe_quorum(timeout=10.0)
        return int(q.leader_id), int(q.leader_epoch)


class _Producers:
    """acks=all producers on the topic until stopped; counts what was acknowledged."""

    def __init__(self, cluster: NetnsCluster, count: int, batch: int) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.acknowledged = 0
        self._threads = [
            threading.Thread(target=self._run, args=(cluster.bootstrap, batch), daemon=True)
            for _ in range(count)
        ]
        for t in self._threads:
            t.start()

    def _run(self, bootstrap: str, batch: int) -> None:
        with Producer(bootstrap, acks="all") as producer:
            while not self._stop.is_set():
                futures = [producer.send(TOPIC, b"x" * 100) for _ in range(batch)]
                producer.flush(120)
                ok = sum(1 for f in futures if f.exception() is None)
                with self._lock:
                    self.acknowledged += ok

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
