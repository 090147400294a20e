"""``kraft compare --with-kafka``: the Kafka column merged beside kraft's, on one time axis,
and the report's kraft-against-Kafka table (pure); on the suite's Apache Kafka (marked
``kafka``): one short slow-follower phase, the same one-shot Kafka requests answered by both
systems, and Kafka refusing acks=all writes with 2 of 3 replicas down."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from kraft.cluster import LocalCluster
from kraft.compare.kafka_column import KAFKA, KAFKA_MIN1, KafkaArena, merge, run_kafka_column
from kraft.compare.kafka_wire import describe_partition, produce_once
from kraft.compare.report import render_report
from kraft.compare.run import build_parser
from kraft.compare.scenarios import Timing
from kraft.compare.workload import Clock
from kraft.peer import KafkaCluster


def _window(p99: float) -> dict[str, Any]:
    return {"acked": 10, "p50_ms": p99 / 2, "p99_ms": p99, "p999_ms": p99, "max_ms": p99}


def _slow(fault_start: float, shrink: float, during_p99: float) -> dict[str, Any]:
    return {
        "before": _window(5.0),
        "during": _window(during_p99),
        "after": _window(6.0),
        "isr_shrink_s": shrink,
        "isr_expand_s": 1.0,
        "isr_events": [{"t": fault_start + shrink, "leader": 1, "epoch": 1, "isr": [1, 2]}],
        "latency_series": [{"t": fault_start, "n": 1, "p50_ms": 1.0, "p99_ms": 1.0}],
        "throughput_series": [[fault_start, 100.0]],
        "failed": 0,
    }


def _steady(records_per_s: float, brokers_us: float) -> dict[str, Any]:
    return {
        "records_per_s": records_per_s,
        "p50_ms": 2.0,
        "p99_ms": 9.0,
        "p999_ms": 12.0,
        "client_cpu_us_per_record": 20.0,
        "brokers_cpu_us_per_record": brokers_us,
        "one_at_a_time_p50_ms": 3.0,
        "one_at_a_time_p99_ms": 5.0,
    }


def _phases(start: float, accepting_two_down: bool, once: str) -> list[dict[str, Any]]:
    names = ("all replicas up", "1 replica killed", "2 replicas killed", "restarted")
    return [
        {
            "phase": n,
            "sent": 10,
            "acked": 10,
            "failed": 0,
            "errors": [],
            "accepting": accepting_two_down if n == "2 replicas killed" else True,
            "unavailable_s": 0.0,
            "seconds": 4.0,
            "produce_once": once if n == "2 replicas killed" else "NONE",
        }
        for n in names
    ]


def _failures(start: float, modes: dict[str, tuple[bool, str]]) -> dict[str, Any]:
    return {
        "killed": [103, 102],
        "phases": [{"name": "all replicas up", "start": start, "end": start + 4}],
        "modes": {
            mode: {
                "topic": f"t-{mode}",
                "phases": _phases(start, *answer),
                "throughput_series": [[start, 100.0]],
            }
            for mode, answer in modes.items()
        },
    }


def _losses(mode: str, lost_unclean: int) -> dict[str, Any]:
    def unclean(lost: int, led: float | None) -> dict[str, Any]:
        return {"acknowledged": 1000, "lost": lost, "led_again_after_s": led, "stale_only_s": 9}

    return {
        "acks1_leader_kill": {
            "kills": [],
            "modes": {
                mode: {
                    "acks=1": {"acknowledged": 2000, "lost": 3, "duplicates": 0},
                    "acks=all": {"acknowledged": 2000, "lost": 0, "duplicates": 0},
                }
            },
        },
        "unclean_election": {
            "steps": [{"name": "kill", "t": 1.0}],
            "modes": {
                f"{mode}, unclean=true": unclean(lost_unclean, 6.8),
                f"{mode}, unclean=false": unclean(0, None),
            },
        },
    }


def _results() -> dict[str, Any]:
    kraft = {
        "slow-follower": {
            "victim": 3,
            "fault": {"kind": "SIGSTOP", "start": 10.0, "end": 18.0},
            "modes": {"isr-min2": _slow(10.0, 2.5, 2400.0)},
        },
        "steady": {
            "records": 1000,
            "modes": {"isr-min2": _steady(3000.0, 90.0)},
        },
    }
    kafka = {
        "slow-follower": {
            "victim": 103,
            "fault": {"kind": "SIGSTOP", "start": 70.0, "end": 78.0},
            "modes": {KAFKA.name: _slow(70.0, 2.2, 2300.0)},
        },
        "steady": {
            "records": 1000,
            "modes": {KAFKA.name: _steady(30000.0, 15.0)},
        },
        "leader-kill": {"error": "TimeoutError: no leader"},
    }
    kraft["leader-kill"] = {"kills": [], "modes": {}}
    kraft["failures"] = _failures(
        5.0, {"isr-min2": (False, "NOT_ENOUGH_REPLICAS"), "isr-min1": (True, "NONE")}
    )
    kafka["failures"] = _failures(
        65.0, {KAFKA.name: (False, "NOT_ENOUGH_REPLICAS"), KAFKA_MIN1.name: (True, "NONE")}
    )
    kraft["data-loss"] = {
        **_losses("isr-min2", 626),
        "power_loss": {"where": "the simulator", "modes": {}},
    }
    kafka["data-loss"] = _losses(KAFKA.name, 714)
    merge(kraft, kafka)
    return {
        "quick": True,
        "replication_factor": 3,
        "brokers": 3,
        "controllers": 1,
        "broker_config": {"replica.lag.time.max.ms": "2000"},
        "cpus": 2,
        "load_average_before": [1.0],
        "load_average_after": [1.5],
        "seconds": 100.0,
        "modes": {"isr-min2": "ISR", KAFKA.name: KAFKA.label},
        "clients": {"kraft": "kraft's client (gRPC)", "kafka": "confluent-kafka (librdkafka)"},
        "kafka_version": "4.4.0",
        "scenarios": kraft,
    }


def test_the_kafka_column_lands_beside_kraft_on_kraft_fault_time() -> None:
    s = _results()["scenarios"]
    kafka = s["slow-follower"]["modes"][KAFKA.name]
    assert kafka["latency_series"][0]["t"] == 10.0  # 70 s in Kafka's run, shifted by -60
    assert kafka["isr_events"][0]["t"] == 12.2 and kafka["throughput_series"][0][0] == 10.0
    assert kafka["kafka_victim"] == 103 and kafka["kafka_fault"]["start"] == 70.0
    assert s["steady"]["modes"][KAFKA.name]["records_per_s"] == 30000.0
    assert s["leader-kill"]["kafka_error"] == "TimeoutError: no leader"
    fail = s["failures"]["modes"]
    assert set(fail) == {"isr-min2", "isr-min1", KAFKA.name, KAFKA_MIN1.name}
    assert fail[KAFKA_MIN1.name]["throughput_series"][0][0] == 5.0  # its first phase on kraft's
    assert fail[KAFKA.name]["kafka_killed"] == [103, 102]
    loss = s["data-loss"]
    assert loss["unclean_election"]["modes"][f"{KAFKA.name}, unclean=true"]["lost"] == 714
    assert KAFKA.name in loss["acks1_leader_kill"]["modes"] and "power_loss" in loss


def test_the_report_sets_kraft_isr_beside_kafka_isr_with_ratios() -> None:
    report = render_report(_results(), [])
    assert "## kraft's ISR beside Apache Kafka's" in report
    # one short burst each, different clients, a barely warmed JVM: shown, but no ratio, and
    # the report says why and where the throughput comparison is
    assert "| steady load (not a throughput figure): records/s | 3,000 | 30,000 | - |" in report
    assert (
        "| steady load (not a throughput figure): brokers' CPU µs/record | 90.0 | 15.0 | - |"
        in (report)
    )
    assert "are not a throughput comparison" in report
    assert "`kraft bench produce --against kafka`" in report
    assert "the clients differ (kraft's column: kraft's client (gRPC)" in report
    assert "| slow follower: p99 during the pause, ms | 2400.0 | 2300.0 | 1.04x |" in report
    assert "confluent-kafka (librdkafka)" in report and "Kafka broker 103" in report
    assert (
        "| failures, min.insync.replicas=2, 2 replicas killed: accepting; one Produce "
        "| no; NOT_ENOUGH_REPLICAS | no; NOT_ENOUGH_REPLICAS | - |"
    ) in report
    assert "| failures, min.insync.replicas=1, 2 replicas killed: accepting; one Produce " in report
    assert (
        "| stale replica, unclean.leader.election.enable=true: lost (of); led again after s "
        "| 626 (1,000); 6.8 | 714 (1,000); 6.8 | - |"
    ) in report
    assert "| leader kill under acks=1: acknowledged records lost (of) | 3 (2,000) |" in report


def test_with_kafka_and_client_parse() -> None:
    args = build_parser().parse_args(["--with-kafka", "--client", "confluent-kafka"])
    assert args.with_kafka and args.client == "confluent-kafka"
    assert build_parser().parse_args([]).client == "kraft"


@pytest.mark.kafka
@pytest.mark.process
def test_a_paused_kafka_follower_stalls_acks_all_writes_until_it_resumes(
    kafka_peer: KafkaCluster, tmp_path: Path
) -> None:
    """The suite's Kafka (3+3): one Kafka broker SIGSTOPped for 3 s under a librdkafka probe;
    the same scenario code as kraft's columns. Kafka's ``replica.lag.time.max.ms`` here is
    kraft's default, longer than the pause: the follower stays in the ISR, so the leader holds
    acks=all writes for the pause. NB: the shared cluster is left whole (every node running,
    the partition's ISR full again) before the test ends, for the tests after it."""
    timing = Timing(
        warmup_s=1, pause_s=3, after_s=2, phase_s=1, kills=1, steady_records=500, rate_per_s=50
    )
    out = run_kafka_column(kafka_peer, 3, ["slow-follower"], Clock(), timing, _Say())
    slow = out["slow-follower"]
    assert "error" not in slow, slow
    row = slow["modes"][KAFKA.name]
    assert row["failed"] == 0 and row["before"]["acked"] > 0
    assert row["during"]["max_ms"] > 1000  # held while the follower was paused
    # "before" is sent and acknowledged before the pause, so its slowest ack is below the
    # warm-up's length however loaded the machine; the first record of the pause waits for it
    assert row["before"]["max_ms"] < row["during"]["max_ms"]
    assert slow["victim"] in kafka_peer.broker_ids
    assert set(kafka_peer.pids()) == set(kafka_peer.node_ids())  # healed: every node runs
    arena = KafkaArena(kafka_peer, 3)
    arena.modes[row["topic"]] = KAFKA
    arena.wait_full_isr([row["topic"]], timeout=60)  # the follower is back in the ISR


class _Say:
    scenario = ""

    def __call__(self, text: str) -> None:
        pass


@pytest.mark.kafka
@pytest.mark.process
def test_one_shot_kafka_requests_read_the_leader_epoch_and_write_on_both_systems(
    kafka_peer: KafkaCluster, kraft_cluster: LocalCluster
) -> None:
    """The same Metadata v12 and acks=all Produce bytes to Apache Kafka's listener and to
    kraft's: each names the partition's leader with a real leader epoch (librdkafka's
    metadata has none) and writes one record (NONE)."""
    for system, bootstrap, create in (
        ("kafka", kafka_peer.bootstrap, KafkaArena(kafka_peer, 3).create),
        ("kraft", kraft_cluster.kafka_bootstrap, None),
    ):
        topic = f"once-{system}"
        if create is not None:
            topic = create("once", KAFKA)
        else:
            kraft_cluster.controller_client().create_topic(
                topic, 1, 3, configs={"min.insync.replicas": "2"}, timeout=30
            )
        address = bootstrap.split(",")[0]
        deadline = time.monotonic() + 30
        while True:  # until this broker's metadata has the new topic
            try:
                view = describe_partition(address, topic, timeout_s=5)
                break
            except LookupError:
                assert time.monotonic() < deadline, (system, topic)
                time.sleep(0.1)
        assert view.leader in view.isr and view.leader_epoch >= 0, (system, view)
        assert len(view.replicas) == 3
        assert produce_once(bootstrap, topic) == "NONE", system


@pytest.mark.kafka
@pytest.mark.process
def test_kafka_refuses_acks_all_with_two_of_three_replicas_down_and_recovers(
    kafka_peer: KafkaCluster,
) -> None:
    """min.insync.replicas=2, the leader and one follower SIGKILLed: Kafka elects the one
    in-sync survivor (its leader epoch rises) and answers an acks=all Produce
    NOT_ENOUGH_REPLICAS, as kraft's failures phase expects; once both are back it writes.
    NB: the shared cluster is whole again (every broker serving) before the test ends."""
    arena = KafkaArena(kafka_peer, 3)
    topic = arena.create("refuse", KAFKA, leader=kafka_peer.broker_ids[0])
    arena.wait_full_isr([topic], timeout=60)
    before = arena.describe(topic)
    killed = [before.leader, before.replicas[1]]
    survivor = before.replicas[2]
    answers: list[str] = []
    try:
        for b in killed:
            kafka_peer.kill_broker(b)
        deadline = time.monotonic() + 60
        while not answers or answers[-1] != "NOT_ENOUGH_REPLICAS":
            assert time.monotonic() < deadline, answers
            answers.append(produce_once(kafka_peer.broker_addresses[survivor], topic))
            time.sleep(0.2)
        after = arena.describe(topic)
        assert after.leader == survivor and after.isr == (survivor,)
        assert after.leader_epoch > before.leader_epoch
    finally:
        arena.restart([b for b in killed if b not in kafka_peer.pids()])
    arena.wait_full_isr([topic], timeout=90)
    assert produce_once(kafka_peer.bootstrap, topic) == "NONE"
    assert set(kafka_peer.pids()) == set(kafka_peer.node_ids())
