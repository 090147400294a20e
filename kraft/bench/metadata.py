"""``kraft bench metadata``: a cluster holding many partitions; how the controllers cope.

Starts a `LocalCluster` (3 controllers, 3 brokers by default), then:

1. **creation**: creates topics of ``--per-topic`` partitions (RF ``--replication-factor``)
   until the cluster holds ``--partitions`` in total, each CreateTopics waiting for its answer
   (one request stays within the controller's bound of 10,000 records per operation); the
   figure is partitions per second until every partition has a leader;
2. **spurious elections**: the metadata quorum's epoch before and after the creation (and a
   settle of ``--settle`` s), and the partitions whose leader epoch is not 0: with no node
   killed, both should stay 0 (a broker fenced for a missed heartbeat moves its leaderships;
   creation waits until every broker is unfenced again and reports the time it waited);
3. **broker kill**: once every broker has opened its replicas (up to 60 s;
   ``replicas_opened_before_kill`` says whether its logs showed it), SIGKILL the broker that
   leads most; the time until every partition it led that had another live ISR member has another
   leader (the controller notices after ``broker.session.timeout.ms``, then moves them all; one
   whose ISR was the victim alone stays offline, as in Kafka without unclean election), and the
   event-loop stalls of the surviving brokers and of the controllers from the kill until
   ``--settle`` s after the move (``kill_loop_stall*``: applying hundreds of leadership
   changes must not hold a loop past ``event.loop.stall.warn.ms``, or heartbeats and Raft
   fetches go out late);
4. **broker restart**: start it again; the time until the controller has it unfenced, and the
   stalls of every node until ``--settle`` s after that (``restart_loop_stall*``: it reopens
   its replicas and takes its preferred leaderships back);
5. **controller failover**: SIGKILL the active controller; the time until a write (a
   cluster-default config SET, idempotent) commits on the new one, and its parts from the
   surviving controllers' logs: the new Raft leader elected, its controller active, and every
   broker's first heartbeat it answered (``failover_*_seconds``).

Every figure is measured from the client side, by polling DescribeCluster every 50 ms; the
stalls are the nodes' ``event_loop_stalled`` lines (`kraft.loop_watch`), and ``load_average``
the machine's 1-minute load before and after the run.

    kraft bench metadata --partitions 600 --per-topic 6 --json     # a fence, a few hundred moves

    kraft bench metadata --partitions 10000 --json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kraft.arguments import ArgumentParser, positive_int, positive_seconds
from kraft.cluster import LocalCluster
from kraft.controller.client import ControllerClient
from kraft.controller.messages import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    DescribeClusterResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kraft.metadata.records import ConfigResourceType
from storage.errors import (
    ErrorCode,
    InvalidReplicationFactorError,
    KraftError,
    TopicAlreadyExistsError,
)

POLL_S = 0.05
"""How often the bench polls DescribeCluster while it waits for a condition."""


def _wait(what: str, condition: Callable[[], bool], timeout_s: float) -> float:
    """Seconds until ``condition()`` held (polled every `POLL_S`).

    Raises:
        TimeoutError: it did not within ``timeout_s``.
    """
    start = time.monotonic()
    while True:
        try:
            if condition():
                return time.monotonic() - start
        except KraftError:
            pass  # no controller answered this time: poll again
        if time.monotonic() - start > timeout_s:
            raise TimeoutError(f"{what}: not within {timeout_s:g} s")
        time.sleep(POLL_S)


def _quorum_epoch(client: ControllerClient) -> int:
    return client.describe_quorum(timeout=30).leader_epoch


def _all_led(cluster: DescribeClusterResponse, expected: int) -> bool:
    partitions = [p for t in cluster.topics for p in t.partitions]
    return len(partitions) >= expected and all(p.leader >= 0 for p in partitions)


def _probe_write(client: ControllerClient, value: int) -> bool:
    """One idempotent write (a cluster-default broker config); True once it committed."""
    request = IncrementalAlterConfigsRequest(
        resources=(
            AlterConfigsResource(
                resource_type=ConfigResourceType.BROKER,
                resource_name="",
                configs=(
                    AlterableConfig(
                        name="log.retention.ms", op=AlterConfigOp.SET, value=str(value)
                    ),
                ),
            ),
        )
    )
    response: IncrementalAlterConfigsResponse = client.send(request, timeout=1.0)
    return all(r.error_code is ErrorCode.NONE for r in response.responses)


def measure(
    result: dict[str, Any],
    *,
    partitions: int,
    per_topic: int,
    replication_factor: int,
    controllers: int,
    brokers: int,
    settle_s: float,
    data_dir: Path | None,
    controller_config: dict[str, str],
    broker_config: dict[str, str],
    timeout_s: float,
    progress: Callable[[str], None],
) -> None:
    """Run the phases of the module docstring; the figures go into ``result`` (JSON-able) as
    they are measured, so a phase that fails leaves the earlier ones."""
    result.update(
        partitions=partitions,
        per_topic=per_topic,
        replication_factor=replication_factor,
        controllers=controllers,
        brokers=brokers,
    )
    with LocalCluster(
        controllers=controllers,
        brokers=brokers,
        data_dir=data_dir,
        controller_config=controller_config,
        broker_config=broker_config,
    ) as cluster:
        cluster.wait_until_healthy(timeout=120)
        with ControllerClient(cluster.controller_bootstrap, timeout=timeout_s) as client:
            epoch_before = _quorum_epoch(client)
            # 1. creation
            topics = math.ceil(partitions / per_topic)
            start = time.monotonic()
            waited_for_brokers_s = 0.0
            fenced_retries = 0
            lost_answers = 0
            for i in range(topics):
                count = min(per_topic, partitions - i * per_topic)
                # A broker fenced meanwhile (a missed heartbeat) would make placement refuse
                # RF 3 on 3 brokers: wait for all of them, and report the time it took.
                waited_for_brokers_s += _wait(
                    "every broker unfenced",
                    lambda: all(
                        not b.fenced
                        for b in client.describe_cluster(topic_names=(), timeout=30).brokers
                    ),
                    timeout_s,
                )
                for attempt in range(5):
                    try:
                        client.create_topic(
                            f"bench-{i:05d}", count, replication_factor, timeout=timeout_s
                        )
                        break
                    except TopicAlreadyExistsError:
                        # an attempt the client retried (its answer lost in a controller
                        # change) had created it
                        lost_answers += 1
                        break
                    except InvalidReplicationFactorError:
                        # fenced between the wait and the create: wait again, a few times
                        if attempt == 4:
                            raise
                        fenced_retries += 1
                        waited_for_brokers_s += _wait(
                            "every broker unfenced",
                            lambda: all(
                                not b.fenced
                                for b in client.describe_cluster(topic_names=(), timeout=30).brokers
                            ),
                            timeout_s,
                        )
                progress(f"created bench-{i:05d} ({(i + 1) * per_topic} partitions)")
            _wait(
                "every partition led",
                lambda: _all_led(client.describe_cluster(timeout=30), partitions),
                timeout_s,
            )
            created_s = time.monotonic() - start
            result["create_seconds"] = round(created_s, 3)
            result["create_partitions_per_second"] = round(partitions / created_s, 1)
            result["create_waited_for_fenced_brokers_seconds"] = round(waited_for_brokers_s, 3)
            result["create_retries_after_a_fencing"] = fenced_retries
            result["create_answers_lost_to_a_controller_change"] = lost_answers
            progress(f"created {partitions} partitions in {created_s:.1f} s")
            # 2. spurious elections
            time.sleep(settle_s)  # a settle window on purpose: elections that happen in it count
            view = client.describe_cluster(timeout=30)
            result["controller_elections_without_kill"] = _quorum_epoch(client) - epoch_before
            result["partition_leader_changes_without_kill"] = sum(
                p.leader_epoch > 0 for t in view.topics for p in t.partitions
            )
            result["fenced_brokers_without_kill"] = sum(b.fenced for b in view.brokers)
            # 3. broker kill
            # the broker that leads most (one fenced earlier may lead nothing now)
            victim = max(
                cluster.broker_ids,
                key=lambda b: sum(p.leader == b for t in view.topics for p in t.partitions),
            )
            live = {b.broker_id for b in view.brokers if not b.fenced}
            led = {
                (t.name, p.partition)
                for t in view.topics
                for p in t.partitions
                if p.leader == victim
            }
            # Only a partition with another live ISR member can get a leader back without an
            # unclean election; one whose ISR is the victim alone stays offline (correctly).
            electable = {
                (t.name, p.partition)
                for t in view.topics
                for p in t.partitions
                if p.leader == victim and any(r != victim and r in live for r in p.isr)
            }
            result["partitions_led_by_killed_broker"] = len(led)
            result["of_them_with_another_live_isr_member"] = len(electable)
            led = electable
            try:
                _wait("replicas opened", lambda: _opened(cluster, view), min(timeout_s, 60.0))
                result["replicas_opened_before_kill"] = True
            except TimeoutError:  # not seen in the logs: measure anyway, and say so
                result["replicas_opened_before_kill"] = False
            broker_killed_at = time.time()
            cluster.kill_broker(victim)

            def moved() -> bool:
                now = client.describe_cluster(timeout=5)
                leaders = {
                    (t.name, p.partition): p.leader for t in now.topics for p in t.partitions
                }
                return all(leaders.get(tp, -1) not in (-1, victim) for tp in led)

            result["broker_kill_to_all_new_leaders_seconds"] = round(
                _wait("new leaders after a broker kill", moved, timeout_s), 3
            )
            progress("re-elected the killed broker's partitions")
            time.sleep(settle_s)  # the survivors apply the moves meanwhile: their stalls count
            result.update(_loop_stalls_between(cluster, broker_killed_at, time.time(), "kill_"))
            # 4. broker restart
            start = time.monotonic()
            restarted_at = time.time()
            cluster.start_broker(victim)

            def unfenced() -> bool:
                now = client.describe_cluster(timeout=5)
                return any(b.broker_id == victim and not b.fenced for b in now.brokers)

            _wait("the restarted broker unfenced", unfenced, timeout_s)
            result["broker_restart_to_unfenced_seconds"] = round(time.monotonic() - start, 3)
            progress("restarted broker unfenced")
            time.sleep(settle_s)  # it reopens its replicas, leaderships move back: stalls count
            result.update(_loop_stalls_between(cluster, restarted_at, time.time(), "restart_"))
            # 5. controller failover
            active = cluster.active_controller_id(timeout=30)
            epoch_killed = _quorum_epoch(client)
            killed_at = time.time()
            cluster.kill_controller(active)
            probes = [0]

            def written() -> bool:
                probes[0] += 1
                return _probe_write(client, 604_800_000 + probes[0])

            result["controller_failover_seconds"] = round(
                _wait("a write after the active controller's kill", written, timeout_s), 3
            )
            # Its parts, from the survivors' logs (wall clock, same machine): the new Raft
            # leader elected, its controller active, every broker's first heartbeat answered.
            _wait(
                "every broker heard by the new controller",
                lambda: len(_failover_phases(cluster, active, epoch_killed, killed_at)) >= 3,
                timeout_s,
            )
            result.update(_failover_phases(cluster, active, epoch_killed, killed_at))
            result["controller_elections_total"] = _quorum_epoch(client) - epoch_before
            progress("controller failed over")
            result.update(_loop_stalls(cluster))
            result.update(_loop_stalls_between(cluster, 0.0, time.time(), ""))


def _failover_phases(
    cluster: LocalCluster, killed: int, epoch_killed: int, killed_at: float
) -> dict[str, float]:
    """Seconds from the kill (``killed_at``, wall clock) to the first ``became_leader`` of a
    newer epoch, the ``controller_activated`` of that epoch, and the last of the brokers'
    first heartbeats it answered (``broker_heartbeat_resumed``), read from the surviving
    controllers' JSON logs; only the phases seen so far."""
    elected: tuple[float, int] | None = None
    activated: dict[int, float] = {}
    heard: dict[int, dict[int, float]] = {}
    for node_id in cluster.controller_ids:
        if node_id == killed:
            continue
        try:
            lines = cluster.controller_log(node_id).read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line in lines[-20_000:]:
            if (
                '"became_leader"' not in line
                and '"controller_activated"' not in line
                and ('"broker_heartbeat_resumed"' not in line)
            ):
                continue
            try:
                event = json.loads(line)
                at = _wall(event["timestamp"])
            except (ValueError, KeyError):
                continue
            if at < killed_at:
                continue
            epoch = event.get("epoch", -1)
            if event["event"] == "became_leader" and epoch > epoch_killed:
                if elected is None or at < elected[0]:
                    elected = (at, epoch)
            elif event["event"] == "controller_activated" and epoch > epoch_killed:
                activated.setdefault(epoch, at)
            elif event["event"] == "broker_heartbeat_resumed":
                heard.setdefault(epoch, {}).setdefault(event["broker_id"], at)
    phases: dict[str, float] = {}
    if elected is None:
        return phases
    phases["failover_elected_seconds"] = round(elected[0] - killed_at, 3)
    epoch = min((e for e in activated if e >= elected[1]), default=None)
    if epoch is None:
        return phases
    phases["failover_activated_seconds"] = round(activated[epoch] - killed_at, 3)
    brokers = heard.get(epoch, {})
    if len(brokers) >= len(cluster.broker_ids):
        phases["failover_all_brokers_heard_seconds"] = round(max(brokers.values()) - killed_at, 3)
    return phases


def _loop_stalls(cluster: LocalCluster) -> dict[str, int]:
    """The controllers' ``event_loop_stalled`` events over the run (a wake-up of their stall
    watch `event.loop.stall.warn.ms` or more late; `kraft.loop_watch`): how many, and the
    worst, of the active controller and of the standbys."""
    counts = {"active": 0, "standby": 0}
    worst = {"active": 0, "standby": 0}
    for node_id in cluster.controller_ids:
        for event in _stall_events(cluster.controller_log(node_id)):
            role = "active" if event.get("active") else "standby"
            counts[role] += 1
            worst[role] = max(worst[role], int(event.get("late_ms", 0)))
    return {
        "loop_stalls_active_controller": counts["active"],
        "loop_stall_max_ms_active_controller": worst["active"],
        "loop_stalls_standby_controllers": counts["standby"],
        "loop_stall_max_ms_standby_controllers": worst["standby"],
    }


def _opened(cluster: LocalCluster, view: DescribeClusterResponse) -> bool:
    """Every broker has created the logs of the replicas ``view`` puts on it (its log says
    ``log_created`` once per log, its metadata log's included): a kill before that would
    measure the opening of new replicas along with the moves."""
    for broker in cluster.broker_ids:
        hosted = sum(broker in p.replicas for t in view.topics for p in t.partitions)
        try:
            text = cluster.broker_log(broker).read_text(errors="replace")
        except OSError:
            return False
        if text.count('"log_created"') < hosted:
            return False
    return True


def _loop_stalls_between(
    cluster: LocalCluster, start: float, end: float, prefix: str
) -> dict[str, int]:
    """The ``event_loop_stalled`` events logged from ``start`` to ``end`` (wall clock) by the
    brokers and by the controllers: how many, and the longest (``late_ms``), per role."""
    figures: dict[str, int] = {}
    logs = {
        "brokers": [cluster.broker_log(b) for b in cluster.broker_ids],
        "controllers": [cluster.controller_log(c) for c in cluster.controller_ids],
    }
    for role, paths in logs.items():
        count = worst = 0
        for path in paths:
            for event in _stall_events(path):
                if start <= _wall(event["timestamp"]) <= end:
                    count += 1
                    worst = max(worst, int(event.get("late_ms", 0)))
        figures[f"{prefix}loop_stalls_{role}"] = count
        figures[f"{prefix}loop_stall_max_ms_{role}"] = worst
    return figures


def _stall_events(path: Path) -> list[dict[str, Any]]:
    """A node log's ``event_loop_stalled`` events (none if it cannot be read)."""
    return _log_events(path, "event_loop_stalled")


def _log_events(path: Path, *names: str) -> list[dict[str, Any]]:
    """A node log's JSON events named one of ``names``, in order (none if it cannot be
    read)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    events = []
    for line in text.splitlines():
        if any(f'"{name}"' in line for name in names):
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("event") in names:
                events.append(event)
    return events


def _wall(timestamp: str) -> float:
    """A structlog ISO timestamp (UTC) as seconds since the epoch."""
    from datetime import datetime

    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(
        prog="kraft bench metadata",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog="example: kraft bench metadata --partitions 10000 --json",
    )
    parser.add_argument(
        "--partitions", type=positive_int, default=10_000, help="in total (default 10000)"
    )
    parser.add_argument(
        "--per-topic", type=positive_int, default=1000, help="partitions per topic (default 1000)"
    )
    parser.add_argument("--replication-factor", type=positive_int, default=3)
    parser.add_argument("--controllers", type=positive_int, default=3)
    parser.add_argument("--brokers", type=positive_int, default=3)
    parser.add_argument(
        "--settle", type=positive_seconds, default=5.0, help="seconds watched for elections"
    )
    parser.add_argument("--timeout", type=positive_seconds, default=300.0, help="per phase")
    parser.add_argument("--data-dir", type=Path, default=None, help="default: a temp dir")
    parser.add_argument("--controller-config", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--broker-config", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.replication_factor > args.brokers:
        parser.error("--replication-factor is above --brokers")
    result: dict[str, Any] = {"load_average": [round(os.getloadavg()[0], 2)]}
    try:
        measure(
            result,
            partitions=args.partitions,
            per_topic=min(args.per_topic, args.partitions),
            replication_factor=args.replication_factor,
            controllers=args.controllers,
            brokers=args.brokers,
            settle_s=args.settle,
            data_dir=args.data_dir,
            controller_config=_pairs(parser, args.controller_config),
            broker_config=_pairs(parser, args.broker_config),
            timeout_s=args.timeout,
            progress=(lambda _m: None) if args.json else (lambda m: print(m, file=sys.stderr)),
        )
    except (KraftError, TimeoutError) as e:
        # the figures measured so far are worth having: print them with the error
        result["error"] = str(e)[:300]
    result["load_average"].append(round(os.getloadavg()[0], 2))
    return print_result(result, as_json=args.json)


def print_result(result: dict[str, Any], *, as_json: bool) -> int:
    """Print a bench's figures (one JSON object, or a line each); exit 1 if it has an
    ``error`` (the figures measured before it are printed all the same)."""
    if as_json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 1 if "error" in result else 0


def _pairs(parser: argparse.ArgumentParser, items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"expected KEY=VALUE, got {item[:60]!r}")
        out[key.strip()] = value.strip()
    return out


if __name__ == "__main__":
    sys.exit(main())
