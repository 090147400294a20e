"""Issue 30, "the first hour": the mistakes a new user makes that need no running cluster get
one clear line, fast, from the CLI and from the library; the library stays silent unless the
application configures logging. (The mistakes that need a cluster are in test_cli_commands.)

Time bounds are generous (a loaded machine): they tell "known at once" (about 2 s here) from
"waited for a deadline" (10 s for the CLI, 60 s for ``max.block.ms``).
"""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kraft.cli._cluster_start import choose_base_port, port_roles
from kraft.transport.unreachable import REFUSED_MARKER
from storage.errors import NetworkError
from tests.cli.test_cli_bad_input import kraft, one_line_error

# `kraft cluster up` on its default ports (9090-9092): one pytest-xdist worker runs every such
# test (tests/conftest.py), or two clusters race for the ports and a command finds the other.
pytestmark = pytest.mark.xdist_group("default-ports")

REFUSED = "127.0.0.1:1"
"""A loopback port nothing listens on: every connection is refused at once."""
FAST_S = 15.0
"""A bound for answers known at once, with room for a loaded machine (they take ~2 s here);
the commands that wait for a deadline get ``--timeout 30``, so waiting it out fails the test."""
CONSUME_FAST_S = 9.5
"""``kraft consume`` looks its topic up for 10 s at most (no flag): a bound below that."""


@pytest.fixture
def listening() -> Iterator[int]:
    """A port something (not kraft) listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


class _QuietHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def http_port() -> Iterator[int]:
    """A port that answers HTTP, as a metrics endpoint or a web server does."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _QuietHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


# -- class 4 and 6: a client that reaches no bootstrap address --------------------------------


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KRAFT_", "GRPC_"))}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


_SEND = f"""
    import logging, sys, time
    from kraft import KraftError, Producer
    if "--configure" in sys.argv:
        logging.basicConfig(level=logging.WARNING)
    started = time.monotonic()
    try:
        with Producer("{REFUSED}") as producer:
            producer.send("events", value=b"x").result()
    except KraftError as e:
        print(f"{{time.monotonic() - started:.2f}} {{e.code.name}} {{e.message}}")
"""


def test_a_producer_that_reaches_no_bootstrap_raises_network_error_naming_it_fast() -> None:
    """Was UnknownTopicOrPartitionError after 62 s, with JSON log lines nobody configured."""
    out = _python(_SEND)
    assert out.returncode == 0, out.stderr
    elapsed, code, message = out.stdout.strip().split(" ", 2)
    assert code == "NETWORK_EXCEPTION" and REFUSED in message and "refused" in message
    assert float(elapsed) < FAST_S, out.stdout
    assert out.stderr == "", out.stderr  # the library wrote nothing: logging not configured


def test_the_library_logs_through_logging_once_the_application_configures_it() -> None:
    configured = _python(_SEND, "--configure")
    assert "NETWORK_EXCEPTION" in configured.stdout, configured.stderr
    assert "WARNING:kraft.producer:" in configured.stderr, configured.stderr


def test_a_consumer_and_an_admin_client_that_reach_no_bootstrap_fail_fast() -> None:
    from kraft.types import TopicPartition
    from replication.clients import AdminClient, Consumer

    started = time.monotonic()
    with pytest.raises(NetworkError, match=REFUSED_MARKER), AdminClient(REFUSED) as admin:
        admin.list_topics()
    assert time.monotonic() - started < FAST_S
    started = time.monotonic()
    with pytest.raises(NetworkError, match=REFUSED), Consumer(REFUSED) as consumer:
        consumer.assign([TopicPartition("events", 0)])
        consumer.position(TopicPartition("events", 0), timeout=30)
    assert time.monotonic() - started < FAST_S


@pytest.mark.parametrize(
    "argv",
    [
        ["topics", "list", "--bootstrap", f"{REFUSED},127.0.0.1:2"],
        ["topics", "describe", "events", "--bootstrap-controller", REFUSED],
        ["quorum", "describe", "--bootstrap-controller", REFUSED],
        ["produce", "events", "--bootstrap", REFUSED],
        ["groups", "list", "--bootstrap", REFUSED],
        ["acls", "list", "--bootstrap", REFUSED],
        ["configs", "describe", "--topic", "events", "--bootstrap", REFUSED],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_every_command_says_at_once_that_nothing_listens_at_the_bootstrap(argv: list[str]) -> None:
    """Was "no answer within 10s" after the whole --timeout."""
    started = time.monotonic()
    out = kraft(*argv, "--timeout", "30")
    line = one_line_error(out, REFUSED, "refused the connection", "NETWORK_EXCEPTION")
    assert time.monotonic() - started < FAST_S, line


def test_consume_says_at_once_that_nothing_listens_at_the_bootstrap() -> None:
    started = time.monotonic()
    out = kraft("consume", "events", "--bootstrap", REFUSED)
    line = one_line_error(out, REFUSED, "refused the connection", "NETWORK_EXCEPTION")
    assert time.monotonic() - started < CONSUME_FAST_S, line


def test_a_port_that_is_not_kraft_says_so_not_failed_parsing_http2(http_port: int) -> None:
    address = f"127.0.0.1:{http_port}"
    started = time.monotonic()
    out = kraft("topics", "list", "--bootstrap", address, "--timeout", "30")
    one_line_error(out, address, "not in gRPC")
    assert time.monotonic() - started < FAST_S


def test_a_tls_client_of_a_plaintext_port_writes_no_grpc_lines_from_the_library(
    tmp_path: Path,
) -> None:
    """gRPC's C core printed an INFO "Handshake failed" line before kraft's error (class 7);
    the library keeps it to its errors unless the program chose GRPC_VERBOSITY."""
    out = _python(
        f"""
        import kraft  # first, as a kraft program does: before anything imports grpc
        from concurrent import futures
        import grpc
        server = grpc.server(futures.ThreadPoolExecutor(1))
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        from kraft import AdminClient, KraftError
        from kraft.security.certs import create_certs
        made = create_certs({str(tmp_path)!r}, nodes=[], clients=["alice"])
        alice = made.client("alice")
        tls = dict(security_protocol="SSL", ssl_cafile=str(made.cafile),
                   ssl_certfile=str(alice.certfile), ssl_keyfile=str(alice.keyfile))
        try:
            AdminClient(f"127.0.0.1:{{port}}", timeout=10, **tls).list_topics()
        except KraftError as e:
            print(e.code.name)
        """
    )
    assert out.stdout.strip() == "SSL_AUTHENTICATION_FAILED", out.stdout + out.stderr
    assert out.stderr == "", out.stderr


# -- class 3: a port that is taken ------------------------------------------------------------


def test_cluster_up_on_a_taken_port_is_one_line_naming_it_and_starts_nothing(
    tmp_path: Path, listening: int
) -> None:
    """Was a NodeExitedError traceback after 6-14 s."""
    base = listening  # the first port: no assumption about a neighbour being free
    for detach in (["--detach"], []):
        started = time.monotonic()
        argv = ["cluster", "up", "--controllers", "1", "--brokers", "1", "--no-metrics"]
        out = kraft(*argv, "--base-port", str(base), "--data-dir", str(tmp_path), *detach)
        one_line_error(out, f"port {listening} (controller 1) is taken", "--base-port")
        assert out.returncode == 1
        assert time.monotonic() - started < FAST_S
        assert not (tmp_path / "cluster.json").exists()
        assert not (tmp_path / "logs").exists()  # no node was started


def test_a_node_whose_port_is_taken_says_which_key_to_change(
    tmp_path: Path, listening: int
) -> None:
    argv = ["broker", "--node-id", "101", "--listen", f"127.0.0.1:{listening}"]
    argv += ["--controller-quorum-voters", "1@127.0.0.1:2", "--data-dir", str(tmp_path)]
    started = time.monotonic()
    out = kraft(*argv)
    one_line_error(out, f"127.0.0.1:{listening} (listeners)", "taken")
    assert out.returncode == 1 and time.monotonic() - started < FAST_S


# -- class 2: stable ports ----------------------------------------------------------------------


def test_without_base_port_the_first_kafka_listener_gets_9092_when_free_else_free_ports(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The layout is --base-port's placed so the first Kafka listener is on 9092 (1+1:
    controller 9090, broker 9091, its Kafka listener 9092), so an exported bootstrap stays
    right across restarts; when a port of it is taken: free ports, and one line saying the
    addresses change and where to read them."""
    assert port_roles(1, 1, metrics=False)[-1] == "the Kafka listener of broker 101"
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", 9091))
            s.listen()
        except OSError:
            pass  # somebody holds it already: the same case
        assert choose_base_port(1, 1, metrics=False, base_port=None) is None
    err = capsys.readouterr().err
    assert "9091" in err and "free ports" in err and "kraft cluster env" in err
    assert len(err.strip().splitlines()) == 1


# -- class 5 and 6: silent acceptance, and the earlier run's nodes ----------------------------


def test_consume_timeout_zero_is_refused_in_one_line() -> None:
    """It printed "consumed 0 records" on a topic of 1,000 (it stopped before the first
    fetch); Kafka's console consumer does the same with --timeout-ms 0."""
    out = kraft("consume", "events", "--timeout", "0", "--bootstrap", REFUSED)
    assert out.returncode == 2
    one_line_error(out, "--timeout", "0 would stop before the first record", "--timeout 5")


def test_restarting_a_data_dir_with_fewer_nodes_says_which_at_once(tmp_path: Path) -> None:
    """The data of a 3+3 run started as 1+1 waited the whole --wait-timeout (60 s)."""
    for name in ("controller-1", "controller-2", "controller-3", "broker-101", "broker-102"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "meta.properties").write_text("node.id=1\n")
    started = time.monotonic()
    out = kraft(
        "cluster", "up", "--controllers", "1", "--brokers", "1", "--data-dir", str(tmp_path)
    )
    one_line_error(out, "controller 2, controller 3, broker 102", "--controllers 3 --brokers 2")
    assert time.monotonic() - started < FAST_S
    assert not (tmp_path / "logs").exists()
