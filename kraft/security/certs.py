"""A certificate authority and per-node and per-client certificates for mTLS (``kraft certs
create``, ``LocalCluster(tls=True)``), made with the ``cryptography`` library.

What ``create_certs(out, nodes=..., clients=...)`` writes, all PEM::

    out/ca.pem  out/ca-key.pem            the CA (kept: more certificates can be signed later)
    out/<name>.pem  out/<name>-key.pem    one per node and per client, signed by the CA
    out/<name>-keystore.pem               the key, then the chain: a node's
                                          ``ssl.keystore.location`` (Kafka's PEM keystore)

Every leaf certificate has the subject ``CN=<name>`` (the principal mapping of
``ssl.principal.mapping.rules`` reads the DN: ``User:CN=alice`` by DEFAULT), the SANs
``localhost`` and ``127.0.0.1`` (plus the node's own name and the host names and addresses given
for it in ``sans``: the names and addresses other hosts dial it by), and both extended key usages
serverAuth and clientAuth: a node serves with its certificate and presents the same one when it
dials another node (mTLS between nodes); a client's serves only as a client. Keys are ECDSA
P-256 (fast handshakes), unencrypted (``ssl.key.password`` is not supported), and the files are
written with mode 0600. These are test and development certificates: an operator with a real CA
points the ``ssl.*`` keys at its files instead.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_NAME: Final = "kraft-ca"
"""The CA's common name (a second `create_certs` run makes another CA with the same name but
another key: its certificates are not trusted by the first's)."""
VALIDITY_DAYS: Final = 825
"""How long the certificates are valid (the CA/Browser Forum's old leaf limit)."""
SANS: Final = ("localhost", "127.0.0.1")


@dataclass(frozen=True, slots=True, kw_only=True)
class CertPaths:
    """The files of one certificate: the PEM chain (leaf then CA), its private key, and both
    in one file (a PEM keystore)."""

    name: str
    certfile: Path
    keyfile: Path
    keystore: Path


@dataclass(frozen=True, slots=True, kw_only=True)
class CertSet:
    """What `create_certs` wrote."""

    cafile: Path
    ca_keyfile: Path
    nodes: tuple[CertPaths, ...]
    clients: tuple[CertPaths, ...]

    def node(self, name: str) -> CertPaths:
        """The certificate of node ``name``.

        Raises:
            KeyError: no node of that name.
        """
        for c in self.nodes:
            if c.name == name:
                return c
        raise KeyError(name)

    def client(self, name: str) -> CertPaths:
        """The certificate of client ``name``.

        Raises:
            KeyError: no client of that name.
        """
        for c in self.clients:
            if c.name == name:
                return c
        raise KeyError(name)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    os.chmod(path, 0o600)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _check_name(name: str) -> str:
    if not name or len(name) > 64 or not all(c.isalnum() or c in "-_." for c in name):
        raise ValueError(f"certificate name {name[:40]!r}: use 1-64 letters, digits, '-_.'")
    return name


def _check_host(host: str) -> x509.GeneralName:
    """A SAN entry: an IP address (v4 or v6) or a DNS name (RFC 1123 labels, ``*.`` allowed
    first)."""
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        pass
    labels = host.removeprefix("*.").split(".")
    if len(host) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise ValueError(f"subject alternative name {host[:40]!r}: not an IP address or host name")
    return x509.DNSName(host)


_LABEL: Final = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def parse_san(value: str) -> tuple[str, tuple[str, ...]]:
    """``NODE=HOST[,HOST...]`` (``kraft certs create --san``) as ``(node, hosts)``.

    Raises:
        ValueError: no ``=``, no node name, no host, or a host that is neither an IP address nor
            a host name.
    """
    node, sep, hosts = value.partition("=")
    names = tuple(h.strip() for h in hosts.split(",") if h.strip())
    if not sep or not node.strip() or not names:
        raise ValueError(f"--san expects NODE=HOST[,HOST...], got {value!r}")
    for host in names:
        _check_host(host)
    return node.strip(), names


def create_certs(
    out: str | Path,
    *,
    nodes: Sequence[str] = (),
    clients: Sequence[str] = (),
    sans: Mapping[str, Sequence[str]] | None = None,
    ca_name: str = CA_NAME,
) -> CertSet:
    """Make a CA in ``out`` and sign a certificate for every node and client name.

    Args:
        sans: per node name, the extra host names and IP addresses its certificate names (the
            addresses its peers and clients dial: ``{"broker-101": ["10.0.0.11", "b1.lan"]}``).

    Raises:
        ValueError: a name is empty, too long, not a file-name-safe word, or repeated; ``sans``
            names a node not in ``nodes`` or a host that is not an IP address or host name.
        OSError: ``out`` cannot be written.
    """
    names = [_check_name(n) for n in (*nodes, *clients)]
    if len(set(names)) != len(names):
        raise ValueError("certificate names must be distinct across --nodes and --clients")
    extra = {node: [_check_host(h) for h in hosts] for node, hosts in (sans or {}).items()}
    unknown = sorted(set(extra) - set(nodes))
    if unknown:
        raise ValueError(f"subject alternative names for {', '.join(unknown)}: not in --nodes")
    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    until = now + datetime.timedelta(days=VALIDITY_DAYS)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name(ca_name))
        .issuer_name(_name(ca_name))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    cafile, ca_keyfile = directory / "ca.pem", directory / "ca-key.pem"
    _write(cafile, ca_pem)
    _write(ca_keyfile, _key_pem(ca_key))

    def leaf(name: str, *, server: bool) -> CertPaths:
        key = ec.generate_private_key(ec.SECP256R1())
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
        if server:
            usages.insert(0, ExtendedKeyUsageOID.SERVER_AUTH)
        wanted = [
            x509.DNSName("localhost"),
            x509.DNSName(name),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            *extra.get(name, ()),
        ]
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(until)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.SubjectAlternativeName(list(dict.fromkeys(wanted))),
                critical=False,
            )
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
            )
            .sign(ca_key, hashes.SHA256())
        )
        paths = CertPaths(
            name=name,
            certfile=directory / f"{name}.pem",
            keyfile=directory / f"{name}-key.pem",
            keystore=directory / f"{name}-keystore.pem",
        )
        chain = cert.public_bytes(serialization.Encoding.PEM) + ca_pem
        _write(paths.certfile, chain)
        _write(paths.keyfile, _key_pem(key))
        _write(paths.keystore, _key_pem(key) + chain)
        return paths

    return CertSet(
        cafile=cafile,
        ca_keyfile=ca_keyfile,
        nodes=tuple(leaf(n, server=True) for n in nodes),
        clients=tuple(leaf(n, server=False) for n in clients),
    )


def certificate_subject(pem: bytes) -> str:
    """The RFC 4514 subject of the first certificate in ``pem`` (``CN=alice``)."""
    return x509.load_pem_x509_certificate(pem).subject.rfc4514_string()


__all__ = [
    "CA_NAME",
    "SANS",
    "VALIDITY_DAYS",
    "CertPaths",
    "CertSet",
    "certificate_subject",
    "create_certs",
    "parse_san",
]
