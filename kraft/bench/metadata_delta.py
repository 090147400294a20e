"""``kraft bench metadata-delta``: how long the nodes' event loops stall when a large metadata
delta lands.

Starts a `LocalCluster` (3 controllers, 3 brokers) whose nodes log every wake-up of their
stall watch ``--stall-ms`` or more late (`kraft.loop_watch`: ``event.loop.stall.warn.ms``), then:

1. **create**: one CreateTopics of ``--partitions`` partitions at RF 3 (one committed batch), until
   every broker has created every replica's log;
2. **fence**: once every partition is led by its preferred replica (or after a minute,
   ``balanced_before_fence`` says which), SIGSTOP of the first broker until the controller
   fenced it and moved every leadership it held (about a third) to the others;
3. **unfence**: SIGCONT; until it is unfenced, back in the ISRs, and leads its preferred
   partitions again (the controllers run the leader balancer every second; ``--timeout`` at
   most, ``leaderships_back`` says whether they all came back);
4. **delete**: DeleteTopics; until every broker has deleted every replica's directory.

For each phase (from its action until ``--settle`` s after its end): the seconds it took, and
for each node ``[stalls, the longest in ms, the CPU ms of the longest callback]``: the stalls
are wall-clock lateness, which a busy machine inflates; the last is the CPU time of the longest
single event-loop callback of ``--stall-ms`` or more (``slow_callback``, the loop thread's own
CPU time: what the node itself held its loop for, whatever the load). The paused broker's own
pause is not a stall of its loop and is left out (its wake-ups at least 80% of the pause
late).

``--broker-config log.cleaner.backoff.ms=1000 --broker-config
log.retention.check.interval.ms=1000`` runs the brokers' periodic passes over their replicas
(the log cleaner's, retention's) inside every phase.

    kraft bench metadata-delta --partitions 1000 --json
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from kraft.arguments import ArgumentParser, positive_int, positive_seconds
from kraft.bench.failover import key_value
from kraft.bench.metadata import _log_events, _opened, _wait, _wall, print_result
from kraft.cluster import LocalCluster
from kraft.controller.client import ControllerClient
from kraft.loop_watch import SLOW_CALLBACK_ENV
from storage.errors import KraftError

TOPIC = "delta"


def _stalls(
    cluster: LocalCluster,
    start: float,
    end: float,
    worst: list[Any],
    skip: tuple[int, float] | None = None,
) -> dict[str, list[int]]:
    """``{node: [stalls, longest ms, longest callback's CPU ms]}`` logged from ``start`` to
    ``end`` (wall clock); ``skip`` ``(broker, ms)``: that broker's wake-ups ``ms`` or more late
    are left out. ``worst`` gets ``[CPU ms, callback]`` of the longest callback of all."""
    out: dict[str, list[int]] = {}
    nodes: list[tuple[str, Path, int | None]]
    nodes = [(f"broker-{b}", cluster.broker_log(b), b) for b in cluster.broker_ids]
    nodes += [(f"controller-{c}", cluster.controller_log(c), None) for c in cluster.controller_ids]
    for name, path, broker in nodes:
        late = [
            int(e.get("late_ms", 0))
            for e in _log_events(path, "event_loop_stalled")
            if start <= _wall(e["timestamp"]) <= end
        ]
        if skip is not None and broker == skip[0]:
            late = [ms for ms in late if ms < skip[1]]
        slow = [
            (int(e.get("cpu_ms", 0)), str(e.get("callback", ""))[:120])
            for e in _log_events(path, "slow_callback")
            if start <= _wall(e["timestamp"]) <= end
        ]
        longest = max(slow, default=(0, ""))
        out[name] = [len(late), max(late, default=0), longest[0]]
        if longest[0] > worst[0]:
            worst[:] = longest
    return out


def measure(
    result: dict[str, Any],
    *,
    partitions: int,
    stall_ms: int,
    settle_s: float,
    timeout_s: float,
    broker_config: dict[str, str] | None = None,
) -> None:
    """Run the phases of the module docstring into ``result`` (a failed phase leaves the
    earlier ones); ``broker_config``: extra broker properties."""
    watch = {"event.loop.stall.warn.ms": str(stall_ms)}
    os.environ[SLOW_CALLBACK_ENV] = str(stall_ms)  # the nodes inherit it
    with LocalCluster(
        controllers=3,
        brokers=3,
        broker_config={**(broker_config or {}), **watch},
        controller_config={**watch, "leader.imbalance.check.interval.seconds": "1"},
    ) as cluster:
        cluster.wait_until_healthy(timeout=120)
        with ControllerClient(cluster.controller_bootstrap, timeout=timeout_s) as client:

            def phase(name: str, start: float, end: float, **extra: Any) -> None:
                time.sleep(settle_s)
                worst: list[Any] = [0, ""]
                stalls = _stalls(cluster, start, time.time(), worst, extra.pop("skip", None))
                result[name] = {
                    "seconds": round(end - start, 2),
                    "stalls": stalls,
                    "longest_callback": worst[1],
                    **extra,
                }
                print(f"{name}: {result[name]}", file=sys.stderr, flush=True)

            def partitions_now() -> list[Any]:
                return list(client.describe_topic(TOPIC, timeout=30).partitions)

            # 1. create
            start = time.time()
            client.create_topic(TOPIC, partitions, 3, timeout=timeout_s)
            _wait("every partition led", lambda: all(p.leader >= 0 for p in partitions_now()), 120)
            view = client.describe_cluster(timeout=30)
            _wait("every replica's log created", lambda: _opened(cluster, view), timeout_s)
            phase("create", start, time.time())
            # 2. fence: the first broker, once leadership is balanced (or a minute passed:
            # a loaded machine may fence a broker during the creation)
            try:
                _wait(
                    "leadership balanced",
                    lambda: all(p.leader == p.replicas[0] for p in partitions_now()),
                    60,
                )
                result["balanced_before_fence"] = True
            except TimeoutError:
                result["balanced_before_fence"] = False
            victim = cluster.broker_ids[0]

            def fenced(expected: bool) -> bool:
                brokers = client.describe_cluster(topic_names=(), timeout=5).brokers
                return any(b.broker_id == victim and b.fenced is expected for b in brokers)

            led = sum(p.leader == victim for p in partitions_now())
            start = time.time()
            cluster.pause_broker(victim)
            _wait("fenced", lambda: fenced(True), 60)
            _wait("leaders moved", lambda: all(p.leader != victim for p in partitions_now()), 60)
            phase("fence", start, time.time(), leaderships_moved=led)
            # 3. unfence
            paused_s, start = time.time() - start, time.time()
            cluster.resume_broker(victim)
            _wait("unfenced", lambda: fenced(False), 60)
            try:
                _wait(
                    "leaderships back",
                    lambda: sum(p.leader == victim for p in partitions_now()) >= led,
                    timeout_s,
                )
                back = True
            except TimeoutError:
                back = False
            skip = (victim, 0.8 * paused_s * 1000)
            phase("unfence", start, time.time(), skip=skip, leaderships_back=back)
            # 4. delete
            start = time.time()
            client.delete_topic(TOPIC, timeout=timeout_s)

            def deleted() -> bool:
                return not any(
                    d.name.startswith(f"{TOPIC}-")
                    for b in cluster.broker_ids
                    for d in Path(cluster.broker_data_dir(b)).iterdir()
                )

            _wait("every replica's directory deleted", deleted, timeout_s)
            phase("delete", start, time.time())


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(
        prog="kraft bench metadata-delta",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog="example: kraft bench metadata-delta --partitions 1000 --json",
    )
    parser.add_argument("--partitions", type=positive_int, default=1000, help="(default 1000)")
    parser.add_argument(
        "--stall-ms", type=positive_int, default=20, help="stalls counted (default 20 ms)"
    )
    parser.add_argument(
        "--settle", type=positive_seconds, default=3.0, help="watched after each phase (3 s)"
    )
    parser.add_argument("--timeout", type=positive_seconds, default=180.0, help="per phase")
    parser.add_argument(
        "--broker-config",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra broker property, e.g. log.cleaner.backoff.ms=1000 to run the periodic "
        "passes inside every phase (repeatable)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"partitions": args.partitions, "load_average": [os.getloadavg()[0]]}
    try:
        measure(
            result,
            partitions=args.partitions,
            stall_ms=args.stall_ms,
            settle_s=args.settle,
            timeout_s=args.timeout,
            broker_config=dict(args.broker_config),
        )
    except (KraftError, TimeoutError) as e:
        result["error"] = str(e)[:300]
    result["load_average"].append(os.getloadavg()[0])
    result["load_average"] = [round(x, 1) for x in result["load_average"]]
    return print_result(result, as_json=args.json)


if __name__ == "__main__":
    sys.exit(main())
