"""mTLS (issue 17): certificates, the ``ssl.*`` node keys, client settings, and refusals at the
handshake naming the side and the reason, on an in-process gRPC server over loopback."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from grpc_health.v1 import health_pb2, health_pb2_grpc

from kraft.controller.node_config import ControllerNodeConfig
from kraft.security.certs import CertSet, create_certs
from kraft.security.tls import (
    ClientAuth,
    TlsConfig,
    client_tls,
    client_tls_from_env,
    node_tls,
    peer_certificate_subject,
)
from kraft.transport.channels import (
    _tls_options,
    aio_server,
    bind,
    client_channel,
    map_grpc_errors,
)
from replication.broker.config import BrokerNodeConfig
from storage.errors import InvalidConfigError, NetworkError, SslAuthenticationFailedError

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertSet:
    return create_certs(
        tmp_path_factory.mktemp("certs"), nodes=["node-1"], clients=["alice", "bob"]
    )


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> CertSet:
    """Another CA, with the same names: its certificates are trusted by nobody above."""
    return create_certs(tmp_path_factory.mktemp("other"), nodes=["node-1"], clients=["alice"])


def _node_props(certs: CertSet, **extra: str) -> dict[str, str]:
    return {
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.node("node-1").keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.cafile),
        "ssl.client.auth": "required",
        **extra,
    }


def _client(certs: CertSet, name: str | None) -> TlsConfig | None:
    paths = certs.client(name) if name else None
    return client_tls(
        "SSL",
        certs.cafile,
        paths.certfile if paths else None,
        paths.keyfile if paths else None,
    )


# --- certificates ---------------------------------------------------------------------------


def test_certificates_name_the_subject_and_loopback_and_nodes_serve_and_dial(
    certs: CertSet,
) -> None:
    node = x509.load_pem_x509_certificates(certs.node("node-1").certfile.read_bytes())[0]
    alice = x509.load_pem_x509_certificates(certs.client("alice").certfile.read_bytes())[0]
    assert alice.subject.rfc4514_string() == "CN=alice"
    sans = node.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"localhost", "node-1"} <= set(sans.get_values_for_type(x509.DNSName))
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    node_usage = node.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    client_usage = alice.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(node_usage) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    assert list(client_usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert oct(certs.client("alice").keyfile.stat().st_mode & 0o777) == "0o600"


def test_certificate_names_must_be_distinct_and_file_safe(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="distinct"):
        create_certs(tmp_path, nodes=["a"], clients=["a"])
    with pytest.raises(ValueError, match="letters, digits"):
        create_certs(tmp_path, clients=["../etc"])


# --- node keys ------------------------------------------------------------------------------


def test_a_plaintext_listener_has_no_tls_and_an_ssl_listener_reads_the_pem_files(
    certs: CertSet,
) -> None:
    assert node_tls({"listeners": "PLAINTEXT://127.0.0.1:9092"}) is None
    assert node_tls({"listeners": "CONTROLLER://127.0.0.1:9092"}) is None
    tls = node_tls(_node_props(certs))
    assert tls is not None and tls.client_auth is ClientAuth.REQUIRED
    assert tls.ca_pem == certs.cafile.read_bytes()


def test_pem_text_on_one_line_reads_as_the_files(certs: CertSet) -> None:
    from_files = node_tls(_node_props(certs))
    assert from_files is not None
    props = {"listeners": "SSL://127.0.0.1:0", **from_files.to_properties()}
    assert all("\n" not in v for v in props.values())
    assert node_tls(props) == from_files


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"ssl.truststore.location": ""}, "needs ssl.truststore.location"),
        ({"ssl.keystore.location": ""}, "needs ssl.keystore.location"),
        ({"ssl.client.auth": "requested"}, "requested is not supported on the SSL:// gRPC"),
        ({"ssl.keystore.type": "JKS"}, "not supported yet"),
        ({"ssl.client.auth": "sometimes"}, "must be one of"),
        ({"ssl.truststore.location": "/nonexistent/ca.pem"}, "cannot read"),
        ({"ssl.truststore.certificates": "-----BEGIN CERTIFICATE----- !! "}, "no PEM block"),
    ],
)
def test_a_bad_ssl_key_stops_the_node_with_a_named_error(
    certs: CertSet, change: dict[str, str], message: str
) -> None:
    props = {k: v for k, v in {**_node_props(certs), **change}.items() if v}
    if "ssl.truststore.certificates" in change:
        props.pop("ssl.truststore.location")
    with pytest.raises(InvalidConfigError, match=message):
        node_tls(props)


def test_node_configs_round_trip_their_tls_through_properties(certs: CertSet) -> None:
    base = _node_props(certs, **{"listeners": "SSL://127.0.0.1:9092"})
    broker = BrokerNodeConfig.from_properties(
        {**base, "node.id": "101", "controller.quorum.voters": "1@127.0.0.1:9091", "log.dirs": "/d"}
    )
    assert broker.tls is not None
    assert broker.to_properties()["listeners"] == "SSL://127.0.0.1:9092"
    assert BrokerNodeConfig.from_properties(broker.to_properties()) == broker
    controller = ControllerNodeConfig.from_properties(
        {**base, "node.id": "1", "controller.quorum.voters": "1@127.0.0.1:9092", "log.dirs": "/d"}
    )
    assert controller.tls == broker.tls
    assert ControllerNodeConfig.from_properties(controller.to_properties()) == controller


# --- client settings ------------------------------------------------------------------------


def test_client_settings_take_kafka_python_names_and_refuse_half_a_keypair(
    certs: CertSet,
) -> None:
    assert client_tls() is None
    alice = certs.client("alice")
    with pytest.raises(InvalidConfigError, match="go together"):
        client_tls("SSL", certs.cafile, alice.certfile, None)
    with pytest.raises(InvalidConfigError, match="security_protocol must be one of"):
        client_tls("SASL_SSL", certs.cafile)
    env = {
        "KRAFT_SSL_CAFILE": str(certs.cafile),
        "KRAFT_SSL_CERTFILE": str(alice.certfile),
        "KRAFT_SSL_KEYFILE": str(alice.keyfile),
    }
    tls = client_tls_from_env(env)
    assert tls is not None and tls.certificate_chain_pem == alice.certfile.read_bytes()
    assert client_tls_from_env({}) is None


def test_through_a_proxy_the_certificate_is_checked_against_the_address_meant() -> None:
    assert _tls_options("127.0.0.1:9092", "127.0.0.1:9092") == []
    assert _tls_options("localhost:9092", "127.0.0.1:40000") == [
        ("grpc.ssl_target_name_override", "localhost")
    ]


# --- handshakes over loopback ---------------------------------------------------------------


class _Health(health_pb2_grpc.HealthServicer):  # type: ignore[misc]
    def __init__(self) -> None:
        self.subjects: list[str | None] = []

    async def Check(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        self.subjects.append(peer_certificate_subject(context))
        return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)


class _Server:
    """A grpc.aio server built by `kraft.transport.channels`, on a thread of its own."""

    def __init__(self, tls: TlsConfig | None, host: str = "127.0.0.1") -> None:
        self.host = host
        self.servicer = _Health()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.address = asyncio.run_coroutine_threadsafe(self._start(tls), self._loop).result(10)

    async def _start(self, tls: TlsConfig | None) -> str:
        self._server = aio_server()
        health_pb2_grpc.add_HealthServicer_to_server(self.servicer, self._server)
        port = bind(self._server, f"{self.host}:0", tls)
        await self._server.start()
        return f"{self.host}:{port}"

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._server.stop(None), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@pytest.fixture(scope="module")
def tls_server(certs: CertSet) -> Iterator[_Server]:
    server = _Server(node_tls(_node_props(certs)))
    yield server
    server.close()


def _check(address: str, tls: TlsConfig | None) -> None:
    with client_channel(address, tls) as channel, map_grpc_errors(address, "broker", tls):
        health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)


def test_mtls_clients_with_different_certificates_are_told_apart_by_subject(
    certs: CertSet, tls_server: _Server
) -> None:
    _check(tls_server.address, _client(certs, "alice"))
    _check(tls_server.address, _client(certs, "bob"))
    assert tls_server.servicer.subjects[-2:] == ["CN=alice", "CN=bob"]


def test_a_plaintext_client_to_a_tls_port_is_refused_by_the_server_saying_so(
    tls_server: _Server,
) -> None:
    with pytest.raises(SslAuthenticationFailedError) as refused:
        _check(tls_server.address, None)
    message = refused.value.message
    assert message.startswith(f"broker {tls_server.address} refused this plaintext client")
    assert "requires TLS" in message and "\n" not in message
    assert not refused.value.retriable


@pytest.mark.parametrize("who", ["alice of another CA", "no certificate"])
def test_a_client_certificate_the_server_does_not_trust_is_refused_by_the_server(
    certs: CertSet, other_ca: CertSet, tls_server: _Server, who: str
) -> None:
    tls = (
        client_tls(
            "SSL",
            certs.cafile,
            other_ca.client("alice").certfile,
            other_ca.client("alice").keyfile,
        )
        if who.startswith("alice")
        else _client(certs, None)
    )
    with pytest.raises(SslAuthenticationFailedError) as refused:
        _check(tls_server.address, tls)
    message = refused.value.message
    assert f"broker {tls_server.address} refused the TLS handshake" in message
    expected = "not signed by a CA it trusts" if who.startswith("alice") else "no client cert"
    assert expected in message


def test_a_server_certificate_from_another_ca_is_refused_by_this_client(
    other_ca: CertSet, tls_server: _Server
) -> None:
    with pytest.raises(SslAuthenticationFailedError) as refused:
        _check(tls_server.address, _client(other_ca, "alice"))
    assert refused.value.message == (
        f"this client refused the TLS handshake with broker {tls_server.address}: its "
        "certificate is not signed by a CA in ssl_cafile"
    )


def test_a_tls_client_to_a_plaintext_port_is_refused_by_this_client(certs: CertSet) -> None:
    server = _Server(None)
    try:
        with pytest.raises(SslAuthenticationFailedError, match="does not speak TLS"):
            _check(server.address, _client(certs, "alice"))
    finally:
        server.close()


def test_no_server_at_all_stays_a_retriable_network_error(certs: CertSet) -> None:
    server = _Server(None)
    address = server.address
    server.close()
    for tls in (None, _client(certs, "alice")):
        with pytest.raises(NetworkError) as failed:
            _check(address, tls)
        assert failed.value.retriable


def test_through_a_fault_proxy_on_another_address_the_san_check_still_passes(
    certs: CertSet, tls_server: _Server
) -> None:
    """The proxy listens on 127.0.0.2, which no certificate names: the channel checks the
    certificate against the host it means (``localhost``), not the proxy's."""
    from kraft.cluster.fault_network import FaultNetwork
    from kraft.transport.channels import set_dial_map

    port = int(tls_server.address.rpartition(":")[2])
    network = FaultNetwork(listen_host="127.0.0.2")
    try:
        proxy = network.add_link("client", 1, ("127.0.0.1", port))
        meant = f"localhost:{port}"
        set_dial_map({meant: proxy})
        _check(meant, _client(certs, "alice"))
        assert tls_server.servicer.subjects[-1] == "CN=alice"
    finally:
        set_dial_map({})
        network.close()


def test_the_listen_flag_keeps_the_files_ssl_listener(certs: CertSet, tmp_path: Path) -> None:
    from kraft.cli import build_parser
    from kraft.cli.broker import properties_from_args

    props = {
        **_node_props(certs),
        "node.id": "101",
        "controller.quorum.voters": "1@127.0.0.1:9091",
        "log.dirs": str(tmp_path / "data"),
    }
    path = tmp_path / "b.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    args = build_parser().parse_args(
        ["broker", "--config", str(path), "--listen", "127.0.0.1:9393"]
    )
    config = BrokerNodeConfig.from_properties(properties_from_args(args))
    assert config.listen == "127.0.0.1:9393" and config.tls is not None


def test_a_server_certificate_that_does_not_name_the_host_is_refused_by_this_client(
    certs: CertSet,
) -> None:
    """127.0.0.2 is loopback but in no certificate's SANs."""
    server = _Server(node_tls(_node_props(certs)), host="127.0.0.2")
    try:
        with pytest.raises(SslAuthenticationFailedError) as refused:
            _check(server.address, _client(certs, "alice"))
    finally:
        server.close()
    assert refused.value.message.endswith("does not name the host dialled (SAN)")


def test_a_node_certificate_with_its_address_as_a_san_is_accepted_at_that_address(
    tmp_path: Path,
) -> None:
    """Issue 29: a peer dials a node by its address on another host; ``--san`` puts that
    address (127.0.0.2 here, which the default SANs lack) in the node's certificate."""
    made = create_certs(
        tmp_path, nodes=["node-1"], clients=["alice"], sans={"node-1": ["127.0.0.2", "n1.test"]}
    )
    node = x509.load_pem_x509_certificates(made.node("node-1").certfile.read_bytes())[0]
    sans = node.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == [
        "127.0.0.1",
        "127.0.0.2",
    ]
    assert "n1.test" in sans.get_values_for_type(x509.DNSName)
    server = _Server(node_tls(_node_props(made)), host="127.0.0.2")
    try:
        _check(server.address, _client(made, "alice"))
        assert server.servicer.subjects[-1] == "CN=alice"
    finally:
        server.close()


def test_san_arguments_name_a_node_and_hosts_that_parse(tmp_path: Path) -> None:
    from kraft.cli import main
    from kraft.security.certs import parse_san

    assert parse_san("broker-101=10.0.0.11, b1.example.net,::1") == (
        "broker-101",
        ("10.0.0.11", "b1.example.net", "::1"),
    )
    for bad in ("broker-101", "=10.0.0.1", "b=", "b=under_score.net", "b=-x"):
        with pytest.raises(ValueError, match=r"--san expects|not an IP address or host name"):
            parse_san(bad)
    with pytest.raises(ValueError, match="not in --nodes"):
        create_certs(tmp_path, nodes=["a"], sans={"b": ["10.0.0.1"]})
    out = tmp_path / "cli"
    argv = ["certs", "create", "--out", str(out), "--nodes", "c1,b1", "--san", "b1=10.9.9.9"]
    assert main([*argv, "--san", "b1=b1.lan"]) == 0
    cert = x509.load_pem_x509_certificates((out / "b1.pem").read_bytes())[0]
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "10.9.9.9" in [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)]
    assert "b1.lan" in sans.get_values_for_type(x509.DNSName)
