"""Named listeners (issue 24 item 4) in a broker's properties: the first, inter-broker
listener serves gRPC as before; every other one serves the Kafka protocol."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraft.security.certs import certificate_subject, create_certs
from kraft.security.tls import ClientAuth
from replication.broker.config import BrokerNodeConfig, KafkaListenerSpec
from storage.errors import InvalidConfigError

BASE = {
    "node.id": "101",
    "controller.quorum.voters": "1@127.0.0.1:9091",
    "log.dirs": "/tmp/kraft-test-broker",
}


def config(**props: str) -> BrokerNodeConfig:
    return BrokerNodeConfig.from_properties(
        {**BASE, **{k.replace("_", "."): v for k, v in props.items()}}
    )


def test_todays_single_listener_config_is_unchanged() -> None:
    c = config(listeners="PLAINTEXT://127.0.0.1:9092")
    assert c.listen == "127.0.0.1:9092" and c.kafka_listeners == ()
    assert c.grpc_listener_name == "PLAINTEXT" and c.advertised_listener is None


def test_every_listener_after_the_first_serves_kafka_with_its_advertised_address() -> None:
    c = BrokerNodeConfig.from_properties(
        {
            **BASE,
            "listeners": "GRPC://0.0.0.0:9092,PLAINTEXT://0.0.0.0:9192,EXTERNAL://127.0.0.1:0",
            "advertised.listeners": "GRPC://b1:9092,PLAINTEXT://b1:9192",
            "listener.security.protocol.map": "GRPC:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
            "EXTERNAL:PLAINTEXT",
            "inter.broker.listener.name": "GRPC",
            "socket.request.max.bytes": "1048576",
            "queued.max.requests": "16",
        }
    )
    assert (c.listen, c.advertised_listener, c.grpc_listener_name) == (
        "0.0.0.0:9092",
        "b1:9092",
        "GRPC",
    )
    assert c.kafka_listeners == (
        KafkaListenerSpec(name="PLAINTEXT", listen="0.0.0.0:9192", advertised="b1:9192"),
        KafkaListenerSpec(name="EXTERNAL", listen="127.0.0.1:0"),
    )
    assert (c.socket_request_max_bytes, c.queued_max_requests) == (1048576, 16)
    assert BrokerNodeConfig.from_properties({**BASE, **c.to_properties()}) == c


@pytest.mark.parametrize(
    ("props", "problem"),
    [
        ({"listeners": "A://h:1,A://h:2"}, "twice"),
        ({"listeners": "A://h:1,B://h:2", "inter.broker.listener.name": "B"}, "first"),
        ({"listeners": "A://h:1,SSL://h:2"}, r"listener SSL \(SSL\) needs ssl.keystore.location"),
        (
            {"listeners": "A://h:1,B://h:2", "listener.security.protocol.map": "B:SASL_SSL"},
            "kraft has no SASL: authenticate Kafka clients with SSL client certificates",
        ),
        ({"listeners": "A://h:1,B://0.0.0.0:2"}, "advertised.listeners=B://"),
    ],
)
def test_a_listener_config_kraft_cannot_serve_safely_is_refused(
    props: dict[str, str], problem: str
) -> None:
    with pytest.raises(InvalidConfigError, match=problem):
        BrokerNodeConfig.from_properties({**BASE, **props})


def test_the_listen_flag_moves_the_grpc_listener_and_keeps_the_kafka_ones(tmp_path: Path) -> None:
    from kraft.cli import build_parser
    from kraft.cli.broker import properties_from_args

    path = tmp_path / "b.properties"
    path.write_text(
        "node.id=101\ncontroller.quorum.voters=1@127.0.0.1:9091\n"
        f"log.dirs={tmp_path / 'data'}\nlisteners=PLAINTEXT://127.0.0.1:9092,KAFKA://127.0.0.1:9192\n"
    )
    args = build_parser().parse_args(
        ["broker", "--config", str(path), "--listen", "127.0.0.1:9393"]
    )
    c = BrokerNodeConfig.from_properties(properties_from_args(args))
    assert c.listen == "127.0.0.1:9393" and c.grpc_listener_name == "PLAINTEXT"
    assert c.kafka_listeners == (KafkaListenerSpec(name="KAFKA", listen="127.0.0.1:9192"),)


def ssl_keys(tmp_path: Path, auth: str) -> dict[str, str]:
    certs = create_certs(tmp_path / "certs", nodes=["broker-101"])
    return {
        "ssl.keystore.location": str(certs.node("broker-101").keystore),
        "ssl.truststore.location": str(certs.cafile),
        "ssl.client.auth": auth,
    }


def test_an_ssl_kafka_listener_serves_with_the_brokers_ssl_keys(tmp_path: Path) -> None:
    props = {
        **BASE,
        "listeners": "PLAINTEXT://127.0.0.1:9092,EXTERNAL://127.0.0.1:9093",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:SSL",
        **ssl_keys(tmp_path, "requested"),
    }
    c = BrokerNodeConfig.from_properties(props)
    assert c.tls is None and c.grpc_listener_name == "PLAINTEXT"  # gRPC stays plaintext
    assert c.kafka_listeners == (
        KafkaListenerSpec(name="EXTERNAL", listen="127.0.0.1:9093", security_protocol="SSL"),
    )
    served = c.kafka_tls["EXTERNAL"]
    assert served.client_auth is ClientAuth.REQUESTED
    assert served.certificate_chain_pem and served.private_key_pem
    assert BrokerNodeConfig.from_properties({**BASE, **c.to_properties()}) == c
    served.server_ssl_context()  # loads


def test_an_ssl_grpc_listener_shares_its_keys_with_an_ssl_kafka_listener(tmp_path: Path) -> None:
    keys = ssl_keys(tmp_path, "required")
    props = {
        **BASE,
        "listeners": "SSL://127.0.0.1:9092,KAFKA://127.0.0.1:9093",
        "listener.security.protocol.map": "SSL:SSL,KAFKA:SSL",
        **keys,
    }
    c = BrokerNodeConfig.from_properties(props)
    assert c.tls is not None and c.kafka_tls == {"KAFKA": c.tls}
    assert BrokerNodeConfig.from_properties({**BASE, **c.to_properties()}) == c
    # requested: Kafka's, but gRPC's Python server cannot ask for an optional certificate.
    with pytest.raises(InvalidConfigError, match="requested is not supported on the SSL:// gRPC"):
        BrokerNodeConfig.from_properties({**props, "ssl.client.auth": "requested"})


def test_a_listeners_own_ssl_keys_override_the_brokers_for_that_listener(tmp_path: Path) -> None:
    """Kafka's ``listener.name.<listener>.ssl.*`` keys: INTERNAL serves the broker's keystore,
    EXTERNAL its own (another certificate, given as PEM text) and its own client auth; the
    gRPC listener's own keys (``listener.name.ssl.``) override the broker's for it too."""
    certs = create_certs(tmp_path / "certs", nodes=["broker-101", "external", "grpc"])
    external = certs.node("external")
    props = {
        **BASE,
        "listeners": "SSL://127.0.0.1:9092,INTERNAL://127.0.0.1:9093,EXTERNAL://127.0.0.1:9094",
        "listener.security.protocol.map": "SSL:SSL,INTERNAL:SSL,EXTERNAL:SSL",
        "ssl.keystore.location": str(certs.node("broker-101").keystore),
        "ssl.truststore.location": str(certs.cafile),
        "ssl.client.auth": "required",
        "listener.name.ssl.ssl.keystore.location": str(certs.node("grpc").keystore),
        "listener.name.external.ssl.keystore.certificate.chain": external.certfile.read_text(),
        "listener.name.external.ssl.keystore.key": external.keyfile.read_text(),
        "listener.name.external.ssl.client.auth": "requested",
    }
    c = BrokerNodeConfig.from_properties(props)

    def subject(chain: bytes | None) -> str:
        assert chain is not None
        return certificate_subject(chain)

    assert c.tls is not None and subject(c.tls.certificate_chain_pem) == "CN=grpc"
    internal, own = c.kafka_tls["INTERNAL"], c.kafka_tls["EXTERNAL"]
    assert subject(internal.certificate_chain_pem) == "CN=broker-101"
    assert internal.client_auth is ClientAuth.REQUIRED
    assert subject(own.certificate_chain_pem) == "CN=external"
    assert own.client_auth is ClientAuth.REQUESTED and own.ca_pem == internal.ca_pem
    assert BrokerNodeConfig.from_properties({**BASE, **c.to_properties()}) == c
    # A listener's own value is validated as the key is (the registry's one definition).
    with pytest.raises(InvalidConfigError, match=r"ssl\.client\.auth"):
        BrokerNodeConfig.from_properties({**props, "listener.name.internal.ssl.client.auth": "x"})
