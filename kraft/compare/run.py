"""``kraft compare``: start a `LocalCluster`, run the selected scenarios on every mode, write
``results.json``, ``report.md`` and the plots into ``--out``, print a summary table.

    kraft compare --quick --out /tmp/compare          # target: under 2 minutes
    kraft compare --out compare-full                  # the full run, under 10 minutes
    kraft compare --scenarios slow-follower,steady --replication-factor 5
    sudo kraft compare --network netns --scenarios steady,slow-link --out /tmp/nc
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kraft.compare import losses, scenarios, slow_links
from kraft.compare.modes import ALL_MODES, ISR_MIN1, Arena, Mode
from kraft.compare.scenarios import FULL, QUICK, Say, Timing
from kraft.compare.workload import Clock

Scenario = Callable[[Arena, Sequence[Mode], Clock, Timing, Say], dict[str, Any]]

SCENARIOS: dict[str, tuple[Scenario, bool]] = {
    # name -> (function, whether ISR with min.insync.replicas=1 takes part)
    "slow-follower": (scenarios.slow_follower, False),
    "failures": (scenarios.failures, True),
    "leader-kill": (scenarios.leader_kill, False),
    "data-loss": (losses.real_process_losses, False),
    "steady": (scenarios.steady, False),
    "slow-link": (slow_links.slow_link, False),
}
ALL_SCENARIOS = tuple(SCENARIOS)
HOSTS_ONLY = ("slow-link",)
"""Scenarios that need a cluster of network hosts (``--network netns``): a limit on a link."""
NETWORKS = {
    "local": "every node on this machine's loopback",
    "netns": "every node on its own network host (a network namespace on a bridge)",
}

LAG_TIME_MAX_MS = 2_000
"""``replica.lag.time.max.ms`` of the brokers (Kafka's default is 30 s): below kraft's
``broker.session.timeout.ms`` (3 s), so the ISR rule, not fencing, drops a paused follower,
and within a 20 s pause."""


class Progress:
    """One status line on stderr, rewritten in place on a terminal (a line each otherwise)."""

    def __init__(self, clock: Clock, *, quiet: bool = False) -> None:
        self._clock = clock
        self._quiet = quiet
        self._tty = sys.stderr.isatty()
        self._lock = threading.Lock()
        self.scenario = ""

    def __call__(self, text: str) -> None:
        if self._quiet:
            return
        line = f"[{self._clock.now():6.1f}s] {self.scenario}: {text}"
        with self._lock:
            if self._tty:
                print(f"\r\x1b[2K{line[:150]}", end="", file=sys.stderr, flush=True)
            else:
                print(line, file=sys.stderr, flush=True)

    def done(self) -> None:
        if self._tty and not self._quiet:
            print(file=sys.stderr, flush=True)


def run(
    out: Path,
    *,
    quick: bool,
    replication_factor: int,
    selected: Sequence[str],
    controllers: int = 1,
    quiet: bool = False,
    timing: Timing | None = None,
    client: str = "kraft",
    with_kafka: bool = False,
    network: str = "local",
    limits: Sequence[slow_links.LinkLimit] = slow_links.plan_limits(),
) -> dict[str, Any]:
    """Run the ``selected`` scenarios on a cluster of ``network`` (``local``: loopback;
    ``netns``: a network host per node, where ``limits`` are the slow-link scenario's) and
    write the outputs into ``out``.

    Raises:
        ValueError: a choice the network cannot run (`check_choices`).
        NetnsUnavailableError: ``network="netns"`` where namespaces cannot be made.
    """
    check_choices(network, selected, client, with_kafka)
    timing = timing or (QUICK if quick else FULL)
    clock = Clock()
    say = Progress(clock, quiet=quiet)
    say.scenario = "cluster"
    lag_ms = LAG_TIME_MAX_MS
    broker_config = {"replica.lag.time.max.ms": str(lag_ms)}
    results: dict[str, Any] = {
        "quick": quick,
        "replication_factor": replication_factor,
        "brokers": replication_factor,
        "controllers": controllers,
        "broker_config": broker_config,
        "timing": asdict(timing),
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "clients": {"kraft": CLIENT_LABELS[client]},
        "network": network,
        "scenarios": {},
    }
    say(f"starting {controllers} controller(s) and {replication_factor} brokers ({network})")
    with _cluster(network, controllers, replication_factor, broker_config) as cluster:
        cluster.wait_until_healthy(timeout=120)
        arena = Arena(cluster, replication_factor, client)
        pending = arena.probe_quorum()
        modes = [m for m in ALL_MODES if not (m.quorum and pending)]
        results["modes"] = {m.name: m.label for m in modes}
        results["quorum_pending"] = pending
        if pending:
            say(f"quorum topics refused by this cluster ({pending[:80]}): ISR modes only")
        for name in selected:
            function, with_min1 = SCENARIOS[name]
            say.scenario = name
            started = clock.now()
            taking_part = [m for m in modes if with_min1 or m is not ISR_MIN1]
            if name == "slow-link":
                function = functools.partial(slow_links.slow_link, limits=limits)
            try:
                result = function(arena, taking_part, clock, timing, say)
                if name == "data-loss":
                    result["power_loss"] = losses.power_loss(say, (7,) if quick else (7, 8, 9))
            except Exception as e:  # a scenario that fails is reported; the others still run
                result = {"error": f"{type(e).__name__}: {e}"[:300]}
            result["seconds"] = round(clock.now() - started, 1)
            results["scenarios"][name] = result
            _heal(cluster)
    if with_kafka:
        _kafka_column(results, controllers, replication_factor, selected, clock, timing, say)
    say.scenario = "report"
    results["seconds"] = round(clock.now(), 1)
    results["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    from kraft.compare.report import render_report

    plots: list[str] = []
    try:
        from kraft.compare.plots import plot_all
    except ImportError:
        results["plots_missing"] = "matplotlib is not installed (pip install 'kraft[compare]')"
    else:
        say("plotting")
        plots = plot_all(results, out)
    (out / "report.md").write_text(render_report(results, plots))
    say.done()
    return results


def check_choices(network: str, selected: Sequence[str], client: str, with_kafka: bool) -> None:
    """Refuse what ``network`` cannot run: on network hosts, Apache Kafka's column (its
    brokers run on loopback); on loopback, a link limit.

    Raises:
        ValueError: in one line.
    """
    if network == "netns":
        if with_kafka:
            raise ValueError(
                "--with-kafka runs on loopback only: Apache Kafka's column is not run on network "
                "hosts (compare kraft's ISR with Kafka's with --network local)"
            )
    elif network == "local":
        if hosts_only := [s for s in selected if s in HOSTS_ONLY]:
            raise ValueError(f"{', '.join(hosts_only)} limits a host's link: give --network netns")
    else:
        raise ValueError(f"network {network!r}: local or netns")


def _cluster(network: str, controllers: int, brokers: int, broker_config: dict[str, str]) -> Any:
    """The cluster of ``network`` (not started: a context manager that starts it)."""
    if network == "netns":
        from kraft.cluster.netns_cluster import NetnsCluster

        return NetnsCluster(controllers=controllers, brokers=brokers, broker_config=broker_config)
    from kraft.cluster import LocalCluster

    return LocalCluster(controllers=controllers, brokers=brokers, broker_config=broker_config)


def _kafka_column(
    results: dict[str, Any],
    controllers: int,
    replication_factor: int,
    selected: Sequence[str],
    clock: Clock,
    timing: Timing,
    say: Progress,
) -> None:
    """Apache Kafka's ISR as a third column (`kraft.compare.kafka_column`), after kraft's
    cluster is gone: the phases that apply, merged into ``results``."""
    from kraft.compare.kafka_column import (
        WARMUP_PER_STEADY_RECORD,
        kafka_modes,
        merge,
        run_kafka_column,
    )
    from kraft.peer import KafkaCluster

    say.scenario = "Apache Kafka"
    say(f"starting {controllers} controller(s) and {replication_factor} brokers")
    broker_config = {"replica.lag.time.max.ms": str(LAG_TIME_MAX_MS)}
    try:
        with KafkaCluster(controllers, replication_factor, broker_config=broker_config) as kafka:
            results["kafka_version"] = kafka.version
            results["clients"]["kafka"] = CLIENT_LABELS["confluent-kafka"]
            for name in selected:
                results["modes"].update({m.name: m.label for m in kafka_modes(name)})
            warmup = timing.steady_records * WARMUP_PER_STEADY_RECORD
            results["kafka_warmup_records"] = warmup
            column = run_kafka_column(
                kafka, replication_factor, selected, clock, timing, say, warmup
            )
    except Exception as e:  # no Java, no jars, a node that died: reported
        results["kafka_error"] = f"{type(e).__name__}: {e}"[:300]
        return
    merge(results["scenarios"], column)


CLIENT_LABELS = {
    "kraft": "kraft's client (gRPC)",
    "confluent-kafka": "confluent-kafka (librdkafka, Kafka protocol)",
}


def _heal(cluster: Any) -> None:
    """Every broker running and the cluster healthy again (after a scenario that failed
    half-way, with a broker still killed or paused)."""
    for b in cluster.broker_ids:
        cluster.resume_broker(b)
        if not cluster.broker(b).is_running():
            cluster.start_broker(b)
    cluster.wait_until_healthy(timeout=120)


def build_parser() -> argparse.ArgumentParser:
    from kraft.arguments import ArgumentParser

    parser = ArgumentParser(
        prog="kraft compare",
        description="ISR and quorum replication side by side on a local cluster, under the "
        "same workload and the same faults: report.md, results.json and plots in --out.",
    )
    add_arguments(parser)
    return parser


def _scenarios(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s not in SCENARIOS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown scenario(s) {unknown}; choose from {', '.join(ALL_SCENARIOS)}"
        )
    return names


def _rf(text: str) -> int:
    if text not in ("3", "5"):
        raise argparse.ArgumentTypeError("the replication factor is 3 or 5")
    return int(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="compare-out", help="output directory")
    parser.add_argument("--quick", action="store_true", help="a shorter run (under 2 minutes)")
    parser.add_argument(
        "--replication-factor", type=_rf, default=3, help="3 (default) or 5; brokers = RF"
    )
    parser.add_argument(
        "--scenarios",
        type=_scenarios,
        default=None,
        help=f"comma-separated, of: {','.join(ALL_SCENARIOS)} (default: all the network runs; "
        f"{', '.join(HOSTS_ONLY)} only with --network netns)",
    )
    parser.add_argument(
        "--network",
        choices=list(NETWORKS),
        default="local",
        help="local (default): "
        + NETWORKS["local"]
        + "; netns (root): "
        + NETWORKS["netns"]
        + ", real link limits in the slow-link scenario, no Kafka column",
    )
    parser.add_argument(
        "--link-delay",
        type=float,
        default=slow_links.DELAY_MS,
        metavar="MS",
        help="slow-link: the delay each way on a follower's link, then on every broker's "
        f"(default {slow_links.DELAY_MS:g}; 0: no delay phases)",
    )
    parser.add_argument(
        "--link-jitter",
        type=float,
        default=slow_links.JITTER_MS,
        metavar="MS",
        help=f"slow-link: the delay's jitter, either way (default {slow_links.JITTER_MS:g})",
    )
    parser.add_argument(
        "--link-bandwidth",
        type=int,
        default=slow_links.BANDWIDTH_KBIT,
        metavar="KBIT",
        help="slow-link: a token bucket on a follower's link, kbit/s each way (default "
        f"{slow_links.BANDWIDTH_KBIT}; 0: no bandwidth phase)",
    )
    parser.add_argument(
        "--with-kafka",
        action="store_true",
        help="Apache Kafka's ISR as a third column (kraft peer kafka; librdkafka drives it), "
        "in every scenario but the simulator's power loss",
    )
    parser.add_argument(
        "--client",
        choices=list(CLIENT_LABELS),
        default="kraft",
        help="what drives kraft's columns' probes and steady load: kraft's client (default) "
        "or librdkafka through the Kafka listeners, as the Kafka column",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress line")


def main_args(args: argparse.Namespace) -> int:
    from kraft.compare.report import summary_table
    from kraft.logs import configure_logging

    if getattr(args, "log_level", "warning") == "warning":
        configure_logging("error")  # the probes' retries under faults are expected: no noise

    selected = args.scenarios or [
        s for s in ALL_SCENARIOS if args.network == "netns" or s not in HOSTS_ONLY
    ]
    try:
        limits = slow_links.plan_limits(args.link_delay, args.link_jitter, args.link_bandwidth)
        check_choices(args.network, selected, args.client, args.with_kafka)
    except ValueError as e:
        print(f"kraft compare: {e}", file=sys.stderr)
        return 2
    from kraft.cluster.netns import NetnsUnavailableError

    try:
        results = run(
            Path(args.out),
            quick=args.quick,
            replication_factor=args.replication_factor,
            selected=selected,
            quiet=args.quiet,
            client=args.client,
            with_kafka=args.with_kafka,
            network=args.network,
            limits=limits,
        )
    except NetnsUnavailableError as e:
        print(f"kraft compare --network netns: {e}", file=sys.stderr)
        return 1
    print(summary_table(results))
    print(f"\nreport: {Path(args.out) / 'report.md'} (results.json and plots beside it)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return main_args(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
