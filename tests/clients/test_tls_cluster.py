"""A cluster with mTLS on every port (``LocalCluster(tls=True)``, issue 17): the demo's
produce-and-read-back path end to end over TLS, the CLI through the ``KRAFT_SSL_*`` variables
and cluster.json, and refusals at the handshake of a plaintext client and of a certificate from
another CA, each in one line naming the side that refused."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kraft.cluster import LocalCluster
from kraft.security.certs import create_certs
from kraft.security.tls import security_exports
from replication.clients import AdminClient, Producer
from storage.errors import SslAuthenticationFailedError

pytestmark = [pytest.mark.process, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    data_dir = tmp_path_factory.mktemp("tls-cluster")
    with LocalCluster(controllers=3, brokers=3, data_dir=data_dir, tls=True) as cluster:
        cluster.wait_until_healthy(timeout=120)
        yield cluster


def _kraft(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *args: str,
    env: dict[str, str],
) -> tuple[int, str, str]:
    """``kraft ARGS`` in this process (a subprocess costs seconds of start-up on a loaded
    machine) with exactly ``env``'s KRAFT_* variables: (exit code, stdout, stderr)."""
    from kraft.cli import main

    for key in [k for k in os.environ if k.startswith("KRAFT_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_demo_path_produces_and_reads_back_every_record_over_mtls(
    cluster: LocalCluster,
) -> None:
    from kraft.demo.console import Console
    from kraft.demo.main_job import (
        PARTITIONS,
        PRODUCER_OPTIONS,
        TOPIC,
        AckTracker,
        Summary,
        consume_and_verify,
        create_topic,
        value_of,
    )
    from kraft.demo.watch import ClientEvents, ClusterWatcher

    console = Console(io.StringIO(), live=False)
    total = 3000
    watcher = ClusterWatcher(
        cluster.controller_bootstrap, "demo", console, ClientEvents(), tls=cluster.tls
    )
    try:
        create_topic(cluster, watcher, console)  # RF 3, min.insync.replicas 2
    finally:
        watcher.close()
    tracker = AckTracker(total, console)
    summary = Summary(records=total)
    assert PRODUCER_OPTIONS["acks"] == "all"
    with Producer(cluster.bootstrap, **PRODUCER_OPTIONS, **cluster.client_security) as producer:
        tracker.start()
        for seq in range(total):
            tracker.futures.append(producer.send("demo", value_of(seq)))
        tracker.wait_all(lambda: None)
    tracker.close()
    tracker.resolve()
    assert tracker.failed == 0, tracker.failures
    consume_and_verify(cluster, TOPIC, PARTITIONS, tracker, summary, console)
    assert (summary.consumed, summary.lost, summary.duplicates, summary.misplaced) == (
        total,
        0,
        0,
        0,
    )


def test_the_cli_reaches_a_tls_cluster_through_the_kraft_ssl_variables_and_cluster_json(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kraft.cli.cluster import CLUSTER_FILE, _cluster_info

    env = dict(line.split("=", 1) for line in security_exports(cluster.client_security))
    assert env["KRAFT_SECURITY_PROTOCOL"] == "SSL"
    describe = ("quorum", "describe", "--json", "--bootstrap-controller")
    code, out, err = _kraft(monkeypatch, capsys, *describe, cluster.controller_bootstrap, env=env)
    assert code == 0, err
    assert json.loads(out)["leader_id"] in cluster.controller_ids
    # `kraft cluster status` takes the client settings from cluster.json.
    info = _cluster_info(cluster, cluster.data_dir)
    assert info["security"] == cluster.client_security
    (cluster.data_dir / CLUSTER_FILE).write_text(json.dumps(info))
    status = ("cluster", "status", "--json", "--data-dir", str(cluster.data_dir))
    code, out, err = _kraft(monkeypatch, capsys, *status, env={})
    assert code == 0, err
    assert not json.loads(out).get("error")


def test_a_plaintext_cli_is_refused_by_the_tls_port_in_one_line(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    listing = ("topics", "list", "--bootstrap", cluster.bootstrap)
    code, _, err = _kraft(monkeypatch, capsys, *listing, env={})
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1, err
    assert "refused this plaintext client at the handshake: it requires TLS" in lines[0]
    assert lines[0].endswith("(SSL_AUTHENTICATION_FAILED)")


def test_a_client_certificate_from_another_ca_is_refused_at_the_handshake(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    other = create_certs(tmp_path, clients=["mallory"])
    mallory = other.client("mallory")
    with (
        pytest.raises(SslAuthenticationFailedError) as refused,
        AdminClient(
            cluster.bootstrap,
            timeout=20,
            request_timeout=5,
            security_protocol="SSL",
            ssl_cafile=str(cluster.client_security["ssl_cafile"]),
            ssl_certfile=str(mallory.certfile),
            ssl_keyfile=str(mallory.keyfile),
        ) as admin,
    ):
        admin.list_topics()
    assert "refused the TLS handshake" in refused.value.message
    assert "not signed by a CA it trusts" in refused.value.message


def test_the_spark_source_reads_over_mtls_with_its_kafka_ssl_options(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """The data source's driver side (planning) and executor side (`read_range`) called
    directly, without a JVM: the ``kafka.security.protocol`` / ``kafka.ssl.*`` options reach
    every connection; without them the TLS port refuses the source at the handshake; a bad
    file fails the query before any task runs, naming the option."""
    pytest.importorskip("pyspark")
    from spark.batch_reader import KraftBatchReader
    from spark.options import ReadOptions

    with AdminClient(cluster.bootstrap, **cluster.client_security) as admin:
        admin.create_topic("spark-tls", partitions=2, replication_factor=3)
        admin.wait_for_leaders("spark-tls")
    with Producer(cluster.bootstrap, **cluster.client_security) as producer:
        for i in range(40):
            producer.send("spark-tls", b"v%d" % i)
        producer.flush()
    plain = {"kraft.bootstrap": cluster.bootstrap, "subscribe": "spark-tls"}
    # Spark lower-cases the keys; ssl_cafile -> kafka.ssl.cafile
    ssl = {f"KAFKA.{k.replace('_', '.').upper()}": v for k, v in cluster.client_security.items()}
    reader = KraftBatchReader(ReadOptions.parse({**plain, **ssl}))
    batches = [batch for p in reader.partitions() for batch in reader.read(p)]
    values = sorted(v for batch in batches for v in batch.column("value").to_pylist())
    assert values == sorted(b"v%d" % i for i in range(40))
    with pytest.raises(SslAuthenticationFailedError, match="requires TLS"):
        KraftBatchReader(ReadOptions.parse(plain)).partitions()
    missing = str(tmp_path / "nowhere.pem")
    with pytest.raises(ValueError, match=r"option kafka\.ssl\.cafile: cannot read"):
        ReadOptions.parse({**plain, **ssl, "kafka.ssl.cafile": missing})
