"""mTLS settings of a node or a client: one frozen `TlsConfig` value, passed down to every
channel and server that `kraft.transport.channels` builds (no process-wide setting: two clients
in one process may hold different certificates, alice's and bob's).

**Nodes** read Kafka's keys (KIP-651 PEM form; `node_tls` parses them, the config registry
documents them)::

    listeners=SSL://127.0.0.1:9092
    ssl.keystore.type=PEM
    ssl.keystore.location=/etc/kraft/broker-101.pem      # or the two PEM-text keys:
    # ssl.keystore.certificate.chain=-----BEGIN CERTIFICATE----- MIIB... -----END CERTIFICATE-----
    # ssl.keystore.key=-----BEGIN PRIVATE KEY----- MIGH... -----END PRIVATE KEY-----
    ssl.truststore.type=PEM
    ssl.truststore.location=/etc/kraft/ca.pem            # or ssl.truststore.certificates=<PEM>
    ssl.client.auth=required

Values: the ``ssl.keystore.certificate.chain``, ``ssl.keystore.key`` and
``ssl.truststore.certificates`` keys hold PEM *text*, as in Kafka (a properties file may carry
it on one line: whitespace inside the base64 body is ignored, as Kafka's PEM parser ignores it).
The ``.location`` keys hold a PEM *file's path* (Kafka's ``ssl.keystore.location`` with
``ssl.keystore.type=PEM``: one file with the private key and the certificate chain). A node
whose first listener is ``SSL://`` serves TLS and dials every other node over TLS, presenting
its own certificate (mTLS between nodes: one certificate serves both ends); any other listener
name is plaintext. A listener's own ``listener.name.<listener>.ssl.*`` keys override the
node-wide ones for it (Kafka's listener prefix; `listener_properties`), so two listeners may
serve different certificates.

**Clients** take kafka-python's names (`client_tls`): ``security_protocol="SSL"``,
``ssl_cafile``, ``ssl_certfile``, ``ssl_keyfile``; ``PLAINTEXT`` (the default) gives None.
The CLI also reads ``KRAFT_SECURITY_PROTOCOL``, ``KRAFT_SSL_CAFILE``, ``KRAFT_SSL_CERTFILE``
and ``KRAFT_SSL_KEYFILE`` (`client_tls_from_env`).

**Refusals** happen at the handshake, and `refusal_reason` names the side and the reason in one
line (kraft's SSL_AUTHENTICATION_FAILED, as Kafka's ``SslAuthenticationException``): gRPC
itself reports "Tls handshake failed" when *this* client refused the server (its certificate
is not signed by ``ssl_cafile``, or it speaks no TLS), but only "Socket closed" when the *server*
refused this client (plaintext to a TLS port, no certificate, one from another CA). For the
latter the client probes the address once with Python's ``ssl`` module and tells a server that
speaks TLS and hung up on this client from an ordinary network failure (a server gone away
stays a retriable NETWORK_EXCEPTION).

**The caller's identity, for servicers** (the authorizer)::

    subject = peer_certificate_subject(context)   # "CN=alice" or None (plaintext, no cert)

reads ``context.auth_context()`` of a grpc.aio ``ServicerContext``: the keys are
``transport_security_type`` (``[b"ssl"]`` on a TLS connection), ``x509_subject`` (the verified
client certificate's subject DN, RFC 2253 order as Kafka's ``X500Principal.getName()``:
``CN=alice,O=acme``), ``x509_common_name``, ``x509_pem_cert`` and ``x509_subject_alternative_
name``; no certificate, no ``x509_*`` key.
"""

from __future__ import annotations

import base64
import enum
import os
import re
import socket
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

import grpc

from storage.config_registry import NODE_KEYS, PER_LISTENER_KEYS, listener_key
from storage.errors import InvalidConfigError

SECURITY_PROTOCOLS: Final = ("PLAINTEXT", "SSL")
"""The ``security_protocol`` values kraft has (Kafka's SASL_* are not implemented)."""
ENV_SECURITY_PROTOCOL: Final = "KRAFT_SECURITY_PROTOCOL"
ENV_SSL_CAFILE: Final = "KRAFT_SSL_CAFILE"
ENV_SSL_CERTFILE: Final = "KRAFT_SSL_CERTFILE"
ENV_SSL_KEYFILE: Final = "KRAFT_SSL_KEYFILE"
PROBE_TIMEOUT_S: Final = 2.0
"""How long `refusal_reason`'s probe of a server waits (only after a failed connection)."""
_QUOTE_MAX = 120


class ClientAuth(enum.Enum):
    """``ssl.client.auth``. ``requested`` (a certificate is asked for, and verified if one
    comes, but a caller without one is let in as ``User:ANONYMOUS``) is served on the Kafka
    listeners only: gRPC's Python server can only require one or not ask (`node_tls` refuses
    it on an ``SSL://`` gRPC listener)."""

    REQUIRED = "required"
    REQUESTED = "requested"
    NONE = "none"


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsConfig:
    """The TLS material of one node or client, PEM bytes.

    A node's has all three and its ``client_auth``; a client's has ``ca_pem`` (None: the
    system's roots) and, for mTLS, its certificate chain and key.
    """

    ca_pem: bytes | None
    """The trusted CA certificates (``ssl.truststore.*``, ``ssl_cafile``)."""
    certificate_chain_pem: bytes | None = None
    """This end's certificate, then its chain (``ssl.keystore.*``, ``ssl_certfile``)."""
    private_key_pem: bytes | None = None
    """This end's private key, unencrypted (``ssl.keystore.*``, ``ssl_keyfile``)."""
    client_auth: ClientAuth = ClientAuth.NONE
    """What a server built with this config asks of its callers (``ssl.client.auth``)."""

    def __post_init__(self) -> None:
        if (self.certificate_chain_pem is None) != (self.private_key_pem is None):
            raise InvalidConfigError("TLS: give a certificate and its private key together")

    def server_credentials(self) -> grpc.ServerCredentials:
        """What `kraft.transport.channels.bind` serves with."""
        if self.certificate_chain_pem is None or self.private_key_pem is None:
            raise InvalidConfigError("TLS: a server needs a certificate and a private key")
        required = self.client_auth is ClientAuth.REQUIRED
        return grpc.ssl_server_credentials(
            [(self.private_key_pem, self.certificate_chain_pem)],
            root_certificates=self.ca_pem if required else None,
            require_client_auth=required,
        )

    def server_ssl_context(self) -> ssl.SSLContext:
        """What a Kafka ``SSL`` listener serves with (`replication.broker.kafka.listener`):
        this config's certificate, and ``client_auth`` as Kafka applies it (``required``:
        verified or refused at the handshake; ``requested``: verified if sent)."""
        if self.certificate_chain_pem is None or self.private_key_pem is None:
            raise InvalidConfigError("TLS: a server needs a certificate and a private key")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        # NB: Python's ssl loads a certificate and key only from files: they live in a private
        # directory for the instant of the load.
        with tempfile.TemporaryDirectory(prefix="kraft-tls-") as tmp:
            certfile, keyfile = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
            certfile.write_bytes(self.certificate_chain_pem)
            keyfile.touch(mode=0o600)
            keyfile.write_bytes(self.private_key_pem)
            context.load_cert_chain(certfile, keyfile)
        if self.client_auth is not ClientAuth.NONE and self.ca_pem is not None:
            context.load_verify_locations(cadata=self.ca_pem.decode())
            context.verify_mode = (
                ssl.CERT_REQUIRED if self.client_auth is ClientAuth.REQUIRED else ssl.CERT_OPTIONAL
            )
        return context

    def channel_credentials(self) -> grpc.ChannelCredentials:
        """What `kraft.transport.channels` dials with (presenting the certificate, if any)."""
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca_pem,
            private_key=self.private_key_pem,
            certificate_chain=self.certificate_chain_pem,
        )

    def to_properties(self) -> dict[str, str]:
        """The node keys of this config, PEM text on one line each (`node_tls` reads them;
        the ``.type`` keys keep their default, PEM)."""
        props = {"ssl.client.auth": self.client_auth.value}
        if self.ca_pem is not None:
            props["ssl.truststore.certificates"] = _one_line(self.ca_pem)
        if self.certificate_chain_pem is not None and self.private_key_pem is not None:
            props["ssl.keystore.certificate.chain"] = _one_line(self.certificate_chain_pem)
            props["ssl.keystore.key"] = _one_line(self.private_key_pem)
        return props


# --- PEM ------------------------------------------------------------------------------------

_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)


def normalize_pem(data: bytes | str, what: str) -> bytes:
    """``data``'s PEM blocks, each body re-wrapped at 64 columns: a block written on one line
    (a properties file's value) parses as the original.

    Raises:
        InvalidConfigError: no PEM block, or a body that is not base64 (``what`` names it).
    """
    raw = data.encode() if isinstance(data, str) else data
    blocks = []
    for match in _PEM_BLOCK.finditer(raw):
        label, body = match.group(1), re.sub(rb"\s+", b"", match.group(2))
        try:
            base64.b64decode(body, validate=True)
        except ValueError:
            raise InvalidConfigError(f"{what}: the {label.decode()} block is not base64") from None
        lines = [body[i : i + 64] for i in range(0, len(body), 64)]
        blocks.append(b"\n".join([b"-----BEGIN " + label + b"-----", *lines]))
        blocks[-1] += b"\n-----END " + label + b"-----\n"
    if not blocks:
        raise InvalidConfigError(f"{what}: no PEM block (-----BEGIN ...-----) found")
    return b"".join(blocks)


def _one_line(pem: bytes) -> str:
    return " ".join(line.strip() for line in pem.decode().splitlines() if line.strip())


def _certificates(pem: bytes, what: str) -> bytes:
    # NB: cryptography is imported here, not at the top: it costs ~0.2-0.4 s, and every
    # plaintext client imports this module (through `kraft.transport.channels`).
    from cryptography import x509

    try:
        x509.load_pem_x509_certificates(pem)
    except ValueError:
        raise InvalidConfigError(f"{what}: no readable PEM certificate") from None
    return pem


def _key(pem: bytes, what: str) -> bytes:
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as e:
        reason = "encrypted keys are not supported" if isinstance(e, TypeError) else "unreadable"
        raise InvalidConfigError(f"{what}: not a PEM private key ({reason})") from None
    return pem


def _read(path: str | Path, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        shown = str(path)[:_QUOTE_MAX]
        raise InvalidConfigError(f"{what}: cannot read {shown}: {e.strerror}") from None


def _split_keystore(pem: bytes, what: str) -> tuple[bytes, bytes]:
    """A PEM keystore file's (certificate chain, private key)."""
    certs: list[bytes] = []
    keys: list[bytes] = []
    for match in _PEM_BLOCK.finditer(pem):
        (keys if b"PRIVATE KEY" in match.group(1) else certs).append(match.group(0) + b"\n")
    if not certs or len(keys) != 1:
        raise InvalidConfigError(f"{what}: expected one private key and its certificate chain")
    return b"".join(certs), keys[0]


# --- nodes ----------------------------------------------------------------------------------


def listener_security_protocol(listeners: str) -> str:
    """``SSL`` or ``PLAINTEXT``: the protocol of the first of ``listeners``
    (``SSL://host:port``; any other listener name, or none, is plaintext)."""
    return "SSL" if _first_listener_name(listeners) == "SSL" else "PLAINTEXT"


def listener_properties(props: Mapping[str, str], listener: str) -> Mapping[str, str]:
    """``props`` as listener ``listener`` reads its ``ssl.*`` keys: Kafka's
    ``listener.name.<listener>.ssl.*`` keys (`storage.config_registry.listener_key`) override
    the node-wide ones for that listener, key by key.

    NB: a listener that names its own keystore (or trust store) in either form replaces the
    node-wide one whole: a node-wide ``ssl.keystore.location`` never sits beside a listener's
    ``ssl.keystore.certificate.chain`` (Kafka refuses such a mix; here the listener's wins).
    """
    own = {
        key: props[name]
        for key in PER_LISTENER_KEYS
        if (name := listener_key(listener, key)) in props
    }
    if not own:
        return props
    out = dict(props)
    for store in ("ssl.keystore.", "ssl.truststore."):
        if any(k.startswith(store) for k in own):
            for key in PER_LISTENER_KEYS:
                if key.startswith(store):
                    out.pop(key, None)
    out.update(own)
    return out


def _first_listener_name(listeners: str) -> str:
    first = listeners.split(",")[0].strip()
    return first.split("://", 1)[0].upper() if "://" in first else "PLAINTEXT"


def node_tls(props: Mapping[str, str]) -> TlsConfig | None:
    """The TLS config of a node's properties: None unless its first listener is ``SSL://``
    (whose own ``listener.name.ssl.ssl.*`` keys override the node-wide ones).

    Raises:
        InvalidConfigError: a key is invalid, missing, or names unreadable PEM;
            ``ssl.client.auth=requested`` (see `ClientAuth`).
    """
    listeners = props.get("listeners", "")
    if listener_security_protocol(listeners) != "SSL":
        return None
    tls = ssl_material(
        listener_properties(props, _first_listener_name(listeners)), "listeners=SSL://"
    )
    if tls.client_auth is ClientAuth.REQUESTED:
        raise InvalidConfigError(
            "ssl.client.auth=requested is not supported on the SSL:// gRPC listener (gRPC's "
            "Python server can only require a client certificate or not ask for one); use "
            "required or none (requested is served on SSL Kafka listeners)"
        )
    return tls


def ssl_material(props: Mapping[str, str], needed_by: str) -> TlsConfig:
    """The ``ssl.*`` keys of a node's properties as a `TlsConfig` (its certificate, its
    trust store, ``ssl.client.auth``); ``needed_by`` names what asks for them in the
    refusal of a missing key (``listeners=SSL://``, ``listener KAFKA (SSL)``).

    Raises:
        InvalidConfigError: a key is invalid, missing, or names unreadable PEM.
    """

    def value(key: str) -> str:
        raw = props.get(key, "").strip()
        if raw and (problem := NODE_KEYS[key].validate(raw)) is not None:
            raise InvalidConfigError(problem)
        return raw

    value("ssl.keystore.type")
    value("ssl.truststore.type")
    auth = value("ssl.client.auth") or str(NODE_KEYS["ssl.client.auth"].default)
    if location := value("ssl.keystore.location"):
        chain, key = _split_keystore(
            normalize_pem(_read(location, "ssl.keystore.location"), "ssl.keystore.location"),
            "ssl.keystore.location",
        )
    elif value("ssl.keystore.certificate.chain") and value("ssl.keystore.key"):
        chain_key, key_key = "ssl.keystore.certificate.chain", "ssl.keystore.key"
        chain = normalize_pem(props[chain_key], chain_key)
        key = normalize_pem(props[key_key], key_key)
    else:
        raise InvalidConfigError(
            f"{needed_by} needs ssl.keystore.location, or ssl.keystore.certificate.chain "
            "and ssl.keystore.key"
        )
    if location := value("ssl.truststore.location"):
        ca = normalize_pem(_read(location, "ssl.truststore.location"), "ssl.truststore.location")
    elif value("ssl.truststore.certificates"):
        ca = normalize_pem(props["ssl.truststore.certificates"], "ssl.truststore.certificates")
    else:
        raise InvalidConfigError(
            f"{needed_by} needs ssl.truststore.location or ssl.truststore.certificates "
            "(the CA that signed the other nodes' and the clients' certificates)"
        )
    return TlsConfig(
        ca_pem=_certificates(ca, "ssl.truststore"),
        certificate_chain_pem=_certificates(chain, "ssl.keystore certificate chain"),
        private_key_pem=_key(key, "ssl.keystore key"),
        client_auth=ClientAuth(auth),
    )


# --- clients --------------------------------------------------------------------------------


def client_tls(
    security_protocol: str = "PLAINTEXT",
    ssl_cafile: str | Path | None = None,
    ssl_certfile: str | Path | None = None,
    ssl_keyfile: str | Path | None = None,
) -> TlsConfig | None:
    """A client's TLS config from kafka-python's settings; None for ``PLAINTEXT``.

    Raises:
        InvalidConfigError: another protocol, a certificate without its key (or the reverse),
            or a file that cannot be read or is not PEM.
    """
    protocol = security_protocol.strip().upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise InvalidConfigError(
            f"security_protocol must be one of {list(SECURITY_PROTOCOLS)}, got "
            f"{security_protocol[:40]!r}"
        )
    if protocol == "PLAINTEXT":
        return None
    if (ssl_certfile is None) != (ssl_keyfile is None):
        raise InvalidConfigError("ssl_certfile and ssl_keyfile go together")
    ca = _certificates(_read(ssl_cafile, "ssl_cafile"), "ssl_cafile") if ssl_cafile else None
    chain = key = None
    if ssl_certfile is not None and ssl_keyfile is not None:
        chain = _certificates(_read(ssl_certfile, "ssl_certfile"), "ssl_certfile")
        key = _key(_read(ssl_keyfile, "ssl_keyfile"), "ssl_keyfile")
    return TlsConfig(ca_pem=ca, certificate_chain_pem=chain, private_key_pem=key)


def client_security_from_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The client settings (kafka-python's names) of the ``KRAFT_SECURITY_PROTOCOL`` /
    ``KRAFT_SSL_*`` variables: {} when none is set; ``KRAFT_SSL_CAFILE`` alone implies SSL."""
    env = os.environ if env is None else env
    values = {
        "security_protocol": env.get(ENV_SECURITY_PROTOCOL, ""),
        "ssl_cafile": env.get(ENV_SSL_CAFILE, ""),
        "ssl_certfile": env.get(ENV_SSL_CERTFILE, ""),
        "ssl_keyfile": env.get(ENV_SSL_KEYFILE, ""),
    }
    if values["ssl_cafile"] and not values["security_protocol"]:
        values["security_protocol"] = "SSL"
    return {k: v for k, v in values.items() if v}


def client_tls_from_env(env: Mapping[str, str] | None = None) -> TlsConfig | None:
    """`client_tls` of `client_security_from_env` (None: plaintext)."""
    settings = client_security_from_env(env)
    return client_tls(
        settings.get("security_protocol", "PLAINTEXT"),
        settings.get("ssl_cafile"),
        settings.get("ssl_certfile"),
        settings.get("ssl_keyfile"),
    )


KAFKA_CLIENT_ENV: Final = {
    "security_protocol": "KAFKA_SECURITY_PROTOCOL",
    "ssl_cafile": "KAFKA_SSL_CA_LOCATION",
    "ssl_certfile": "KAFKA_SSL_CERTIFICATE_LOCATION",
    "ssl_keyfile": "KAFKA_SSL_KEY_LOCATION",
}
"""The variables `security_exports` gives a Kafka client, by kafka-python's setting: each is
librdkafka's property upper-cased with ``_`` for ``.`` (``KAFKA_SSL_CA_LOCATION`` is
``ssl.ca.location``; kafka-python's and aiokafka's ``ssl_cafile``)."""


def security_exports(settings: Mapping[str, str]) -> list[str]:
    """``KRAFT_...=value`` lines giving a shell the client ``settings`` (kafka-python's
    names, as `kraft.cluster.LocalCluster.client_security` holds them), then the same
    identity for a Kafka client on the Kafka listeners (`KAFKA_CLIENT_ENV`)."""
    names = {
        "security_protocol": ENV_SECURITY_PROTOCOL,
        "ssl_cafile": ENV_SSL_CAFILE,
        "ssl_certfile": ENV_SSL_CERTFILE,
        "ssl_keyfile": ENV_SSL_KEYFILE,
    }
    return [f"{names[k]}={v}" for k, v in settings.items() if k in names] + [
        f"{KAFKA_CLIENT_ENV[k]}={v}" for k, v in settings.items() if k in KAFKA_CLIENT_ENV
    ]


# --- refusals -------------------------------------------------------------------------------

_CLIENT_REFUSED: Final = ("Tls handshake failed", "Custom verification check failed")
_SERVER_CLOSED = "Socket closed"
_REASONS: Final = (
    ("CERTIFICATE_VERIFY_FAILED", "its certificate is not signed by a CA in ssl_cafile"),
    ("WRONG_VERSION_NUMBER", "it does not speak TLS (a PLAINTEXT listener?)"),
    ("Hostname Verification", "its certificate does not name the host dialled (SAN)"),
)


def refusal_reason(
    details: str, address: str, peer: str, tls: TlsConfig | None, *, probe: bool = True
) -> str | None:
    """One line naming who refused a handshake and why, or None (not a TLS refusal).

    ``details`` is gRPC's status text of a call to the ``peer`` (a broker, a controller) at
    ``address``. With ``probe``, a connection the server closed is probed once (see the module
    docstring); without, it is not diagnosed.
    """
    if any(marker in details for marker in _CLIENT_REFUSED):
        reason = next((why for key, why in _REASONS if key in details), None)
        if reason is None:
            start = max(details.find(marker) for marker in _CLIENT_REFUSED)
            reason = details[start : start + _QUOTE_MAX]
        return f"this client refused the TLS handshake with {peer} {address}: {reason}"
    if _SERVER_CLOSED not in details or not probe:
        return None
    outcome = _probe(address, tls)
    if outcome is None:
        return None
    if tls is None:
        return (
            f"{peer} {address} refused this plaintext client at the handshake: it requires TLS "
            "(set security_protocol=SSL with ssl_cafile, ssl_certfile, ssl_keyfile)"
        )
    if outcome == "closed":
        given = (
            "no client certificate"
            if tls.certificate_chain_pem is None
            else "this client's certificate, which is not signed by a CA it trusts"
        )
        return (
            f"{peer} {address} refused the TLS handshake: it requires a client certificate "
            f"and got {given}"
        )
    return None


def _probe(address: str, tls: TlsConfig | None) -> str | None:
    """``"closed"``: the server at ``address`` completed a TLS handshake and then hung up
    without a byte (it refused the client); ``"open"``: it went on to speak HTTP/2; None: no
    TLS there, or no server."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    with tempfile.TemporaryDirectory(prefix="kraft-tls-probe-") as tmp:
        if tls is not None and tls.certificate_chain_pem and tls.private_key_pem:
            certfile, keyfile = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
            certfile.write_bytes(tls.certificate_chain_pem)
            keyfile.write_bytes(tls.private_key_pem)
            context.load_cert_chain(certfile, keyfile)
        try:
            with (
                socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_S) as raw,
                context.wrap_socket(raw, server_hostname=host) as conn,
            ):
                conn.settimeout(PROBE_TIMEOUT_S)
                return "open" if conn.recv(1) else "closed"
        except (OSError, ValueError):  # ssl.SSLError is an OSError: no TLS there
            return None


# --- the caller's identity ------------------------------------------------------------------


class _AuthContext(Protocol):
    def auth_context(self) -> Mapping[str, object]: ...


def peer_certificate_subject(context: _AuthContext) -> str | None:
    """The verified client certificate's subject DN (``CN=alice``) of the call whose grpc.aio
    ``ServicerContext`` is ``context``; None on a plaintext connection or without a
    certificate (see the module docstring for the keys)."""
    auth = context.auth_context()
    if auth.get("transport_security_type") != [b"ssl"]:
        return None
    subject = auth.get("x509_subject")
    if not isinstance(subject, list) or not subject:
        return None
    first = subject[0]
    return first.decode() if isinstance(first, bytes) else str(first)


__all__ = [
    "ENV_SECURITY_PROTOCOL",
    "ENV_SSL_CAFILE",
    "ENV_SSL_CERTFILE",
    "ENV_SSL_KEYFILE",
    "KAFKA_CLIENT_ENV",
    "SECURITY_PROTOCOLS",
    "ClientAuth",
    "TlsConfig",
    "client_security_from_env",
    "client_tls",
    "client_tls_from_env",
    "listener_properties",
    "listener_security_protocol",
    "node_tls",
    "normalize_pem",
    "peer_certificate_subject",
    "refusal_reason",
    "security_exports",
    "ssl_material",
]
