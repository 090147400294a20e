"""The Kafka peer's setup, without starting Kafka: the build file, the settings it derives
from kraft's registry, and one-line errors when Java, Maven, the jars or the registry fail."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kraft.peer import jars
from kraft.peer.kafka import new_cluster_id
from kraft.peer.settings import broker_properties, controller_properties
from kraft.peer.tools import parse_consumer_perf_test, parse_producer_perf_test, tool_command
from storage.config_registry import NODE_KEYS, TOPIC_KEYS

VOTERS = {1: "127.0.0.1:9001", 2: "127.0.0.1:9002", 3: "127.0.0.1:9003"}
ROOT = Path(__file__).resolve().parents[2]


def test_the_build_file_names_exact_versions() -> None:
    props = jars.pom_properties()
    for key in ("kafka.version", "spark.version", "log4j.version", "slf4j.version"):
        parts = props[key].split(".")
        assert len(parts) == 3 and all(p.isdigit() for p in parts), (key, props[key])
    assert props["kafka.version"].startswith("4.")
    assert jars.kafka_jars(Path("/c")).directory == Path(f"/c/kafka-{props['kafka.version']}")


def test_the_cache_lives_outside_the_repository_and_moves_with_the_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(jars.JARS_DIR_ENV, raising=False)
    assert not jars.jars_dir().resolve().is_relative_to(ROOT)
    monkeypatch.setenv(jars.JARS_DIR_ENV, str(tmp_path))
    assert jars.kafka_jars().directory.parent == tmp_path


def test_nodes_get_kraft_s_values_under_kafka_s_keys() -> None:
    controller = controller_properties(1, VOTERS, "/d/c1", brokers=3)
    broker = broker_properties(101, "127.0.0.1:9101", VOTERS, "/d/b101", brokers=3)
    for props in (controller, broker):
        assert props["log.segment.bytes"] == TOPIC_KEYS["segment.bytes"].default
        assert props["log.flush.interval.messages"] == TOPIC_KEYS["flush.messages"].default
        assert props["min.insync.replicas"] == "2"
        assert props["controller.quorum.voters"] == ",".join(f"{i}@{a}" for i, a in VOTERS.items())
        # Kafka refuses a heartbeat longer than half the session (checked in both roles).
        heartbeat = int(props["broker.heartbeat.interval.ms"])
        assert heartbeat * 2 <= int(NODE_KEYS["broker.session.timeout.ms"].default or 0)
    assert controller["default.replication.factor"] == "3"
    assert controller["broker.session.timeout.ms"] == NODE_KEYS["broker.session.timeout.ms"].default
    assert broker["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9101"
    assert broker["offsets.topic.replication.factor"] == "3"


def test_a_single_broker_caps_every_replication_setting() -> None:
    controller = controller_properties(1, {1: "127.0.0.1:9001"}, "/d", brokers=1)
    broker = broker_properties(101, "127.0.0.1:9101", {1: "127.0.0.1:9001"}, "/d", brokers=1)
    assert controller["default.replication.factor"] == "1"
    assert broker["min.insync.replicas"] == "1"
    assert broker["offsets.topic.replication.factor"] == "1"
    assert broker["transaction.state.log.min.isr"] == "1"


def test_extra_properties_win() -> None:
    props = broker_properties(
        101, "127.0.0.1:9101", VOTERS, "/d", 3, {"log.segment.bytes": "1048576"}
    )
    assert props["log.segment.bytes"] == "1048576"


def test_missing_jars_are_named_with_the_command_that_fetches_them(tmp_path: Path) -> None:
    with pytest.raises(jars.PeerToolError, match="kraft peer kafka fetch"):
        jars.require(jars.kafka_jars(tmp_path))
    with pytest.raises(jars.PeerToolError, match="kraft peer kafka fetch"):
        tool_command("kafka-topics", jars=jars.kafka_jars(tmp_path))


@pytest.mark.skipif(shutil.which("mvn") is None, reason="needs Maven")
def test_a_registry_that_refuses_is_one_line(tmp_path: Path) -> None:
    # --offline with an empty local repository: Maven cannot resolve anything, as when the
    # registry refuses; no network is used.
    jar_set = jars.kafka_jars(tmp_path)
    with pytest.raises(jars.PeerToolError) as caught:
        jars.fetch(jar_set, maven_options=("--offline",))
    message = str(caught.value)
    assert "\n" not in message and "Maven could not fetch kafka" in message
    assert not jar_set.complete


def _kraft(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kraft.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        check=False,
    )


def test_up_without_java_says_so_in_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {"PATH": str(empty), "JAVA_HOME": "", jars.JARS_DIR_ENV: str(tmp_path / "jars")}
    done = _kraft("peer", "kafka", "up", "--data-dir", str(tmp_path / "k"), env=env)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "kraft: error: java not found: Apache Kafka 4.x needs Java 17+ "
        "(sudo apt-get install openjdk-17-jre-headless)"
    ]
    done = _kraft("peer", "kafka", "fetch", env=env)
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1
    assert "not found" in done.stderr


def test_down_without_a_cluster_says_so(tmp_path: Path) -> None:
    done = _kraft("peer", "kafka", "down", "--data-dir", str(tmp_path), env={})
    assert done.returncode == 1
    assert "no Kafka cluster running" in done.stderr and "Traceback" not in done.stderr


def test_the_perf_tests_summaries_are_parsed() -> None:
    producer = (
        "100 records sent, 20.1 records/sec (0.00 MB/sec), 3.0 ms avg latency, 9.0 ms max "
        "latency.\n"
        "200000 records sent, 60459.492140 records/sec (5.77 MB/sec), 1051.07 ms avg latency, "
        "1688.00 ms max latency, 1128 ms 50th, 1571 ms 95th, 1628 ms 99th, 1687 ms 99.9th.\n"
    )
    assert parse_producer_perf_test(producer) == {
        "records": 200000,
        "records_per_s": 60459.49214,
        "p50_ms": 1128.0,
        "p99_ms": 1628.0,
    }
    consumer = (
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec\n"
        "2026-12-06 13:32:24:104, 2026-12-06 13:32:25:478, 57.2205, 41.6452, 600000, "
        "436681.2227, 889, 485, 117.9803, 1237113.4021\n"
    )
    assert parse_consumer_perf_test(consumer) == {
        "records": 600000,
        "records_per_s": 1237113.4021,
    }
    with pytest.raises(ValueError):
        parse_producer_perf_test("Exception in thread main")
    with pytest.raises(ValueError):
        parse_consumer_perf_test("WARNING: Exiting before consuming the expected number")


def test_cluster_ids_never_look_like_an_option() -> None:
    # One in 64 base64 ids starts with "-", which the storage tool took for an option.
    ids = [new_cluster_id() for _ in range(2000)]
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
    assert len(set(ids)) == len(ids)
