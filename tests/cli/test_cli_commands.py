"""The `kraft` command line as a user drives it: subprocesses against one real cluster
started with ``kraft cluster up --detach`` and stopped with ``kraft cluster down``.

The tests run in file order: the last one stops the cluster and checks that no process in
cluster.json is left.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kraft.cli._cluster_status import pid_alive

# `kraft cluster up` on its default ports (9090-9092): one pytest-xdist worker runs every such
# test (tests/conftest.py), or two clusters race for the ports and a command finds the other.
pytestmark = pytest.mark.xdist_group("default-ports")


def kraft(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("KRAFT_")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "kraft.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
    )


def one_line_error(out: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Exit code non-zero, and stderr is one line naming every fragment (returned)."""
    assert out.returncode != 0, out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kraft: error:"), out.stderr
    for fragment in fragments:
        assert fragment in lines[0], out.stderr
    return lines[0]


def all_pids(info: dict[str, Any]) -> list[int]:
    nodes = [*info["controllers"], *info["brokers"]]
    return [info["supervisor_pid"], *(n["pid"] for n in nodes)]


def wait_gone(pids: list[int], timeout: float = 30) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in pids if pid_alive(p)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


class Cluster:
    def __init__(self, data_dir: Path, info: dict[str, Any]) -> None:
        self.data_dir = data_dir
        self.info = info
        self.env = {"KRAFT_BOOTSTRAP": info["bootstrap"]}

    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        out = kraft(*args, stdin=stdin, env=self.env)
        assert out.returncode == 0, out.stderr
        return out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    data_dir = tmp_path_factory.mktemp("kraft-cli")
    out = kraft(
        "cluster",
        "up",
        "--detach",
        "--controllers",
        "3",
        "--brokers",
        "3",
        "--data-dir",
        str(data_dir),
        "--json",
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    info = json.loads(out.stdout)
    try:
        yield Cluster(data_dir, info)
    finally:
        if (data_dir / "cluster.json").exists():
            kraft("cluster", "down", "--data-dir", str(data_dir))
        for pid in wait_gone(all_pids(info) + HAND_STARTED, timeout=5):
            os.kill(pid, 9)  # a test failed half-way: never leave a process behind


def test_cluster_up_detach_writes_cluster_json(cluster: Cluster) -> None:
    info = json.loads((cluster.data_dir / "cluster.json").read_text())
    assert info == cluster.info
    assert [c["id"] for c in info["controllers"]] == [1, 2, 3]
    assert [b["id"] for b in info["brokers"]] == [101, 102, 103]
    assert info["bootstrap"] == ",".join(b["address"] for b in info["brokers"])
    assert info["controller_bootstrap"] == ",".join(c["address"] for c in info["controllers"])
    assert all(pid_alive(pid) for pid in all_pids(info))


def test_cluster_status_reports_a_healthy_cluster(cluster: Cluster) -> None:
    doc = json.loads(
        cluster.run("cluster", "status", "--data-dir", str(cluster.data_dir), "--json").stdout
    )
    assert doc["healthy"] is True and doc["error"] is None
    assert doc["quorum"]["leader_id"] in (1, 2, 3) and doc["quorum"]["leader_epoch"] >= 1
    assert sorted(c["role"] for c in doc["controllers"]) == ["follower", "follower", "leader"]
    assert [b["state"] for b in doc["brokers"]] == ["unfenced"] * 3
    text = cluster.run("cluster", "status", "--data-dir", str(cluster.data_dir)).stdout
    assert "healthy" in text and f"Quorum: leader {doc['quorum']['leader_id']}" in text
    # Read from the nodes' metrics endpoints (cluster up serves them by default).
    metrics = doc["metrics"]
    assert metrics["active_controller"] == doc["quorum"]["leader_id"]
    assert (metrics["active_brokers"], metrics["fenced_brokers"]) == (3, 0)
    assert metrics["offline_partitions"] == 0 and metrics["under_replicated_partitions"] == 0
    assert all(b["metrics"]["leader_count"] is not None for b in doc["brokers"])
    assert "metrics of active controller" in text and "LEADERS" in text


def test_cluster_json_lists_the_metrics_endpoints_and_prometheus_config_scrapes_them(
    cluster: Cluster,
) -> None:
    nodes = [*cluster.info["controllers"], *cluster.info["brokers"]]
    urls = [n["metrics_url"] for n in nodes]
    assert all(url.startswith("http://127.0.0.1:") and url.endswith("/metrics") for url in urls)
    assert len(set(urls)) == 6
    config = cluster.run("cluster", "prometheus-config", "--data-dir", str(cluster.data_dir)).stdout
    for url in urls:
        assert f'"{url.split("/")[2]}"' in config
    assert '  - job_name: "kraft"' in config and 'labels: {role: broker, node_id: "101"}' in config


def test_topics_create_list_describe(cluster: Cluster) -> None:
    out = cluster.run(
        "topics", "create", "orders", "--partitions", "3", "--replication-factor", "3",
        "--config", "min.insync.replicas=2",
    )  # fmt: skip
    assert "Created topic orders (3 partitions, replication factor 3)" in out.stdout
    assert "orders" in json.loads(cluster.run("topics", "list", "--json").stdout)
    doc = json.loads(cluster.run("topics", "describe", "orders", "--json").stdout)
    assert doc["partition_count"] == 3 and doc["replication_factor"] == 3
    for p in doc["partitions"]:
        assert p["leader"] in (101, 102, 103) and sorted(p["isr"]) == [101, 102, 103]
        assert p["under_replicated"] is False
    text = cluster.run("topics", "describe", "orders").stdout
    assert "PartitionCount: 3\tReplicationFactor: 3" in text
    # The controllers answer too, through KRAFT_BOOTSTRAP_CONTROLLER.
    via_controller = kraft(
        "topics", "list", env={"KRAFT_BOOTSTRAP_CONTROLLER": cluster.info["controller_bootstrap"]}
    )
    assert via_controller.returncode == 0 and "orders" in via_controller.stdout.split()


def test_produce_from_stdin_then_consume(cluster: Cluster) -> None:
    lines = [f"user-{i % 4}:event-{i}" for i in range(20)]
    out = cluster.run(
        "produce", "orders", "--key-separator", ":", "--json", stdin="\n".join(lines) + "\n"
    )
    acks = [json.loads(line) for line in out.stdout.splitlines()]
    assert [a["line"] for a in acks] == list(range(1, 21))
    by_key: dict[str, set[int]] = {}
    for line, ack in zip(lines, acks, strict=True):
        by_key.setdefault(line.split(":")[0], set()).add(ack["partition"])
    assert all(len(partitions) == 1 for partitions in by_key.values())  # one key, one partition

    out = cluster.run(
        "consume", "orders", "--from-beginning", "--max-messages", "20", "--print-key"
    )
    assert sorted(out.stdout.splitlines()) == sorted(line.replace(":", "\t") for line in lines)
    assert "consumed 20 records" in out.stderr

    first = acks[0]
    out = cluster.run(
        "consume", "orders", "--partition", str(first["partition"]),
        "--offset", str(first["offset"]), "--max-messages", "1", "--print-offset", "--json",
    )  # fmt: skip
    record = json.loads(out.stdout)
    assert (record["partition"], record["offset"]) == (first["partition"], first["offset"])
    assert (record["key"], record["value"]) == ("user-0", "event-0")

    started = time.monotonic()
    out = cluster.run("consume", "orders", "--timeout", "1")  # from the end: nothing new
    assert out.stdout == "" and time.monotonic() - started < 15


def test_console_properties_carry_headers_keys_timestamps_and_binary_safe_values(
    cluster: Cluster,
) -> None:
    """kafka-console-producer's parse.* properties in, DefaultMessageFormatter's print.* out;
    ``--offset -N`` (rpk's relative offset), ``--include REGEX`` and ``--encoding base64``."""
    cluster.run("topics", "create", "console-a", "--partitions", "1", "--replication-factor", "1")
    cluster.run("topics", "create", "console-b", "--partitions", "1", "--replication-factor", "1")
    cluster.run(
        "produce", "console-a", "--property", "parse.timestamp=true",
        "--property", "parse.headers=true", "--property", "parse.key=true",
        "--property", "null.marker=NULL",
        stdin="1700000000000\tsrc:web,flag\tk1\tv1\n1700000000001\t\tNULL\tv2\n",
    )  # fmt: skip
    cluster.run("produce", "console-b", stdin="b1\nb2\nb3\n")
    out = cluster.run(
        "consume", "console-a", "--from-beginning", "--max-messages", "2",
        "--property", "print.timestamp=true", "--property", "print.headers=true",
        "--property", "print.key=true", "--property", "print.offset=true",
    )  # fmt: skip
    assert out.stdout.splitlines() == [
        "CreateTime:1700000000000\tOffset:0\tsrc:web,flag:null\tk1\tv1",
        "CreateTime:1700000000001\tOffset:1\tNO_HEADERS\tnull\tv2",
    ]
    out = cluster.run(
        "consume", "console-b", "--partition", "0", "--offset", "-2", "--timeout", "2"
    )
    assert out.stdout.splitlines() == ["b2", "b3"]
    out = cluster.run(
        "consume", "--include", "console-.*", "--from-beginning", "--max-messages", "5",
        "--json", "--encoding", "base64",
    )  # fmt: skip
    records = [json.loads(line) for line in out.stdout.splitlines()]
    assert sorted((r["topic"], base64.b64decode(r["value"])) for r in records) == [
        ("console-a", b"v1"), ("console-a", b"v2"),
        ("console-b", b"b1"), ("console-b", b"b2"), ("console-b", b"b3"),
    ]  # fmt: skip


def test_consume_from_an_offset_past_the_end_says_so(cluster: Cluster) -> None:
    """Not a silent start at the end: the offset is checked with ListOffsets first."""
    line = one_line_error(
        kraft("consume", "orders", "--partition", "0", "--offset", "999999", env=cluster.env),
        "--offset 999999",
        "past the log end offset",
        "orders-0",
        "OFFSET_OUT_OF_RANGE",
    )
    end = int(line.split("past the log end offset ")[1].split()[0])
    out = cluster.run(
        "consume", "orders", "--partition", "0", "--offset", str(end), "--timeout", "1"
    )
    assert out.stdout == ""  # the end itself is a valid start: only new records
    one_line_error(
        kraft("consume", "orders", "--partition", "0", "--offset", str(end + 1), env=cluster.env),
        f"past the log end offset {end} of orders-0",
    )


def test_a_bootstrap_at_the_controllers_says_it_is_a_controller(cluster: Cluster) -> None:
    """Not 30 s of retries and then UNKNOWN_TOPIC_OR_PARTITION (KIP-919's advice instead)."""
    env = {"KRAFT_BOOTSTRAP": cluster.info["controller_bootstrap"]}
    first = cluster.info["controllers"][0]["address"]
    for args, stdin, advice in (
        (("produce", "orders"), "x\n", "--bootstrap"),
        (("consume", "orders", "--timeout", "1"), None, "--bootstrap"),
        (("topics", "list"), None, "--bootstrap-controller"),
        (("topics", "describe", "orders", "--bootstrap", first), None, "--bootstrap-controller"),
    ):
        started = time.monotonic()
        out = kraft(*args, stdin=stdin, env=env)
        one_line_error(out, f"{first} is a kraft controller, not a broker", advice)
        assert time.monotonic() - started < 8, args


def test_consume_into_a_closed_pipe_stops_quietly(cluster: Cluster) -> None:
    """``kraft consume ... | head -1``: the reader leaves early; no traceback, no error line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KRAFT_")} | cluster.env
    shell = (
        f"{sys.executable} -m kraft.cli consume orders --from-beginning --max-messages 20 | head -1"
    )
    out = subprocess.run(shell, shell=True, capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0 and len(out.stdout.splitlines()) == 1
    assert "error" not in out.stderr.lower() and "Traceback" not in out.stderr


def test_quorum_describe_reads_the_controller_env(cluster: Cluster) -> None:
    out = kraft(
        "quorum", "describe", "--json",
        env={"KRAFT_BOOTSTRAP_CONTROLLER": cluster.info["controller_bootstrap"]},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["leader_id"] in {c["id"] for c in cluster.info["controllers"]}
    one_line_error(kraft("quorum", "describe"), "KRAFT_BOOTSTRAP_CONTROLLER")


def test_alter_config(cluster: Cluster) -> None:
    out = cluster.run("topics", "alter-config", "orders", "--config", "retention.ms=3600000")
    assert "retention.ms=3600000" in out.stdout
    bad = kraft("topics", "alter-config", "orders", "--config", "no.such.key=1", env=cluster.env)
    one_line_error(bad, "no.such.key", "INVALID_CONFIG")
    nothing = kraft("topics", "alter-config", "orders", env=cluster.env)
    one_line_error(nothing, "nothing to change")


def test_unknown_topic_is_one_clear_line(cluster: Cluster) -> None:
    for args, stdin in (
        (("topics", "describe", "nope"), None),
        (("topics", "alter-config", "nope", "--config", "retention.ms=1"), None),
        (("topics", "delete", "nope"), None),
        (("produce", "nope"), "x\n"),
        (("consume", "nope", "--timeout", "1"), None),
    ):
        one_line_error(kraft(*args, stdin=stdin, env=cluster.env), "nope", "UNKNOWN_TOPIC")


def test_bad_arguments_are_one_clear_line(cluster: Cluster) -> None:
    env = cluster.env
    one_line_error(kraft("topics", "create", "t", "--partitions", "0", env=env), "--partitions")
    one_line_error(kraft("topics", "create", "t", "--config", "x", env=env), "KEY=VALUE")
    one_line_error(
        kraft("topics", "create", "t", "--replication-factor", "5", env=env),
        "INVALID_REPLICATION_FACTOR",
    )
    one_line_error(kraft("topics", "create", "orders", env=env), "TOPIC_ALREADY_EXISTS")
    one_line_error(kraft("consume", "orders", "--offset", "3", env=env), "--partition")
    one_line_error(kraft("produce", "orders", "--partition", "9", stdin="x\n", env=env), "0..2")
    one_line_error(
        kraft("produce", "orders", "--key-separator", ":", stdin="x\n", env=env), "line 1"
    )
    one_line_error(kraft("topics", "list"), "KRAFT_BOOTSTRAP")  # no address at all
    usage = kraft("topics", "create", env=env)  # argparse: usage and exit 2
    assert usage.returncode == 2 and "the following arguments are required" in usage.stderr


def test_unreachable_cluster_fails_fast(cluster: Cluster) -> None:
    dead = {"KRAFT_BOOTSTRAP": "127.0.0.1:1"}
    for args, stdin in (
        (("topics", "list", "--timeout", "1"), None),
        (("produce", "orders", "--timeout", "1"), "x\n"),
    ):
        started = time.monotonic()
        one_line_error(kraft(*args, stdin=stdin, env=dead), "cluster unreachable", "127.0.0.1:1")
        assert time.monotonic() - started < 15


def test_acls_without_an_authorizer_are_refused_as_security_disabled(cluster: Cluster) -> None:
    """Issue 30: "added 4 ACL(s)" on a cluster that enforces none; Kafka answers every ACL
    request SECURITY_DISABLED when no authorizer is configured."""
    selectors = ("--topic", "orders", "--operation", "Read")
    for action, extra in (
        ("add", ("--allow-principal", "User:CN=alice", *selectors)),
        ("list", ()),
        ("remove", selectors),
    ):
        started = time.monotonic()
        out = kraft("acls", action, *extra, env=cluster.env)
        one_line_error(out, "SECURITY_DISABLED", "authorizer.class.name", "--authorizer")
        assert out.returncode == 1 and time.monotonic() - started < 15, action


def test_a_tls_client_of_a_plaintext_cluster_gets_kraft_line_only(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Issue 30: gRPC's C-core "Handshake failed" lines came before kraft's own line."""
    made = json.loads(
        cluster.run(
            "certs", "create", "--out", str(tmp_path), "--clients", "alice", "--json"
        ).stdout
    )
    tls = {
        "KRAFT_SECURITY_PROTOCOL": "SSL",
        "KRAFT_SSL_CAFILE": made["ca"],
        "KRAFT_SSL_CERTFILE": made["clients"]["alice"]["cert"],
        "KRAFT_SSL_KEYFILE": made["clients"]["alice"]["key"],
    }
    for args, stdin in ((("topics", "list"), None), (("produce", "orders"), "x\n")):
        out = kraft(*args, stdin=stdin, env={**cluster.env, **tls})
        one_line_error(out, "TLS", "SSL_AUTHENTICATION_FAILED")  # one line: no C-core noise


def test_delete_topic(cluster: Cluster) -> None:
    cluster.run("topics", "create", "doomed", "--partitions", "1", "--replication-factor", "1")
    assert "Deleted topic doomed" in cluster.run("topics", "delete", "doomed").stdout
    one_line_error(kraft("topics", "describe", "doomed", env=cluster.env), "UNKNOWN_TOPIC")
    cluster.run("topics", "delete", "doomed", "--if-exists")


def test_help_has_an_example_for_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    from kraft.cli import main

    for command in (
        ("cluster",), ("cluster", "up"), ("cluster", "down"), ("cluster", "status"),
        ("topics",), ("topics", "create"), ("topics", "list"), ("topics", "describe"),
        ("topics", "delete"), ("topics", "alter-config"), ("produce",), ("consume",),
        ("compare",),
        ("topics", "alter"), ("topics", "offsets"), ("topics", "elect-leaders"),
        ("topics", "reassign"),
        ("configs",), ("configs", "describe"), ("configs", "alter"),
    ):  # fmt: skip
        with pytest.raises(SystemExit) as exit_info:
            main([*command, "--help"])
        assert exit_info.value.code == 0
        assert "example" in capsys.readouterr().out, command


def test_configs_describe_shows_values_and_sources_and_alter_sets_them(cluster: Cluster) -> None:
    cluster.run("topics", "create", "configured", "--partitions", "1")
    cluster.run("configs", "alter", "--topic", "configured", "--add-config", "retention.ms=60000")
    cluster.run("configs", "alter", "--broker-defaults", "--add-config", "log.roll.ms=600000")
    doc = json.loads(cluster.run("configs", "describe", "--topic", "configured", "--json").stdout)
    shown = {c["name"]: (c["value"], c["source"]) for c in doc["configs"]}
    assert shown == {
        "retention.ms": ("60000", "DYNAMIC_TOPIC_CONFIG"),
        "segment.ms": ("600000", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
    }
    everything = cluster.run("configs", "describe", "--topic", "configured", "--all").stdout
    assert "min.insync.replicas=1 source=DEFAULT_CONFIG" in everything
    cluster.run("configs", "alter", "--broker-defaults", "--delete-config", "log.roll.ms")
    one_line_error(
        kraft("configs", "describe", "--topic", "nope", env=cluster.env), "UNKNOWN_TOPIC"
    )


HAND_STARTED: list[int] = []


def test_a_broker_restarted_by_hand_is_seen_by_status(cluster: Cluster) -> None:
    """Kill a broker the supervisor started and start it again by hand, as an operator would
    (``kraft broker --config DIR/config/broker-103.properties``): ``cluster status`` reports
    the new process, and ``cluster down`` (the next test) stops it too."""
    from replication.clients import AdminClient

    with AdminClient(cluster.info["bootstrap"]) as admin:  # led by 103, ISR {103, 101}
        admin.create_topic(
            "acked-by-two", assignments=[[103, 101]], config={"min.insync.replicas": "2"}
        )
    (broker,) = [b for b in cluster.info["brokers"] if b["id"] == 103]
    os.kill(broker["pid"], 9)
    assert wait_gone([broker["pid"]]) == []
    _status_names_the_kill(cluster)
    _a_producer_says_why_it_retries(cluster)
    config = cluster.data_dir / "config" / "broker-103.properties"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KRAFT_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "kraft.cli", "broker", "--config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )
    HAND_STARTED.append(process.pid)
    deadline = time.monotonic() + 60
    while True:
        out = kraft("cluster", "status", "--data-dir", str(cluster.data_dir), "--json")
        doc = json.loads(out.stdout) if out.stdout.strip() else {}
        seen = [b for b in doc.get("brokers", []) if b["id"] == 103]
        if seen and seen[0]["pid"] == process.pid and seen[0]["alive"]:
            break
        assert time.monotonic() < deadline, f"status never saw the hand-started broker: {seen}"
        time.sleep(0.5)
    assert seen[0]["restarted_by_hand"] is True


def _status_names_the_kill(cluster: Cluster) -> None:
    """Issue 30: status gave the killed broker's last info line as its cause of death."""
    deadline = time.monotonic() + 30
    while True:
        doc = json.loads(
            kraft("cluster", "status", "--data-dir", str(cluster.data_dir), "--json").stdout
        )
        gone = [p for p in doc["problems"] if p.startswith("broker 103 ")]
        if gone and "killed by SIGKILL" in gone[0]:
            return
        assert time.monotonic() < deadline, doc["problems"]
        time.sleep(0.5)


def _a_producer_says_why_it_retries(cluster: Cluster) -> None:
    """Issue 30: acks=all with the ISR below min.insync.replicas was silent for 31 s before
    its error: now a warning says at once that it retries, and why."""
    deadline = time.monotonic() + 60
    while "Isr: 101\t" not in cluster.run("topics", "describe", "acked-by-two").stdout:
        assert time.monotonic() < deadline, "103 never left the ISR"
        time.sleep(0.5)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KRAFT_")} | cluster.env
    argv = ["produce", "acked-by-two", "--acks", "all", "--timeout", "60"]
    started = time.monotonic()
    producer = subprocess.Popen(
        [sys.executable, "-m", "kraft.cli", *argv],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert producer.stdin is not None and producer.stderr is not None
    producer.stdin.write("x\n")
    producer.stdin.close()
    try:
        first = producer.stderr.readline()
        elapsed = time.monotonic() - started
    finally:
        producer.kill()
        producer.wait()
    assert first.startswith("kraft: warning: acked-by-two-0: "), first
    assert "NOT_ENOUGH_REPLICAS" in first and "min.insync.replicas=2" in first, first
    assert "retries until delivery.timeout.ms" in first and elapsed < 20, (first, elapsed)


def test_cluster_down_leaves_no_process_behind(cluster: Cluster) -> None:
    out = kraft("cluster", "down", "--data-dir", str(cluster.data_dir))
    assert out.returncode == 0, out.stderr
    assert wait_gone(all_pids(cluster.info) + HAND_STARTED) == []
    assert not (cluster.data_dir / "cluster.json").exists()
    one_line_error(kraft("cluster", "status", "--data-dir", str(cluster.data_dir)), "no cluster")


def test_restarting_the_data_dir_with_fewer_nodes_says_which_at_once(cluster: Cluster) -> None:
    """Issue 30: the 3+3 data directory started as 1+1 waited the whole --wait-timeout."""
    started = time.monotonic()
    out = kraft(
        "cluster", "up", "--controllers", "1", "--brokers", "1", "--detach",
        "--data-dir", str(cluster.data_dir),
    )  # fmt: skip
    one_line_error(
        out, "controller 2, controller 3, broker 102, broker 103", "--controllers 3 --brokers 3"
    )
    assert time.monotonic() - started < 15 and not (cluster.data_dir / "cluster.json").exists()
