"""An SSL Kafka listener on a real loopback socket: the client certificate's subject, through
``ssl.principal.mapping.rules``, is the principal of each request; ``ssl.client.auth``
``requested`` lets a client without a certificate in as ``User:ANONYMOUS`` and ``required``
refuses it at the handshake. (The process test, `test_ssl_authorizer`, runs it over real brokers
with the authorizer and three real clients.)"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import replace
from pathlib import Path

import pytest

from kraft.security.certs import CertSet, create_certs
from kraft.security.principals import parse_mapping_rules
from kraft.security.tls import ClientAuth, TlsConfig
from replication.broker.kafka import KafkaListener, KafkaListenerConfig
from tests.kafka_wire.test_listener import METADATA, GatedApi, read_frame
from tests.kafka_wire.wire import decode_response, request_frame

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertSet:
    return create_certs(tmp_path_factory.mktemp("certs"), nodes=["broker-101"], clients=["Alice"])


def server_tls(certs: CertSet, auth: ClientAuth) -> TlsConfig:
    node = certs.node("broker-101")
    return TlsConfig(
        ca_pem=certs.cafile.read_bytes(),
        certificate_chain_pem=node.certfile.read_bytes(),
        private_key_pem=node.keyfile.read_bytes(),
        client_auth=auth,
    )


def client_context(certs: CertSet, name: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=certs.cafile)
    if name is not None:
        paths = certs.client(name)
        context.load_cert_chain(Path(paths.certfile), Path(paths.keyfile))
    return context


async def metadata_over_tls(port: int, context: ssl.SSLContext) -> int:
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname="127.0.0.1"
    )
    try:
        writer.write(request_frame(METADATA, 12, {"topics": None}, correlation_id=5))
        frame = await asyncio.wait_for(read_frame(reader), 10)
        return decode_response(METADATA, 12, frame)[0]
    finally:
        writer.close()


def run_listener(certs: CertSet, auth: ClientAuth, client: str | None) -> list[str]:
    """The principals the API saw for one Metadata from ``client`` (None: no certificate)."""

    async def run() -> list[str]:
        api = GatedApi()
        config = KafkaListenerConfig(
            name="KAFKA",
            host="127.0.0.1",
            port=0,
            security_protocol="SSL",
            tls=server_tls(certs, auth),
            principal_rules=parse_mapping_rules("RULE:^CN=(.*)$/$1/L,DEFAULT"),
        )
        listener = KafkaListener(config, api)  # type: ignore[arg-type]
        await listener.start()
        try:
            assert listener.bound_port is not None
            assert await metadata_over_tls(listener.bound_port, client_context(certs, client)) == 5
        finally:
            await listener.stop()
        assert {c.security_protocol for c in api.contexts} == {"SSL"}
        assert not any(c.file_regions for c in api.contexts)  # TLS encrypts: records as bytes
        return [c.principal for c in api.contexts]

    return asyncio.run(run())


def test_the_client_certificate_is_the_principal_through_the_mapping_rules(
    certs: CertSet,
) -> None:
    assert run_listener(certs, ClientAuth.REQUIRED, "Alice") == ["User:alice"]
    assert run_listener(certs, ClientAuth.REQUESTED, "Alice") == ["User:alice"]


def test_requested_lets_a_client_without_a_certificate_in_as_anonymous(certs: CertSet) -> None:
    assert run_listener(certs, ClientAuth.REQUESTED, None) == ["User:ANONYMOUS"]
    assert run_listener(certs, ClientAuth.NONE, "Alice") == ["User:ANONYMOUS"]  # not asked for


def test_required_refuses_a_client_without_a_certificate(certs: CertSet) -> None:
    with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)):
        run_listener(certs, ClientAuth.REQUIRED, None)


def test_an_ssl_listener_without_its_keys_does_not_start() -> None:
    config = KafkaListenerConfig(name="KAFKA", host="127.0.0.1", port=0, security_protocol="SSL")
    listener = KafkaListener(config, GatedApi())  # type: ignore[arg-type]
    with pytest.raises(OSError, match="needs the ssl"):
        asyncio.run(listener.start())
    sasl = KafkaListener(replace(config, security_protocol="SASL_SSL"), GatedApi())  # type: ignore[arg-type]
    with pytest.raises(OSError, match="PLAINTEXT and SSL listeners"):
        asyncio.run(sasl.start())
